"""Overfit one small batch, and the same with every input zeroed.

A working model and optimizer drive the loss on 16-32 samples far below what any constant
prediction reaches: the network memorises them (Karpathy 2019, "overfit a single batch";
Zhang et al. 2017 show networks fit even random labels). If it cannot, something stops it
learning at all. The zeroed-input control sees every sample alike, so it cannot beat the
constant prediction: a real fit that does no better shows a model that ignores its input.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import keras

from tb_trainhealth.callback.preflight.batch import Batch
from tb_trainhealth.contract.preflight import MAX_FIT_STEPS, STALL_SHARE, STALL_WINDOW
from tb_trainhealth.contract.vocab import FitStop

# Look at the inference-mode loss every this many steps (the training-mode loss comes with every step).
EVAL_EVERY = 10


@dataclasses.dataclass
class FitResult:
    start_loss: float
    end_loss: float  # the best loss seen (training or inference mode)
    max_loss: float
    steps: int
    seconds: float
    stopped: FitStop


def inference_loss(model: keras.Model, batch: Batch) -> float:
    """The compiled loss (regularisation included) in inference mode: no dropout, BN statistics."""
    pred = model(batch.x, training=False)
    return float(
        model.compute_loss(x=batch.x, y=batch.y, y_pred=pred, sample_weight=batch.sample_weight, training=False)
    )


def overfit(
    model: keras.Model,
    batch: Batch,
    target: float,
    deadline: float,
    max_steps: int = MAX_FIT_STEPS,
    floor: float | None = 0.0,
) -> FitResult:
    """Train on the batch alone until the loss is at most `target` ("reached"), stops falling
    ("stalled", see STALL_WINDOW; never with floor=None), `max_steps` ("steps") or the deadline ("time")."""
    began = time.perf_counter()
    start = inference_loss(model, batch)
    best, highest, steps, stopped = start, start, 0, FitStop.STEPS
    window_best = start  # the best loss STALL_WINDOW steps ago
    while steps < max_steps:
        if time.perf_counter() >= deadline:
            stopped = FitStop.TIME
            break
        with warnings.catch_warnings():  # ("Gradients do not exist for variables": no_gradient's to say)
            warnings.simplefilter("ignore", UserWarning)
            logs = model.train_on_batch(batch.x, batch.y, sample_weight=batch.sample_weight, return_dict=True)
        steps += 1
        train_loss = float(logs["loss"])
        if not math.isfinite(train_loss):
            highest, stopped = math.inf, FitStop.NONFINITE
            break
        highest = max(highest, train_loss)
        best = min(best, train_loss)
        if steps % EVAL_EVERY == 0 or best <= target:
            best = min(best, inference_loss(model, batch))
        if best <= target:
            stopped = FitStop.REACHED
            break
        if floor is not None and steps % STALL_WINDOW == 0:
            if math.isfinite(window_best) and window_best - best < STALL_SHARE * (window_best - floor):
                stopped = FitStop.STALLED
                break
            window_best = best
    return FitResult(start, best, highest, steps, time.perf_counter() - began, stopped)


def zeroed_control(model: keras.Model, batch: Batch, steps: int, deadline: float) -> FitResult | None:
    """The same fit on zeroed inputs, for the same number of steps (None: inputs not numeric)."""
    zeroed = batch.zeroed()
    if zeroed is None:
        return None
    return overfit(model, zeroed, target=-math.inf, deadline=deadline, max_steps=steps, floor=None)


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
