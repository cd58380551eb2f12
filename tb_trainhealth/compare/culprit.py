"""Which change most likely made the run worse: each changed setting scored by how much settings of
its kind are known to move training, how far it moved, and whether the curves point at its kind.

The evidence, as practitioners read two curves: curves that part from the first steps point at
the optimisation (learning rate, optimizer, initializer, loss, activation, clipping); curves that
part only in validation point at regularisation or the data; a run that stopped early points at
epochs or EarlyStopping; fewer steps per epoch point at the batch size or the sample count.
"""

from __future__ import annotations

import dataclasses
import enum
import math

from tb_trainhealth.compare.settings_diff import ARCHITECTURE, Change
from tb_trainhealth.contract.run_settings import DATA, ENVIRONMENT


class Kind(str, enum.Enum):
    OPTIMISATION = "optimisation"
    REGULARISATION = "regularisation"
    DATA = "data"
    DURATION = "duration"
    BATCH = "batch"
    ENVIRONMENT = "environment"
    OTHER = "other"


# How much a change of each setting is known to move training, 0..10 (the fault taxonomies'
# frequent culprits high; bookkeeping low). Keys are whole settings or a layer/callback setting's
# last part.
PRIOR = {
    "learning_rate": 10.0,
    "learning_rate_schedule": 7.0,
    "optimizer": 8.0,
    "loss": 8.0,
    "activation": 7.0,
    "kernel_initializer": 6.0,
    "bias_initializer": 3.0,
    "train_labels": 9.0,
    "label_distribution": 9.0,
    "train_inputs": 7.0,
    "train_samples": 7.0,
    "input_mean": 6.0,
    "input_std": 6.0,
    "batch_size": 6.0,
    "epochs": 6.0,
    "steps_per_epoch": 6.0,
    "patience": 6.0,
    "min_delta": 5.0,
    "monitor": 4.0,
    "restore_best_weights": 3.0,
    "clipnorm": 6.0,
    "clipvalue": 6.0,
    "global_clipnorm": 6.0,
    "rate": 5.0,
    "dropout": 5.0,
    "recurrent_dropout": 4.0,
    "kernel_regularizer": 5.0,
    "bias_regularizer": 3.0,
    "activity_regularizer": 4.0,
    "weight_decay": 5.0,
    "label_smoothing": 3.0,
    "from_logits": 7.0,
    "momentum": 4.0,
    "beta_1": 3.0,
    "beta_2": 2.0,
    "epsilon": 3.0,
    "rho": 3.0,
    "nesterov": 1.0,
    "units": 4.0,
    "filters": 4.0,
    "use_bias": 1.0,
    ARCHITECTURE: 6.0,
    "trainable": 6.0,
    "dtype_policy": 2.0,
    # Constructor arguments that change what a layer computes (recorded since 2026-12): the fault
    # taxonomies' "wrong tensor shape" / "wrong input format" / "data flow" faults.
    "data_format": 6.0,
    "go_backwards": 6.0,
    "mask_zero": 6.0,
    "target_shape": 6.0,
    "dims": 6.0,
    "axis": 4.0,
    "return_state": 3.0,
}
DEFAULT_PRIOR = 2.0
# Settings of bookkeeping: never the culprit while anything else changed.
NO_EFFECT = {"metrics", "callbacks", "jit_compile", "steps_per_execution", "validation_samples", "input_dtype"}
NO_EFFECT_PRIOR = 0.1

