"""What the run was set up to do, read from its `RunSettings` (the callback writes them once per
fit): how many optimizer steps it took, how EarlyStopping was configured, which layers carry
a strong penalty. Rules that must say *which* setting made a run learn less read them here.
A setting the writer could not read is absent: every helper answers None or () then.
"""

from __future__ import annotations

import dataclasses
import math
import re

from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals

# A weight penalty at least this large (Keras' L1/L2 factor per kernel) dominates the loss of a
# normally scaled model: Keras' own default L2 is 0.01, the sweep's regularised runs use 1e-4 to
# 1e-3; the zoo's l2_huge runs (1.0-3.0) sit at the class prior / the targets' mean.
STRONG_PENALTY = 0.1
_PENALTY = re.compile(r"\bl[12]=([0-9.eE+-]+)")


def optimizer_steps(run: RunSignals) -> int | None:
    """Optimizer steps the run took: the per-step loss's last step, else epochs x batches per
    epoch from the settings (steps_per_epoch, or train_samples / batch_size)."""
    loss = run.get(sig.LOSS)
    if loss is not None and run.axis == sig.STEP_AXIS:
        return int(loss.steps[-1]) - int(loss.steps[0]) + 1
    epochs = run.get(sig.EPOCH_LOSS)
    per_epoch = steps_per_epoch(run)
    if epochs is None or per_epoch is None:
        return None
    return len(epochs) * per_epoch


def steps_per_epoch(run: RunSignals) -> int | None:
    explicit = run.settings.number("steps_per_epoch")
    if explicit:
        return int(explicit)
    samples, batch = run.settings.number("train_samples"), run.settings.number("batch_size")
    if not samples or not batch:
        return None
    return max(1, math.ceil(samples / batch))


@dataclasses.dataclass(frozen=True)
class EarlyStoppingSetup:
    monitor: str
    patience: int
    min_delta: float


def early_stopping(run: RunSignals) -> EarlyStoppingSetup | None:
    patience = run.settings.number("EarlyStopping.patience")
    if patience is None:
        return None
    monitor = run.settings.get("EarlyStopping.monitor")
    min_delta = run.settings.number("EarlyStopping.min_delta") or 0.0
    return EarlyStoppingSetup(monitor if isinstance(monitor, str) else "val_loss", int(patience), abs(min_delta))


@dataclasses.dataclass(frozen=True)
class Penalty:
    layer: str
    text: str  # as written: "L2(l2=3)"
    factor: float


def strong_penalties(run: RunSignals) -> list[Penalty]:
    """Kernel (and bias) regularizers with a factor of at least STRONG_PENALTY."""
    found = []
    for name, value in run.settings.settings.items():
        if not name.endswith(("kernel_regularizer", "bias_regularizer")) or not isinstance(value, str):
            continue
        factors = [float(f) for f in _PENALTY.findall(value) if _is_float(f)]
        if factors and max(factors) >= STRONG_PENALTY:
            found.append(Penalty(name.rsplit(".", 1)[0], value, max(factors)))
    return found


def _is_float(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


# A blow-up within the first EARLY_BLOWUP_STEPS steps at a learning rate at least LARGE_RATE (LARGE_ADAPTIVE_RATE
# for Adam-like optimizers, whose steps are ~the rate itself) is the learning rate, named in the title.
# Measured (`bench/learn_less_zoo.py` lr_huge_nan_mlp): SGD 3.0, gradients 1.6e10x by step 8, NaN at step 9;
# the rule_zoo's rnn_exploding_to_nan (SGD 2e-4, a growing recurrence) is the weights, not the rate.
EARLY_BLOWUP_STEPS = 100
LARGE_RATE = 0.5
LARGE_ADAPTIVE_RATE = 0.03
_ADAPTIVE = ("Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Lion", "Adafactor")


def rate_blew_it_up(run: RunSignals, onset: int) -> float | None:
    """The learning rate, when it is large enough to explain a blow-up in the first steps."""
    if onset - run.info.start_step > EARLY_BLOWUP_STEPS:
        return None
    return large_rate(run)


def large_rate(run: RunSignals) -> float | None:
    """The learning rate, when it is that large for its optimizer: its first updates can wreck the
    model, into a NaN or, on another seed of the same run (lr_huge_nan_mlp, seed 4), into dead units
    and a loss at the constant baseline whose weights then barely move."""
    rate = run.info.learning_rate
    if rate is None:
        return None
    large = LARGE_ADAPTIVE_RATE if (run.info.optimizer or "") in _ADAPTIVE else LARGE_RATE
    return rate if rate >= large else None
