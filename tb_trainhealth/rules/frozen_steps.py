"""Why the weights barely move, where they barely move: the cause a plateau or a crawl names.

A learning rate far too small, clipping that holds every update near zero, an optimizer left at a
default rate far below what it needs, a rate so large its first steps wrecked the model, or
gradients that vanish before the first layers: each has its own fix, so `loss_plateau` and
`undertrained` name which one.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import RAISE_RATE, Fix
from tb_trainhealth.rules.common_fixes import LR_FIX_LOWER, RAISE
from tb_trainhealth.rules.gradients import RELU_HIDDEN_FIX, vanishing
from tb_trainhealth.rules.run_setup import large_rate
from tb_trainhealth.rules.weight_health import update_ratio_level
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals

RAISE_RATE_FIX = Fix(
    "Raise the learning rate (the default 1e-3 for Adam is a good start; SGD often needs 1e-2 to 1e-1).",
    "model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss=..., metrics=...)",
    (RAISE_RATE,),
)
# A peak learning rate below this is a likely reason for no progress.
LOW_LR = 1e-5
# Naming the cause of a plateau (not firing it): updates below this share of the weights mean the
# weights barely move. Measured (`bench/learn_less_zoo.py`): Adam 3e-6, SGD 1e-5, clipvalue=1e-6
# and Adadelta at its default 1e-3 all plateau with ratios of 1e-7 to 3e-5; healthy runs sit at
# 2.6e-4 to 1.5e-3 (weight_health), so a plateau below 1e-4 is the step size, not the data.
FROZEN_UPDATE_RATIO = 1e-4
# Clipping this tight (clipvalue / clipnorm / global_clipnorm) holds every update near zero.
TIGHT_CLIP = 1e-3
# Optimizers whose Keras default rate is far below what they need (Adadelta: the paper uses 1.0).
_DEFAULT_TOO_LOW = {"Adadelta": 1.0}


def _tight_clip(run: RunSignals) -> tuple[str, float] | None:
    for name in ("clipvalue", "clipnorm", "global_clipnorm"):
        value = run.settings.number(name)
        if value is not None and 0 < value <= TIGHT_CLIP:
            return name, value
    return None


def frozen_cause(run: RunSignals) -> tuple[str, Fix] | None:
    """Why the weights barely move, when they barely move: (sentence, the fix that goes first)."""
    ratio = update_ratio_level(run)
    lr = run.get(sig.LEARNING_RATE)
    rate = run.info.learning_rate
    tiny_lr = lr is not None and len(finite_part(lr)) and float(np.nanmax(lr.values)) < LOW_LR
    if not tiny_lr and (ratio is None or ratio >= FROZEN_UPDATE_RATIO):
        return None
    moved = f"each step moves the weights by only {ratio:.1e} of their size (healthy: about 1e-3)" if ratio else ""
    clip = _tight_clip(run)
    if clip is not None:
        name, value = clip
        return (
            f"gradient clipping {name}={value:g} holds every update tiny: {moved or 'the weights barely move'}",
            Fix(f"Loosen the clipping: {name}=1.0 is the usual setting.", f"keras.optimizers.SGD(..., {name}=1.0)"),
        )
    optimizer = run.info.optimizer or ""
    rate_text = f"{rate:.2g}" if rate else "in use"
    if large_rate(run) is not None:  # steps that barely move after a rate this large: it wrecked the model
        return (
            f"the learning rate ({rate_text}, {optimizer or 'optimizer'}) is far too large: its first updates "
            f"wrecked the model (dead or saturated units), and now {moved or 'the weights barely move'}",
            LR_FIX_LOWER,
        )
    if optimizer in _DEFAULT_TOO_LOW and (rate is None or rate < _DEFAULT_TOO_LOW[optimizer] / 10):
        good = _DEFAULT_TOO_LOW[optimizer]
        return (
            f"{optimizer} at learning rate {rate_text} (Keras' default; {optimizer} needs about {good:g}): {moved}",
            Fix(
                f"{RAISE} to what {optimizer} needs ({good:g}), or use Adam at 1e-3.",
                f"keras.optimizers.{optimizer}(learning_rate={good:g})",
                (RAISE_RATE,),
            ),
        )
    gone = None if tiny_lr else vanishing(run)
    if gone is not None:  # (the rate is not small; the gradient does not reach the first layers)
        return (
            f"the gradients vanish before the first layers ({gone.first_layer} gets {gone.ratio:.1g}x the gradient "
            f"of {gone.last_layer}): {moved or 'the weights barely move'}",
            RELU_HIDDEN_FIX,
        )
    why = (
        f"each step moves the weights by only {ratio:.1e} of their size (healthy training: about 1e-3)."
        if ratio
        else "it is below 1e-5."
    )
    return (
        f"the learning rate ({rate_text}) is too small: {moved or 'it is below 1e-5'}",
        Fix(f"{RAISE}: {why}", RAISE_RATE_FIX.code, (RAISE_RATE,)),
    )
