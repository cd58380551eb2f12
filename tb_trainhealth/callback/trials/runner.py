"""Trying each candidate change: on a clone of the model from the run's starting weights, on the
sample of its own data, for as many steps as the run took (capped), within a time budget; judged
against the same training with the run's own settings (`unchanged`) on held-out rows.

The user's model, optimizer and data are only read. Random state (Python's, NumPy's, Keras' seed
generator) is put back as it was, so whatever the program does next draws the same numbers as it
would have without the trials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import time
import warnings
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

from tb_trainhealth.callback.preflight.clone import clone_compiled, fresh_optimizer, uncompiled_clone
from tb_trainhealth.callback.trials.candidates import Candidate, candidates, combined, conflict, loss_info
from tb_trainhealth.callback.trials.sample import Sample
from tb_trainhealth.callback.trials.task_error import Task, noise, task_error, task_of
from tb_trainhealth.contract.trial_events import TrialResult, TrialsEvent, TrialVerdict

# Steps each trial trains: as many as the run took, at least MIN_STEPS, at most MAX_STEPS.
MIN_STEPS = 20
MAX_STEPS = 200
# A trial helps (or hurts) when its held-out error moves by more than this, or twice its sampling
# error, whichever is larger; or, where the loss is comparable, when the loss falls below
# LOSS_HELPED (rises above LOSS_WORSE) times the unchanged one with the error no worse.
MIN_ERROR_GAIN = 0.05
LOSS_HELPED = 0.7
LOSS_WORSE = 1.5


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """Python's, NumPy's and Keras' global random state, put back afterwards."""
    py_state, np_state = random.getstate(), np.random.get_state()
    generator = _keras_seed_generator()
    keras_state = None if generator is None else np.array(generator.state.numpy())
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        if generator is not None and keras_state is not None:
            generator.state.assign(keras_state)


def _keras_seed_generator() -> Any:
    try:
        from keras.src.backend.common import global_state

        return global_state.get_global_attribute("global_seed_generator")
    except Exception:
        return None