KIND_OF = {
    "learning_rate": Kind.OPTIMISATION,
    "learning_rate_schedule": Kind.OPTIMISATION,
    "optimizer": Kind.OPTIMISATION,
    "loss": Kind.OPTIMISATION,
    "activation": Kind.OPTIMISATION,
    "kernel_initializer": Kind.OPTIMISATION,
    "bias_initializer": Kind.OPTIMISATION,
    "clipnorm": Kind.OPTIMISATION,
    "clipvalue": Kind.OPTIMISATION,
    "global_clipnorm": Kind.OPTIMISATION,
    "from_logits": Kind.OPTIMISATION,
    "momentum": Kind.OPTIMISATION,
    "beta_1": Kind.OPTIMISATION,
    "beta_2": Kind.OPTIMISATION,
    "epsilon": Kind.OPTIMISATION,
    "rho": Kind.OPTIMISATION,
    "nesterov": Kind.OPTIMISATION,
    "units": Kind.OPTIMISATION,
    "filters": Kind.OPTIMISATION,
    ARCHITECTURE: Kind.OPTIMISATION,
    "trainable": Kind.OPTIMISATION,
    **{
        name: Kind.OPTIMISATION for name in ("data_format", "go_backwards", "mask_zero", "target_shape", "dims", "axis")
    },
    "rate": Kind.REGULARISATION,
    "dropout": Kind.REGULARISATION,
    "recurrent_dropout": Kind.REGULARISATION,
    "kernel_regularizer": Kind.REGULARISATION,
    "bias_regularizer": Kind.REGULARISATION,
    "activity_regularizer": Kind.REGULARISATION,
    "weight_decay": Kind.REGULARISATION,
    "label_smoothing": Kind.REGULARISATION,
    "epochs": Kind.DURATION,
    "patience": Kind.DURATION,
    "min_delta": Kind.DURATION,
    "monitor": Kind.DURATION,
    "restore_best_weights": Kind.DURATION,
    "start_from_epoch": Kind.DURATION,
    "batch_size": Kind.BATCH,
    "steps_per_epoch": Kind.BATCH,
    **{name: Kind.DATA for name in DATA},
    **{name: Kind.ENVIRONMENT for name in ENVIRONMENT},
}
# How strongly matching evidence multiplies a score.
EVIDENCE = 4.0


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the curves and the fit ends say, as `comparison` measured it."""

    parted_early: bool = False  # the training loss left the band in the first EARLY_SHARE of the run
    validation_only: bool = False  # worse in validation while training kept within the band
    stopped_earlier: bool = False  # fewer epochs run than the baseline (EarlyStopping, epochs)
    fewer_steps_per_epoch: bool = False
    # A crash, NaN, OOM or stall the baseline did not have, or a deciding metric that ended far from the
    # run's own best: it did not end worse for want of epochs.
    broke: bool = False


def key_of(setting: str) -> str:
    """The part of a setting that says what it is: "dense_1.activation" -> "activation"."""
    return setting.rpartition(".")[2] if setting not in PRIOR and setting not in KIND_OF else setting


def kind_of(setting: str) -> Kind:
    return KIND_OF.get(key_of(setting), Kind.OTHER)


# An optimizer's own settings (Adam's beta_1, Adadelta's rho): they change with its class.
OPTIMIZER_OWN = {
    "momentum",
    "nesterov",
    "beta_1",
    "beta_2",
    "epsilon",
    "rho",
    "amsgrad",
    "use_ema",
    "initial_accumulator_value",
}


# How the labels are summarised follows the loss (class shares for a classification loss, the
# targets' mean and std for any other; duplicates are counted for class labels only).
LABEL_SUMMARIES = (
    "label_distribution",
    "validation_label_distribution",
    "distinct_input_share",
    "duplicate_label_conflict",
    "duplicate_label_ceiling",
)


def ranked(changes: list[Change], evidence: Evidence) -> list[Change]:
    """Most likely culprit first (ties: by name, for a stable order). A change that only follows
    another one comes after everything that leads (`follows`)."""
    changed = {change.setting for change in changes}

    def order(change: Change) -> tuple[float, str]:
        behind = change.layer_alone or follows(change.setting, changed)
        return (-(NO_EFFECT_PRIOR if behind else score(change, evidence)), change.setting)

    return sorted(changes, key=order)


def follows(setting: str, changed: set[str]) -> bool:
    """A change that comes with another, not one of its own: an optimizer's own settings with a new
    optimizer; the label fingerprint (which weighs each label by its input) with other inputs while the
    class shares stay; the labels' summaries with a new loss on the same labels (one-hot or class ids,
    shares or mean and std: the same labels, seen through another loss)."""
    if "optimizer" in changed and setting in OPTIMIZER_OWN:
        return True
    if setting == "train_labels" and "train_inputs" in changed and "label_distribution" not in changed:
        return True
    return setting in LABEL_SUMMARIES and "loss" in changed and "train_labels" not in changed


def score(change: Change, evidence: Evidence) -> float:
    key = key_of(change.setting)
    prior = NO_EFFECT_PRIOR if key in NO_EFFECT else PRIOR.get(key, DEFAULT_PRIOR)
    if kind_of(change.setting) is Kind.ENVIRONMENT:
        prior = min(prior, 1.0)
    if evidence.broke and key in BUDGET:  # (a budget does not break a run: a NaN-input run "epochs 25 -> 2")
        prior = NO_EFFECT_PRIOR
    factor = DECISIVE if decisive(change) else 1.0
    return prior * factor * _magnitude(change) * _evidence_factor(kind_of(change.setting), evidence)


# How many epochs, steps and samples a run had: what a run that broke stopped early by, not why.
BUDGET = frozenset({"epochs", "steps_per_epoch", "initial_epoch", "train_samples", "validation_samples", "patience"})
# A change that alone explains a run that learns nothing outranks everything else this much.
DECISIVE = 100.0
# Class shares this far apart (total variation) are another label mix; a few percent is sampling.
SHARE_SHIFT = 0.1
# A data summary measured on one side only counts this much of a change.
NOT_MEASURED = 0.25
# A run that broke names a likely cause only where a change scores at least this (a learning rate,
# a loss, the labels): the break itself, which the verdict says, is the story otherwise.
BROKE_MIN_SCORE = 5.0


def likely_culprits(changes: list[Change], evidence: Evidence, named: int) -> int:
    """How many of the `ranked` changes to name as likely causes (at most `named`)."""
    if not changes:
        return 0
    if evidence.broke and score(changes[0], evidence) < BROKE_MIN_SCORE:
        return 0
    return min(named, len(changes))


def decisive(change: Change) -> bool:
    """Inputs with no variance left (all one value: `x // 255` of uint8 pixels): no model learns
    from them, whatever else changed (the demo's zeroed_inputs read "likely cause epochs 20 -> 4")."""
    a, b = change.baseline, change.run
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return key_of(change.setting) == "input_std" and numbers and a > 0 and b == 0


def _magnitude(change: Change) -> float:
    """A learning rate 1000x off moves training more than one 2x off: 1 + decades apart, for numbers;
    class shares by how far apart they are (two draws of one mix differ by a few percent)."""
    a, b = change.baseline, change.run
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if numbers and a > 0 and b > 0:
        return 1.0 + min(abs(math.log10(b / a)), 4.0)
    if (a is None) != (b is None) and key_of(change.setting) in (*DATA, "batch_size"):  # not measured on one
        return NOT_MEASURED  # side (NaN in the data, a dataset that batches itself): weak evidence alone
    shares = _shares(a), _shares(b)
    if shares[0] is not None and shares[1] is not None and len(shares[0]) == len(shares[1]):
        apart = 0.5 * sum(abs(x - y) for x, y in zip(*shares))
        return min(1.0, max(NO_EFFECT_PRIOR, apart / SHARE_SHIFT))
    return 1.0


def _shares(value: object) -> list[float] | None:
    """A list of class shares (summing to about 1), else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in value):
        return None
    return [float(v) for v in value] if abs(sum(value) - 1.0) < 0.02 else None


def _evidence_factor(kind: Kind, evidence: Evidence) -> float:
    factor = 1.0
    if evidence.parted_early and kind is Kind.OPTIMISATION:
        factor *= EVIDENCE
    if evidence.validation_only and kind in (Kind.REGULARISATION, Kind.DATA):
        factor *= EVIDENCE
    if evidence.stopped_earlier and kind is Kind.DURATION and not evidence.broke:
        factor *= EVIDENCE
    if evidence.fewer_steps_per_epoch and (kind is Kind.BATCH or kind is Kind.DATA):
        factor *= EVIDENCE
    return factor


def why(change: Change, evidence: Evidence) -> str:
    """One sentence: why this change is the likely culprit."""
    kind = kind_of(change.setting)
    reasons = {
        Kind.OPTIMISATION: "the training loss parted from the baseline's early on, which points at how the "
        "model is optimised"
        if evidence.parted_early
        else "it changes how the model is optimised",
        Kind.REGULARISATION: "training kept pace with the baseline and only validation fell behind, the mark "
        "of regularisation"
        if evidence.validation_only
        else "it changes how strongly the model is regularised",
        Kind.DATA: "the model learns from different data"
        + (": only validation fell behind" if evidence.validation_only else ""),
        Kind.DURATION: "the run stopped after fewer epochs than the baseline"
        if evidence.stopped_earlier
        else "it changes how long the model trains",
        Kind.BATCH: "each epoch took fewer optimizer steps than the baseline's"
        if evidence.fewer_steps_per_epoch
        else "it changes how many optimizer steps an epoch takes",
        Kind.ENVIRONMENT: "a different library version or machine can change numerics",
        Kind.OTHER: "it is the setting that changed",
    }
    return reasons[kind]
