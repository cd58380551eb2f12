"""Fixes several rules suggest, written once so they read the same everywhere, and fitted to
what the run already does: the engine passes every finding's fixes through `fit_to_run`, so
no fix suggests EarlyStopping to a run that has it, clipping to an optimizer that clips, or
"1e-4" to a run already training at 1e-5."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import (
    ADD_CLIPPING,
    ADD_EARLY_STOPPING,
    ADD_LR_SCHEDULE,
    LOWER_RATE,
    RAISE_RATE,
    Finding,
    Fix,
)
from tb_trainhealth.signals import RunSignals

CLIP_FIX = Fix(
    "Lower the learning rate and clip gradients, so one bad batch cannot throw the weights far.",
    "optimizer = keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)",
    (LOWER_RATE, ADD_CLIPPING),
)
LR_FIX_LOWER = Fix(
    "Lower the learning rate 10x (then 3x up or down from there, watching the loss).",
    "model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-4), loss=..., metrics=...)",
    (LOWER_RATE,),
)
LR_FIX_SCHEDULE = Fix(
    "Decay the learning rate when the loss stops improving.",
    "keras.callbacks.ReduceLROnPlateau(monitor='loss', factor=0.5, patience=3)",
    (ADD_LR_SCHEDULE,),
)
CLIPPED_ALREADY = Fix(
    "Gradients are already clipped: lower the learning rate 10x so each step moves less.",
    LR_FIX_LOWER.code,
    (LOWER_RATE,),
)
RESTORE_BEST_FIX = Fix(
    "Your EarlyStopping keeps the last weights, not the best ones: restore the best epoch's.",
    "keras.callbacks.EarlyStopping(monitor='val_loss', patience=..., restore_best_weights=True)",
)
# Keras optimizer classes a fix may name (the user's own, where it is one of these).
_OPTIMIZERS = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Lion", "Ftrl")
# Fixes that lower the learning rate (intent LOWER_RATE) write it as this: fit_to_run puts a tenth
# of the rate in use there, with the user's optimizer.
_LEARNING_RATE = re.compile(r"keras\.optimizers\.Adam\(learning_rate=1e-4")
# Fixes that raise it (RAISE_RATE) write it as this: fit_to_run puts ten times the rate in use
# there (never the rate the run already has). RAISE: how their sentences start.
RAISE = "Raise the learning rate"
USUAL_RATE = 1e-3  # Adam's default: a raised rate is never below it
_HIGHER_RATE = re.compile(r"keras\.optimizers\.Adam\(learning_rate=1e-3")


def fit_to_run(run: RunSignals, finding: Finding) -> Finding:
    """The finding with its fixes fitted to what the run already does."""
    fixes = [_with_higher_rate(run, _with_learning_rate(run, _unclipped(run, fix))) for fix in finding.fixes]
    early_stopping = [c for c in run.info.callbacks if c.name == "EarlyStopping"]
    if early_stopping:
        already = [f for f in fixes if f.does(ADD_EARLY_STOPPING)]
        fixes = [f for f in fixes if f not in already]
        if already and any(c.restore_best_weights is False for c in early_stopping):
            fixes.insert(0, RESTORE_BEST_FIX)
    if run.info.has_callback("ReduceLROnPlateau"):
        fixes = [f for f in fixes if not f.does(ADD_LR_SCHEDULE)]
    unique = tuple(dict.fromkeys(fixes))
    return finding if unique == finding.fixes else dataclasses.replace(finding, fixes=unique)


def _unclipped(run: RunSignals, fix: Fix) -> Fix:
    """Any fix that suggests clipnorm, for an optimizer that clips already: lower the rate instead."""
    return CLIPPED_ALREADY if run.info.clips_gradients and fix.does(ADD_CLIPPING) else fix


def _with_learning_rate(run: RunSignals, fix: Fix) -> Fix:
    """ "learning_rate=1e-4" in a fix's code becomes a tenth of the rate in use, with the user's optimizer."""
    rate = _learning_rate(run)
    if fix.code is None or rate is None or not fix.does(LOWER_RATE) or not _LEARNING_RATE.search(fix.code):
        return fix
    optimizer = run.info.optimizer if run.info.optimizer in _OPTIMIZERS else "Adam"
    code = _LEARNING_RATE.sub(f"keras.optimizers.{optimizer}(learning_rate={rate / 10:.2g}", fix.code)
    return dataclasses.replace(fix, code=f"{code}  # was {rate:.2g}: 10x lower")


def _with_higher_rate(run: RunSignals, fix: Fix) -> Fix:
    """Fixes that raise the learning rate name ten times the rate in use, with the user's optimizer,
    and at least USUAL_RATE: a rate of 1e-7 raised to 1e-6 is still far below what trains."""
    rate = _learning_rate(run)
    if fix.code is None or rate is None or not fix.does(RAISE_RATE) or not _HIGHER_RATE.search(fix.code):
        return fix
    optimizer = run.info.optimizer if run.info.optimizer in _OPTIMIZERS else "Adam"
    higher = max(rate * 10, USUAL_RATE)
    code = _HIGHER_RATE.sub(f"keras.optimizers.{optimizer}(learning_rate={higher:.2g}", fix.code)
    return dataclasses.replace(fix, code=f"{code}  # was {rate:.2g}: {higher / rate:.0f}x higher")


def _learning_rate(run: RunSignals) -> float | None:
    series = run.get(sig.LEARNING_RATE)
    if series is not None:
        finite = series.values[np.isfinite(series.values) & (series.values > 0)]
        if finite.size:
            return float(finite[-1])
    rate = run.info.learning_rate
    return rate if rate is not None and rate > 0 else None