def run_trials(
    model: keras.Model,
    initial_weights: list[np.ndarray],
    sample: Sample,
    codes: set[str],
    steps_run: int,
    rate: float | None,
    clips: bool,
    budget_seconds: float,
    step: int,
) -> TrialsEvent:
    """Every candidate that fits the budget, tried and judged; the event to record."""
    began = time.perf_counter()
    task = task_of(sample.y)
    steps = int(min(max(steps_run, MIN_STEPS), MAX_STEPS))
    found = tuple(sorted(codes))
    with kept_random_state(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trial = _Trial(model, initial_weights, sample, task, steps, rate)
        unchanged_error, unchanged_loss = trial.measure(None)
        margin = max(MIN_ERROR_GAIN, 2 * noise(task, sample.y_held, min(unchanged_error, 10.0)))
        results: list[TrialResult] = []
        untried: list[str] = []
        tried = candidates(model, sample, task, codes, rate, clips)
        for candidate in tried:
            if time.perf_counter() - began + trial.cost(candidate) > budget_seconds:
                untried.append(candidate.label)
                continue
            results.append(trial.judge(candidate, unchanged_error, unchanged_loss, margin))
        results += _on_top_of_the_best(trial, tried, results, margin, began, budget_seconds)
    return TrialsEvent(
        step=step,
        trials=tuple(results),
        findings=found,
        samples=sample.rows,
        held_out=len(sample.x_held),
        steps=steps,
        unchanged_error=_finite(unchanged_error),
        unchanged_loss=_finite(unchanged_loss),
        seconds=round(time.perf_counter() - began, 3),
        budget_seconds=round(budget_seconds, 3),
        untried=tuple(untried),
    )


def _on_top_of_the_best(
    trial: _Trial, tried: list[Candidate], results: list[TrialResult], margin: float, began: float, budget: float
) -> list[TrialResult]:
    """Each other change on top of the one that helped most alone, judged against that one alone,
    while the budget lasts (where several things are wrong, one change alone may not show its gain:
    a negative learning rate set right, the logits' loss is what is left)."""
    helped = [r for r in results if r.verdict is TrialVerdict.HELPED and r.error is not None]
    best = min(helped, key=lambda r: r.error, default=None)
    base = next((c for c in tried if best is not None and c.label == best.label), None)
    if best is None or base is None:
        return []
    out = []
    for candidate in tried:
        if candidate is base or conflict(base, candidate):
            continue
        pair = combined(base, candidate)
        if time.perf_counter() - began + trial.cost(pair) > budget:
            break
        result = trial.judge(pair, best.error, best.loss, margin)
        out.append(dataclasses.replace(result, on_top_of=base.label))
    return out


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


class _Trial:
    """The clone the cheap candidates share (rate, data, steps), and how one candidate is measured."""

    def __init__(
        self, model: keras.Model, weights: list[np.ndarray], sample: Sample, task: Task, steps: int, rate: float | None
    ):
        self.model, self.weights, self.sample, self.task, self.steps = model, weights, sample, task, steps
        self.rate = rate
        self.loss = loss_info(model.loss)
        # One call of the train function runs a whole pass over the sample (steps_per_execution):
        # Keras' per-step Python overhead, not the model, dominates a small model's step.
        self.per_call = math.ceil(len(sample.x) / sample.batch_size)
        self.shared = clone_compiled(model)
        self.shared.compile(
            optimizer=self.shared.optimizer, loss=model.loss, steps_per_execution=self.per_call, jit_compile=False
        )
        self.seconds_per_step: float | None = None  # measured on the unchanged training, past its trace
        self.trace_seconds = 0.0
        self.x_mean, self.x_std = input_statistics(sample.x)

    def judge(self, candidate: Candidate, unchanged: float, unchanged_loss: float | None, margin: float) -> TrialResult:
        base = TrialResult(candidate.intent.setting, candidate.intent.direction.value, candidate.label)
        try:
            error, loss = self.measure(candidate)
        except Exception as err:  # a change this model cannot take: said, and the others go on
            failure = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
            return TrialResult(**{**base.__dict__, "failure": failure, "code": candidate.code})
        verdict = _verdict(error, loss, unchanged, unchanged_loss, margin)
        return TrialResult(
            base.setting,
            base.direction,
            base.label,
            verdict,
            candidate.code,
            _finite(error) if math.isfinite(error) else None,
            _finite(loss),
        )

    def measure(self, candidate: Candidate | None) -> tuple[float, float | None]:
        """(held-out error over the constant's, the run's own loss or None) after the candidate's training."""
        model = self.shared if candidate is None or candidate.same_model else self._rebuilt(candidate)
        if model is self.shared:
            self._reset(model, candidate.rate if candidate is not None and candidate.rate else self.rate)
        x, x_held = self.sample.x, self.sample.x_held
        if candidate is not None and candidate.scale_inputs:
            x, x_held = (x - self.x_mean) / self.x_std, (x_held - self.x_mean) / self.x_std
        y = self.sample.y.astype("float32") if self.task.is_classification is False else self.sample.y
        offset, scale = candidate.target_scale if candidate is not None and candidate.target_scale else (0.0, 1.0)
        if candidate is not None and candidate.target_scale:
            y = (self.sample.y.astype("float32") - offset) / scale
        factor = candidate.steps_factor if candidate is not None else 1
        epochs = max(2, round(self.steps * factor / self.per_call))
        began = time.perf_counter()
        model.fit(x, y, batch_size=self.sample.batch_size, epochs=1, verbose=0, shuffle=True)
        first = time.perf_counter()
        model.fit(x, y, batch_size=self.sample.batch_size, epochs=epochs - 1, verbose=0, shuffle=True)
        if candidate is None:  # what the others will cost: a pass each, and a trace for a new model
            per_pass = (time.perf_counter() - first) / (epochs - 1)
            self.seconds_per_step = per_pass / self.per_call
            self.trace_seconds = max(0.0, first - began - per_pass)
        pred = np.asarray(model(x_held, training=False), dtype="float64") * scale + offset
        own_loss = candidate is None or (candidate.loss is None and not candidate.target_scale)
        loss = None
        if own_loss:
            y_pred = pred.astype("float32")
            value = model.compute_loss(x=x_held, y=self.sample.y_held, y_pred=y_pred, training=False)
            loss = float(np.asarray(value))
        threshold = 0.0 if self._logits(candidate) else 0.5
        return task_error(pred, self.sample.y_held, self.task, threshold), loss

    def _logits(self, candidate: Candidate | None) -> bool:
        if candidate is not None and candidate.loss is not None:
            return bool(loss_info(candidate.loss).from_logits)
        return self.loss.from_logits

    def _reset(self, model: keras.Model, rate: float | None) -> None:
        """The shared clone back at the run's starting weights, its optimizer as new, at `rate`."""
        model.set_weights(self.weights)
        optimizer = model.optimizer
        own_rate = getattr(optimizer, "_learning_rate", None)
        for variable in optimizer.variables:
            if rate is not None or variable is not own_rate:
                variable.assign(np.zeros(variable.shape, dtype=variable.dtype))
        if rate is not None:
            optimizer.learning_rate = rate

    def _rebuilt(self, candidate: Candidate) -> keras.Model:
        return changed_model(self.model, self.weights, candidate, self.rate, steps_per_execution=self.per_call)

    def cost(self, candidate: Candidate) -> float:
        """Seconds the candidate's trial should take, from the unchanged one's."""
        steps = max(2, round(self.steps * candidate.steps_factor / self.per_call)) * self.per_call
        return steps * (self.seconds_per_step or 0.0) + (0.0 if candidate.same_model else self.trace_seconds)


def input_statistics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and spread (over every axis but the last) that "standardised inputs" uses."""
    axes = tuple(range(x.ndim - 1))
    x = x.astype("float32")
    return x.mean(axis=axes, keepdims=True), x.std(axis=axes, keepdims=True) + 1e-8


def changed_model(
    source: keras.Model,
    weights: list[np.ndarray],
    candidate: Candidate,
    rate: float | None,
    steps_per_execution: int = 1,
) -> keras.Model:
    """A clone of `source` with the candidate's layers, optimizer and loss; `weights` (the run's
    starting ones) wherever a layer kept its shape (a new output layer, or new initialisers, start fresh)."""
    clone = uncompiled_clone(source, candidate.layer_config)
    if not candidate.reinitialize:
        for mine, theirs in zip(clone.layers, _weights_by_layer(source, weights)):
            current = mine.get_weights()
            if len(current) == len(theirs) and all(a.shape == b.shape for a, b in zip(current, theirs)):
                mine.set_weights(theirs)
    optimizer = fresh_optimizer(source.optimizer)
    if candidate.rate is not None or rate is not None:
        optimizer.learning_rate = candidate.rate if candidate.rate is not None else rate
    if candidate.clipnorm is not None:
        optimizer.clipnorm = candidate.clipnorm
    loss = candidate.loss or source.loss
    clone.compile(optimizer=optimizer, loss=loss, steps_per_execution=steps_per_execution, jit_compile=False)
    return clone


def _weights_by_layer(model: keras.Model, weights: list[np.ndarray]) -> list[list[np.ndarray]]:
    """The flat `get_weights` list cut per layer, in `model.layers` order."""
    out, at = [], 0
    for layer in model.layers:
        n = len(layer.weights)
        out.append(weights[at : at + n])
        at += n
    return out


def _verdict(error: float, loss: float | None, unchanged: float, unchanged_loss: float | None, margin: float):
    if not math.isfinite(error) or (loss is not None and not math.isfinite(loss)):
        return TrialVerdict.SAME if not math.isfinite(unchanged) else TrialVerdict.WORSE
    if error <= unchanged - margin:
        return TrialVerdict.HELPED
    if error >= unchanged + margin:
        return TrialVerdict.WORSE
    if loss is not None and unchanged_loss is not None and math.isfinite(unchanged_loss) and unchanged_loss > 0:
        if loss <= LOSS_HELPED * unchanged_loss and error <= unchanged + margin / 2:
            return TrialVerdict.HELPED
        if loss >= LOSS_WORSE * unchanged_loss:
            return TrialVerdict.WORSE
    return TrialVerdict.SAME
