"""Each real-bug program rerun with its plan's first action applied (issue 52): does it end near the
fixed program, and does any end worse than it began?

For every case of the real-bug zoo (`bench/real_bugs/`): the buggy program trains with
HealthCallback as a user would (trials on) and its plan is read as `diagnose` tells it
(`bench.plan_zoo.plan_of`). Then the same buggy program runs again, with `keras.Model.fit` wrapped so
that the first action is applied before training, the way the trial applied it but to the whole
fit: the change the trial measured (its `Candidate`, rebuilt from the same model and the fit's
own arrays), or, for an untried action, the candidate with the action's intent. An action no code
can apply (relabel the data, shuffle a loader, a layer's argument) is applied as the program's
authors wrote it, i.e. the fixed program, only where it is the change they made (`plan_zoo.judge`
says right); otherwise it is "not applicable" and counts as not near.

Near the fixed twin: the held-out score (accuracy, or R^2) within TOLERANCE of the fixed program's
at the same seed, where TOLERANCE is the larger of MIN_TOLERANCE and twice the fixed program's
seed-to-seed difference (seeds 0 and 1). Worse: below the buggy program's score by more than that.

Measured 2026-12-08 on 2 cores at load ~1 (seed 0): "near the fixed program 37 of 46; worse than before 0;
neither 9" (868 s); 2026-12-07, 36 of 46 before real-valued targets under binary_crossentropy were tried,
and 34 of 46 beside a full test suite on the same cores (the trials' 10 s fit fewer changes).
docs/benchmarks.md says which and why.

Usage:
    python -m bench.plan_applied [--only NAME[,NAME]] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

from bench.plan_zoo import judge, plan_of
from tb_trainhealth.advice.plan import Action
from tb_trainhealth.callback.fit_context import optimizer_settings
from tb_trainhealth.callback.trials.at_fit_end import LEARNING
from tb_trainhealth.callback.trials.candidates import Candidate, candidates, combined
from tb_trainhealth.callback.trials.runner import changed_model, input_statistics
from tb_trainhealth.callback.trials.sample import Sample, take_sample
from tb_trainhealth.callback.trials.task_error import task_of
from tb_trainhealth.findings import MORE_EPOCHS

# Accuracy or R^2 within this of the fixed program's is near it, at the least (two runs of a
# fixed program with seeds 0 and 1 differ by up to 0.07 in the zoo: other_cases.py's table).
MIN_TOLERANCE = 0.03


class NotApplicable(Exception):
    """The action changes something no code here can change on this program."""


@dataclasses.dataclass
class _Applied:
    how: str = "not applicable"
    label: str = ""


@contextlib.contextmanager
def first_action_applied(action: Action, codes: set[str], applied: _Applied) -> Iterator[None]:
    """`keras.Model.fit` trains a copy of the model with the action's change; the model's `predict`
    answers from that copy, so the program scores what the change trained."""
    plain_fit = keras.Model.fit

    def fit(self: keras.Model, x: Any = None, y: Any = None, **kwargs: Any) -> Any:
        if getattr(self, "_plan_applied", False):  # the copy's own fit
            return plain_fit(self, x, y, **kwargs)
        arrays = isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
        candidate = _candidate_for(action, self, _sample_of(x, y, kwargs.get("batch_size")), codes)
        if not arrays and (candidate.scale_inputs or candidate.target_scale):
            raise NotApplicable(f"{candidate.label} on a {type(x).__name__}")
        applied.how, applied.label = ("tried change" if action.tried else "by its intent"), candidate.label
        if not action.tried and MORE_EPOCHS in action.intents and "EarlyStopping" in (action.code or ""):
            kwargs = _as_written(kwargs, action.code or "")
            candidate = dataclasses.replace(candidate, steps_factor=1)
            applied.label = f"epochs={kwargs['epochs']} + EarlyStopping, as its code says"
        rate, _ = optimizer_settings(self.optimizer)
        copy = getattr(self, "_plan_copy", None)
        if copy is None:
            copy = changed_model(self, self.get_weights(), candidate, rate)
            copy._plan_applied = True
            self._plan_copy = copy
            self.predict = _predicting(copy, candidate, x, y)
        if arrays:
            x, y = _changed_data(candidate, x, y, x, y)
        if arrays and kwargs.get("validation_data") is not None:
            xv, yv = kwargs["validation_data"][:2]
            kwargs["validation_data"] = _changed_data(candidate, np.asarray(xv), np.asarray(yv), *_fit_arrays(self))
        kwargs["epochs"] = int(kwargs.get("epochs", 1)) * candidate.steps_factor
        return plain_fit(copy, x, y, **kwargs)

    keras.Model.fit = fit
    try:
        yield
    finally:
        keras.Model.fit = plain_fit


def _sample_of(x: Any, y: Any, batch_size: int | None) -> Sample:
    """The fit's arrays as the candidates read them; a few batches of any other input."""
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return Sample(x, y, x[:1], y[:1], batch_size or 32)
    from keras.src.trainers.data_adapters import get_data_adapter

    adapter = get_data_adapter(x, y, batch_size=batch_size, steps_per_epoch=None, shuffle=False)
    sample = take_sample(adapter, max_rows=4096)
    if isinstance(sample, str):
        raise NotApplicable(sample)
    return sample


