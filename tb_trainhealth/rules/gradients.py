"""`exploding_gradients` and `vanishing_gradients`, from the per-step gradient norms."""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import (
    ADD_LR_SCHEDULE,
    CHANGE_HIDDEN_ACTIVATION,
    CHANGE_INITIALIZER,
    Evidence,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER
from tb_trainhealth.rules.run_setup import rate_blew_it_up
from tb_trainhealth.series_math import (
    finite_part,
    head_level,
    rolling_median,
    smoothing_window,
)
from tb_trainhealth.signals import RunSignals

MIN_POINTS = 10

# Exploding: the smoothed global gradient norm climbs this many times above where
# it started (growth-based, like losslint's divergence ratio; AUTOTRAINER instead
# compares first/last layer norms, > 70). Healthy runs in bench/rule_zoo.py stay
# within ~30x. Onset is where the growth passes EXPLODE_ONSET_RATIO.
EXPLODE_RATIO = 1e3
EXPLODE_ONSET_RATIO = 10.0
# ...and ends above this absolute norm: a fine-tune whose norms rise from 1e-6 to 1e-2
# has grown 1e4x without anything exploding.
EXPLODE_MIN_PEAK = 1.0
# Critical when growth reaches float overflow territory.
EXPLODE_CRITICAL_RATIO = 1e6

# Vanishing, AUTOTRAINER (Zhang et al., ICSE 2021; shiningrain/AUTOTRAINER utils/monitor.py):
# first-layer / last-layer gradient norm below beta_1 = 1e-3 AND first-layer norm below
# beta_2 = 1e-4 ...
VANISH_RATIO = 1e-3
VANISH_FIRST_NORM = 1e-4
# ... or SageMaker Debugger's VanishingGradient: mean |gradient| below 1e-7 (we use the
# first layer's RMS) while the last layer still learns.
VANISH_ABSOLUTE = 1e-7


def check_exploding_gradients(run: RunSignals) -> list[Finding]:
    series = run.get(sig.GRAD_NORM)
    if series is None:
        return []
    norms = finite_part(series)
    keep = norms.values > 0
    steps, values = norms.steps[keep], norms.values[keep]
    if len(values) < MIN_POINTS:
        return []
    smooth = rolling_median(values, smoothing_window(len(values)))
    start = head_level(smooth)
    ratio = float(smooth.max() / start)
    overflowed = len(norms) < len(series) and not np.isfinite(series.values[-1])
    if ratio < EXPLODE_RATIO or smooth.max() < EXPLODE_MIN_PEAK:
        return []
    onset_index = int(np.argmax(smooth > start * EXPLODE_ONSET_RATIO))
    onset = int(steps[onset_index])
    peak_step = int(steps[int(np.argmax(smooth))])
    layer = first_layer_to_grow(run)
    severity = Severity.CRITICAL if ratio >= EXPLODE_CRITICAL_RATIO or overflowed else Severity.WARNING
    detail = (
        f"Global gradient norm grew {ratio:.3g}x: from {start:.3g} at the start to "
        f"{smooth.max():.3g} (smoothed) at step {peak_step}; growth began near step {onset}."
    )
    if layer:
        detail += f" Layer {layer} grew first."
    rate = rate_blew_it_up(run, onset)
    if rate is not None:
        detail = (
            f"The learning rate ({rate:.3g}, {run.info.optimizer or 'optimizer'}) is far too large for this model: "
            f"the first updates blew the gradients up from step {onset}. " + detail
        )
    fixes = (
        *((LR_FIX_LOWER,) if rate is not None else ()),
        CLIP_FIX,
        Fix(
            "Add normalisation so activations (and gradients) keep their scale.",
            "x = keras.layers.BatchNormalization()(x)  # or LayerNormalization for sequences",
        ),
        Fix(
            "Use an initialiser matched to the activation.",
            'keras.layers.Dense(units, activation="relu", kernel_initializer="he_normal")',
            intents=(CHANGE_INITIALIZER,),
        ),
        Fix(
            "Warm up the learning rate over the first steps.",
            "lr = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=10_000, warmup_target=1e-3, warmup_steps=1_000)",
            intents=(ADD_LR_SCHEDULE,),
        ),
    )
    return [
        Finding(
            code=Code.EXPLODING_GRADIENTS,
            severity=severity,
            step=onset,
            title=f"Gradients exploded: norm grew {ratio:.2g}x from step {onset}"
            + (f": the learning rate {rate:.3g} is far too large" if rate is not None else ""),
            detail=detail,
            evidence=Evidence((sig.GRAD_NORM, sig.LAYER_GRAD_NORM), onset, peak_step, layer),
            fixes=fixes,
        )
    ]


def first_layer_to_grow(run: RunSignals) -> str | None:
    """The layer whose gradient norm passed EXPLODE_ONSET_RATIO times its start first."""
    layer_norms = run.layer_series.get(sig.LAYER_GRAD_NORM)
    if layer_norms is None or len(layer_norms) < MIN_POINTS or not run.layers:
        return None
    values = np.where(np.isfinite(layer_norms.values), layer_norms.values, np.inf)
    starts = np.median(values[: max(1, len(values) // 20)], axis=0)
    grown = values > np.maximum(starts, 1e-30) * EXPLODE_ONSET_RATIO
    first_index = np.where(grown.any(axis=0), np.argmax(grown, axis=0), len(values))
    if first_index.min() >= len(values):
        return None
    return run.layers[int(np.argmin(first_index))].name


def _first_and_last_layer(run: RunSignals) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """Per-step gradient norms (steps, norms[:, first|last]) of the first and last layers with parameters."""
    layer_norms = run.layer_series.get(sig.LAYER_GRAD_NORM)
    if layer_norms is None or len(layer_norms) < MIN_POINTS or len(run.layers) < 2:
        return None
    columns = [i for i, layer in enumerate(run.layers) if layer.params > 0]
    if len(columns) < 2:
        return None
    norms = layer_norms.values[:, [columns[0], columns[-1]]]
    usable = np.isfinite(norms).all(axis=1)
    if usable.sum() < MIN_POINTS:
        return None
    return layer_norms.steps[usable], norms[usable], columns[0], columns[-1]


@dataclasses.dataclass(frozen=True)
class Vanishing:
    onset: int
    last_step: int
    ratio: float  # first layer's gradient norm / last layer's (median over the second half)
    first_norm: float
    first_layer: str
    last_layer: str


def vanishing(run: RunSignals) -> Vanishing | None:
    """Where the first layer's gradient stays a vanishing share of the last layer's through most of
    the run's second half (AUTOTRAINER's condition, or SageMaker's absolute one), from when."""
    found = _first_and_last_layer(run)
    if found is None:
        return None
    steps, norms, first_column, last_column = found
    first, last = norms[:, 0], norms[:, 1]
    first_rms = first / np.sqrt(run.layers[first_column].params)
    last_rms = last / np.sqrt(run.layers[last_column].params)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(last > 0, first / last, np.inf)
    # Per step: AUTOTRAINER's condition, or SageMaker's absolute one.
    vanishing = ((ratio < VANISH_RATIO) & (first < VANISH_FIRST_NORM)) | (
        (first_rms < VANISH_ABSOLUTE) & (last_rms >= VANISH_ABSOLUTE)
    )
    below = rolling_median(vanishing.astype(np.float64), smoothing_window(len(steps))) > 0.5
    late = slice(len(steps) // 2, None)
    if np.mean(vanishing[late]) <= 0.5:  # must hold through most of the second half
        return None
    # Onset: start of the final stretch the condition holds.
    holds_until_end = np.flip(np.cumprod(np.flip(below)))
    onset_index = int(np.argmax(holds_until_end)) if holds_until_end.any() else len(steps) // 2
    onset = int(steps[onset_index])
    late_ratio = float(np.median(ratio[late]))
    late_first = float(np.median(first[late]))
    first_name, last_name = run.layers[first_column].name, run.layers[last_column].name
    return Vanishing(onset, int(steps[-1]), late_ratio, late_first, first_name, last_name)


RELU_HIDDEN_FIX = Fix(
    "Use ReLU-family activations in hidden layers instead of sigmoid/tanh.",
    'keras.layers.Dense(units, activation="relu", kernel_initializer="he_normal")',
    intents=(CHANGE_HIDDEN_ACTIVATION,),
)


def check_vanishing_gradients(run: RunSignals) -> list[Finding]:
    # (Zero inputs or dead ReLU units give zero gradients below them: the registry defers this
    # rule to those findings.)
    gone = vanishing(run)
    if gone is None:
        return []
    detail = (
        f"Gradient norm of the first layer {gone.first_layer} is {gone.first_norm:.3g}, "
        f"{gone.ratio:.2g}x that of the last layer {gone.last_layer} (median over the second half of the run); "
        "the early layers are barely learning."
    )
    fixes = (
        RELU_HIDDEN_FIX,
        Fix(
            "Add normalisation between layers.",
            "x = keras.layers.BatchNormalization()(x)",
        ),
        Fix(
            "Add residual (skip) connections in deep stacks.",
            "x = keras.layers.Add()([x, keras.layers.Dense(units, activation='relu')(x)])",
        ),
        Fix(
            "Check the initialisation: very small initial weights shrink gradients layer by layer.",
            'kernel_initializer="glorot_uniform"  # or "he_normal" for ReLU',
            intents=(CHANGE_INITIALIZER,),
        ),
    )
    return [
        Finding(
            code=Code.VANISHING_GRADIENTS,
            severity=Severity.WARNING,
            step=gone.onset,
            title=f"Gradients vanish before reaching the first layers (first/last norm ratio {gone.ratio:.1g})",
            detail=detail,
            evidence=Evidence((sig.LAYER_GRAD_NORM,), gone.onset, gone.last_step, gone.first_layer),
            fixes=fixes,
        )
    ]
