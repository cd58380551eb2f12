"""The rules, and what the engine needs to know about each (the registry).

One small function per check, each RunSignals -> list[Finding]. A `RuleSpec` says which
codes a rule gives and how the engine runs it, so the engine treats no rule specially.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.rules.activations import check_dead_relu, check_saturated_activation
from tb_trainhealth.rules.baseline import check_worse_than_baseline
from tb_trainhealth.rules.class_balance import check_majority_class
from tb_trainhealth.rules.constant_yardstick import check_far_worse_than_constant, check_worse_than_constant
from tb_trainhealth.rules.crashes import check_oom, check_training_crash
from tb_trainhealth.rules.data_scale import check_unnormalized_input, check_unnormalized_target
from tb_trainhealth.rules.gradients import check_exploding_gradients, check_vanishing_gradients
from tb_trainhealth.rules.initialization import check_bad_initialization
from tb_trainhealth.rules.input_pipeline import check_input_bound, check_input_pipeline_config
from tb_trainhealth.rules.loss_curve import check_loss_plateau
from tb_trainhealth.rules.loss_divergence import check_loss_divergence
from tb_trainhealth.rules.loss_metric import check_loss_metric_mismatch
from tb_trainhealth.rules.loss_oscillation import check_loss_oscillation
from tb_trainhealth.rules.memory import check_memory_growth
from tb_trainhealth.rules.model_lint import check_model_config, check_output_loss_mismatch
from tb_trainhealth.rules.numerics import check_nonfinite
from tb_trainhealth.rules.overfitting import check_overfitting
from tb_trainhealth.rules.parts_off import check_part_not_recorded, check_stale_train_step
from tb_trainhealth.rules.preflight import check_initial_loss_off, check_no_gradient
from tb_trainhealth.rules.preflight_fit import check_cannot_fit_small_batch, check_input_ignored
from tb_trainhealth.rules.stalls import check_ended_abruptly, check_training_stalled
from tb_trainhealth.rules.training_data import check_label_problem
from tb_trainhealth.rules.undertrained import check_undertrained
from tb_trainhealth.signals import RunSignals


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    check: Callable[[RunSignals], list[Finding]]
    codes: tuple[str, ...]
    # Judged only once training has ended (a run still improving mid-run is just training).
    final_only: bool = False
    # Sees the run past its first NaN/Inf loss or weights; every other rule sees only the
    # steps before it (after it, every value is noise).
    sees_past_nan: bool = False
    # Another finding that explains this one's evidence: {code: at this severity or worse}.
    # When one is present, this rule's findings are dropped.
    defers_to: Mapping[str, Severity] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.check.__name__


# The unnormalized_input finding a constant first batch gives: every unit sees the same
# input, so dead units and zero gradients below them follow from it.
_CONSTANT_INPUT = {"unnormalized_input": Severity.CRITICAL}

# A run that crashed, blew up, or was set up wrongly was not "stopped while improving": more
# epochs are not the fix, the other finding's fix is.
_BROKEN_SET_UP = {
    "training_crash": Severity.CRITICAL,
    "oom": Severity.CRITICAL,
    "nonfinite": Severity.CRITICAL,
    "loss_divergence": Severity.WARNING,
    "output_loss_mismatch": Severity.WARNING,
    "label_problem": Severity.CRITICAL,
    "unnormalized_input": Severity.WARNING,
    "training_stalled": Severity.CRITICAL,
    "ended_abruptly": Severity.CRITICAL,
    "bad_initialization": Severity.CRITICAL,
    "majority_class": Severity.WARNING,
    "unnormalized_target": Severity.WARNING,
    "loss_metric_mismatch": Severity.WARNING,
    "model_config": Severity.WARNING,
}

# A cause found from the set-up explains the symptom rules' findings, which would
# otherwise name a wrong cause (lower the learning rate, overfitting, a plateau, dead units).
# Initial weights too large (or symmetric) explain the NaN, the blow-up before it, the plateau.
_BAD_INIT = {"bad_initialization": Severity.CRITICAL}
# A model stuck at the class prior or at the targets' mean, or a loss that measures something
# else: the plateau is that, not the learning rate.
_STUCK_AT_BASELINE = {
    "model_config": Severity.WARNING,  # dropout or a weight penalty the run confirms holds it there
    "majority_class": Severity.WARNING,
    "unnormalized_target": Severity.WARNING,
    "loss_metric_mismatch": Severity.WARNING,
    "worse_than_constant": Severity.CRITICAL,  # ...far worse than one, or collapsed onto it: the plateau is that
}

# A first loss far off, or a fit stuck at the constant prediction, that the lint already explains
# (a wrong output activation, labels that do not fit the loss, unscaled inputs): the lint's
# finding says what to change.
_PREFLIGHT_EXPLAINED = {
    "output_loss_mismatch": Severity.WARNING,
    "label_problem": Severity.CRITICAL,
    "unnormalized_input": Severity.WARNING,
    "bad_initialization": Severity.CRITICAL,
}

# What a cause explains: where both are found, the cause is listed first (in the CLI, the JSON and
# the tab), whatever their severities, so the user reads what to change before its symptoms.
_SYMPTOMS_OF_BAD_SCALE = (
    "nonfinite",
    "exploding_gradients",
    "loss_divergence",
    "loss_oscillation",
    "loss_plateau",
    "dead_relu",
    "saturated_activation",
    "vanishing_gradients",
    "worse_than_constant",
    "undertrained",
)
EXPLAINS: Mapping[str, tuple[str, ...]] = {
    "bad_initialization": _SYMPTOMS_OF_BAD_SCALE,
    "unnormalized_input": _SYMPTOMS_OF_BAD_SCALE,
    "unnormalized_target": _SYMPTOMS_OF_BAD_SCALE,
    "output_loss_mismatch": (
        "loss_plateau",
        "worse_than_constant",
        "initial_loss_off",
        "majority_class",
        "nonfinite",
        "loss_divergence",
        "dead_relu",
        "cannot_fit_small_batch",
        "undertrained",
    ),
    "label_problem": (
        "overfitting",
        "loss_plateau",
        "worse_than_constant",
        "nonfinite",
        "majority_class",
        "initial_loss_off",
        "loss_metric_mismatch",
        "undertrained",
    ),
    "exploding_gradients": ("nonfinite", "loss_divergence", "loss_oscillation", "dead_relu", "worse_than_constant"),
    "dead_relu": ("loss_plateau", "vanishing_gradients", "worse_than_constant", "undertrained", "majority_class"),
    "saturated_activation": ("vanishing_gradients", "loss_plateau", "worse_than_constant", "undertrained"),
    # Gradients that never reach the first layers hold the loss where it is.
    "vanishing_gradients": ("loss_plateau", "worse_than_constant", "undertrained"),
    "model_config": ("loss_plateau", "worse_than_constant", "majority_class", "undertrained"),
    "input_pipeline_config": ("input_bound",),
}

RULES: tuple[RuleSpec, ...] = (
    RuleSpec(check_nonfinite, ("nonfinite",), sees_past_nan=True, defers_to=_BAD_INIT),
    RuleSpec(check_exploding_gradients, ("exploding_gradients",), defers_to=_BAD_INIT),
    RuleSpec(
        check_vanishing_gradients,
        ("vanishing_gradients",),
        defers_to={**_CONSTANT_INPUT, "dead_relu": Severity.WARNING},  # zero gradients below dead units
    ),
    RuleSpec(check_loss_divergence, ("loss_divergence",), defers_to=_BAD_INIT),
    RuleSpec(check_loss_plateau, ("loss_plateau",), defers_to={**_BAD_INIT, **_STUCK_AT_BASELINE}),
    RuleSpec(check_loss_oscillation, ("loss_oscillation",)),
    # Validation at chance from the first epoch is labels that do not belong to their inputs;
    # training and validation labels of other class shares, or inputs repeated with other labels,
    # open the same gap between the two: the labels are what to fix, not the regularisation.
    RuleSpec(check_overfitting, ("overfitting",), defers_to={"label_problem": Severity.WARNING}),
    RuleSpec(check_training_crash, ("training_crash",)),
    RuleSpec(check_oom, ("oom",)),
    RuleSpec(check_memory_growth, ("memory_growth",)),
    RuleSpec(check_output_loss_mismatch, ("output_loss_mismatch",)),
    RuleSpec(check_model_config, ("model_config",)),
    RuleSpec(check_input_bound, ("input_bound",)),
    RuleSpec(check_input_pipeline_config, ("input_pipeline_config",)),
    RuleSpec(check_label_problem, ("label_problem",)),
    RuleSpec(check_unnormalized_input, ("unnormalized_input",)),
    RuleSpec(check_unnormalized_target, ("unnormalized_target",)),
    RuleSpec(check_majority_class, ("majority_class",), defers_to={"model_config": Severity.WARNING}),
    RuleSpec(check_loss_metric_mismatch, ("loss_metric_mismatch",)),
    # A run no better than a constant prediction, where no other finding names why (a plateau
    # names a learning rate too small to move the weights).
    RuleSpec(
        check_worse_than_constant,
        ("worse_than_constant",),
        final_only=True,
        defers_to={
            **_BROKEN_SET_UP,
            **_BAD_INIT,
            "loss_divergence": Severity.WARNING,
            "loss_plateau": Severity.WARNING,
        },
    ),
    # ...far worse than it, or collapsed onto it after a blow-up: that, not a plateau, is what to fix.
    RuleSpec(
        check_far_worse_than_constant,
        ("worse_than_constant",),
        final_only=True,
        defers_to={**_BROKEN_SET_UP, **_BAD_INIT},
    ),
    RuleSpec(check_bad_initialization, ("bad_initialization",), sees_past_nan=True),
    RuleSpec(
        check_undertrained,
        ("undertrained",),
        final_only=True,
        defers_to={**_BROKEN_SET_UP, "worse_than_constant": Severity.WARNING},  # more epochs of a worse model
    ),
    # Inputs scaled to almost nothing (or far too large) explain dead units too.
    # (Targets in the thousands throw the ReLUs dead with their huge first gradients.)
    RuleSpec(
        check_dead_relu,
        ("dead_relu",),
        # A learning rate that threw the loss around, or a penalty that holds the weights at zero, killed them.
        defers_to={
            "unnormalized_input": Severity.WARNING,
            "unnormalized_target": Severity.WARNING,
            "loss_oscillation": Severity.WARNING,
            "model_config": Severity.WARNING,
            **_BAD_INIT,
        },
    ),
    RuleSpec(check_saturated_activation, ("saturated_activation",)),
    # Preflight (before any training step). An initial loss explained by a lint finding, and a
    # small batch that cannot be fitted because the model ignores its input, are one problem.
    RuleSpec(check_initial_loss_off, ("initial_loss_off",), defers_to=_PREFLIGHT_EXPLAINED),
    RuleSpec(check_cannot_fit_small_batch, ("cannot_fit_small_batch",), defers_to={"input_ignored": Severity.CRITICAL}),
    RuleSpec(check_input_ignored, ("input_ignored",), defers_to={**_CONSTANT_INPUT, **_PREFLIGHT_EXPLAINED}),
    RuleSpec(check_no_gradient, ("no_gradient",)),
    # About the process, not the values: they see past a NaN too.
    RuleSpec(check_training_stalled, ("training_stalled",), sees_past_nan=True),
    RuleSpec(check_ended_abruptly, ("ended_abruptly",), sees_past_nan=True),
    # Judged by the callback at the end of a fit against the run the user named good.
    RuleSpec(check_worse_than_baseline, ("worse_than_baseline",), sees_past_nan=True),
    # What the run could not record (a part off): which diagnoses it cannot have.
    RuleSpec(check_part_not_recorded, ("part_not_recorded",), sees_past_nan=True),
    # A fit that ran a train step traced before `trainable` changed (the callback left its probe out).
    RuleSpec(check_stale_train_step, ("model_config",), sees_past_nan=True),
)