def _as_written(kwargs: dict[str, Any], code: str) -> dict[str, Any]:
    """ "More epochs, with early stopping" as the action's code says it (epochs=N, EarlyStopping)."""
    epochs = re.search(r"epochs=(\d+)", code)
    validated = kwargs.get("validation_data") is not None or kwargs.get("validation_split")
    stop = keras.callbacks.EarlyStopping(
        monitor="val_loss" if validated else "loss", patience=10, restore_best_weights=True
    )
    return {
        **kwargs,
        "epochs": int(epochs.group(1)) if epochs else 3 * int(kwargs.get("epochs", 1)),
        "callbacks": [stop],
    }


def _candidate_for(action: Action, model: keras.Model, sample: Sample, codes: set[str]) -> Candidate:
    """The change the trial measured (same label), else the first candidate with the action's intent."""
    rate, clips = optimizer_settings(model.optimizer)
    model._plan_arrays = (sample.x, sample.y)
    found = candidates(model, sample, task_of(sample.y), codes or set(LEARNING), rate, clips)
    by_label = {candidate.label: candidate for candidate in found}
    if action.trial is not None and action.trial.on_top_of is not None:  # two changes tried as a pair
        base = by_label.get(action.trial.on_top_of)
        second = by_label.get(action.trial.label.removeprefix(f"{action.trial.on_top_of} + "))
        if base is not None and second is not None:
            return combined(base, second)
    if action.trial is not None and action.trial.label in by_label:
        return by_label[action.trial.label]
    for candidate in found:
        if candidate.intent in action.intents:
            return candidate
    raise NotApplicable(f"no mechanical change for {', '.join(str(i) for i in action.intents) or 'this action'}")


def _fit_arrays(model: keras.Model) -> tuple[np.ndarray, np.ndarray]:
    return model._plan_arrays


def _changed_data(candidate: Candidate, x: np.ndarray, y: np.ndarray, x_fit: np.ndarray, y_fit: np.ndarray):
    """x and y as the candidate trains on them, with the training arrays' statistics."""
    if candidate.scale_inputs:
        mean, std = input_statistics(x_fit)
        x = (x - mean) / std
    if candidate.target_scale:
        offset, scale = candidate.target_scale
        y = (y.astype("float32") - offset) / scale
    return x, y


def _predicting(copy: keras.Model, candidate: Candidate, x_fit: np.ndarray, y_fit: np.ndarray):
    def predict(x: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        x = np.asarray(x)
        if candidate.scale_inputs:
            mean, std = input_statistics(x_fit)
            x = (x - mean) / std
        pred = copy.predict(x, *args, **kwargs)
        if candidate.target_scale:
            offset, scale = candidate.target_scale
            pred = np.asarray(pred) * scale + offset
        return pred

    return predict


def _quiet(run: Any, *args: Any) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(run(*args))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from bench.real_bug_zoo import all_cases
    from tb_trainhealth import HealthCallback

    cases = [c for c in all_cases() if not args.only or any(p in c.name for p in args.only.split(","))]
    tally = {"near": 0, "worse": 0, "neither": 0}
    hows: dict[str, int] = {}
    began = time.perf_counter()
    print(f"{'case':45} {'first action':40} {'applied as':15} buggy -> applied (fixed ±tol) verdict")
    for case in cases:
        seed = args.seed
        with tempfile.TemporaryDirectory() as scratch:
            root = os.path.join(scratch, "buggy")
            try:
                buggy = _quiet(case.run, True, seed, [HealthCallback(root, verbose=False)])
                fixed = _quiet(case.run, False, seed, [])
                other = _quiet(case.run, False, seed + 1, [])
            except Exception as err:
                print(f"{case.name:45} FAILED TO RUN: {type(err).__name__}: {err}")
                continue
            plan, trials = plan_of(root)
        tolerance = max(MIN_TOLERANCE, 2 * abs(fixed - other))
        action = plan.actions[0] if plan.actions else None
        applied, score = _Applied(), None
        if action is None:
            applied.how, score = "no action", buggy
        else:
            codes = set(trials.findings) if trials is not None else set()
            try:
                with first_action_applied(action, codes, applied):
                    score = _quiet(case.run, True, seed, [])
            except NotApplicable as why:
                if judge(case.name, plan) == "right":  # the authors' own change is this action
                    applied.how, score = "authors' change", fixed
                else:
                    applied.label = str(why)
            except Exception as err:  # a change this program cannot train with: told, so it counts as a miss
                applied.how, applied.label = "failed", f"{type(err).__name__}: {str(err)[:120]}"
        near = score is not None and score >= fixed - tolerance
        worse = score is not None and score < buggy - tolerance
        verdict = "near" if near else "worse" if worse else "neither"
        tally[verdict] += 1
        hows[applied.how] = hows.get(applied.how, 0) + 1
        said = "-" if action is None else action.text[:40]
        shown = "-" if score is None else f"{score:.3f}"
        print(
            f"{case.name:45} {said:40} {applied.how:15} {buggy:.3f} -> {shown} ({fixed:.3f} ±{tolerance:.2f}) {verdict}"
            + (f"  [{applied.label}]" if applied.label else "")
        )
        sys.stdout.flush()
    judged = sum(tally.values())
    print()
    print(
        f"first action applied: near the fixed program {tally['near']} of {judged}; worse than before "
        f"{tally['worse']}; neither {tally['neither']}"
    )
    print("applied as: " + ", ".join(f"{how} {n}" for how, n in sorted(hows.items())))
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
