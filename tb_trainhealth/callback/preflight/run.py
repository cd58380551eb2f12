"""`tb_trainhealth.preflight(model, x, y)`: find a broken set-up in seconds, before the long run.

Measures (on a clone, see `clone.py`) and lets the same rule engine as everywhere judge the
measurements, so a preflight reads the same in the report, the Health tab and the CLI.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth.callback import read_side
from tb_trainhealth.callback.fit_context import optimizer_settings
from tb_trainhealth.callback.frameworks.which_keras import is_tf_keras
from tb_trainhealth.callback.lint.data_lint import BatchLint
from tb_trainhealth.callback.lint.model_lint import lint_layers, lint_model, loss_of
from tb_trainhealth.callback.lint.weight_init import weight_init
from tb_trainhealth.callback.preflight.batch import Batch, take_batch
from tb_trainhealth.callback.preflight.clone import CloneError, clone_compiled
from tb_trainhealth.callback.preflight.gradients import check_gradients
from tb_trainhealth.callback.preflight.initial_loss import baseline_and_floor, expected_initial_loss, label_smoothing
from tb_trainhealth.callback.preflight.small_batch import finite_or_none, inference_loss, overfit, zeroed_control
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.events import Event, PreflightEvent
from tb_trainhealth.contract.preflight import (
    FIT_FRACTION,
    INPUT_USE_PROVEN,
    REGRESSION_OUTPUT_ALLOWANCE,
    loss_is_regression,
)
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.contract.vocab import FitStop, LintCheck
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.signals import RunSignals

# The batch the fit, the control and the gradient check use: 16-32 samples is what
# practitioners overfit by hand (more only slows memorising down).
FIT_SAMPLES = 32
# Preflight clones the model and trains the clone with Keras 3's APIs (clone_model, fit on a batch).
PREFLIGHT_KERAS_3_ONLY = (
    "tb-trainhealth: preflight needs a Keras 3 model; it is not available for tf_keras (legacy Keras 2) models."
)
# Of max_seconds, the share the small-batch fit may take; the zeroed control gets the rest.
FIT_TIME_SHARE = 0.6
# A constant prediction's loss (above the floor) below this share of the loss the output implies
# at initialisation (a batch of one class, targets that barely vary around a large mean) is no
# reference to fit against: the first loss is used instead, and input use is not judged.
MIN_BASELINE_SHARE = 0.1
# Lint that needs more than one small batch to be fair (32 random rows of imbalanced data are
# often all one class): left to the fit's own lint over its first batches.
_NOT_FROM_ONE_BATCH = {LintCheck.LABEL_STATISTICS, LintCheck.SINGLE_CLASS}


class PreflightFailed(RuntimeError):
    """A preflight found something at or above `raise_on`; `.report` holds everything."""

    def __init__(self, report: PreflightReport, severity: Severity):
        self.report = report
        worst = [f for f in report.findings if f.severity >= severity]
        lines = "\n".join(f"  [{f.severity.label}] {f.code}: {f.title}" for f in worst)
        super().__init__(f"preflight found {len(worst)} problem(s) at or above {severity.label}:\n{lines}\n\n{report}")


@dataclasses.dataclass
class PreflightReport:
    """What a preflight found (`findings`, worst first) and measured (`measurements`)."""

    findings: list[Finding]
    measurements: PreflightEvent
    model: str = "model"

    @property
    def ok(self) -> bool:
        """No finding at warning or worse."""
        return not any(f.severity >= Severity.WARNING for f in self.findings)

    def __str__(self) -> str:
        m = self.measurements
        head = f"Preflight of {self.model!r}: {'OK' if self.ok else 'PROBLEMS FOUND'} ({m.samples} samples, {m.seconds or 0:.1f} s)"
        lines = [head, *(f"  {line}" for line in _measured(m))]
        for finding in self.findings:
            lines.append(f"  [{finding.severity.label}] {finding.code}: {finding.title}")
            lines.extend(textwrap.wrap(finding.detail, 100, initial_indent="      ", subsequent_indent="      "))
            for fix in finding.fixes[:2]:
                lines.append(f"      fix: {fix.text}")
                if fix.code:
                    lines.extend(f"           {line}" for line in fix.code.splitlines())
        return "\n".join(lines)


def _measured(m: PreflightEvent) -> list[str]:
    lines = []
    if m.initial_loss is not None:
        implied = f" (implied: {m.expected_loss:.4g}, {m.expected_how})" if m.expected_loss is not None else ""
        lines.append(f"initial loss: {m.initial_loss:.4g}{implied}")
    if m.fit_steps is not None and m.fit_start_loss is not None and m.fit_end_loss is not None:
        lines.append(
            f"small-batch fit: {m.fit_start_loss:.4g} -> {m.fit_end_loss:.4g} in {m.fit_steps} steps "
            f"({m.fit_seconds or 0:.1f} s, {m.fit_stopped}; target {m.fit_target:.3g})"
        )
    if m.zeroed_end_loss is not None:
        lines.append(f"zeroed inputs: -> {m.zeroed_end_loss:.4g} in {m.zeroed_steps} steps")
    if m.trainable_variables is not None:
        stuck = len(m.no_gradient) + len(m.zero_gradient)
        lines.append(f"gradients: {m.trainable_variables - stuck} of {m.trainable_variables} variables get one")
    lines.extend(f"skipped {why}" for why in m.skipped)
    return lines


def preflight(
    model: keras.Model,
    x: Any,
    y: Any = None,
    *,
    batch_size: int = 32,
    log_dir: str | None = None,
    max_seconds: float = 60,
    raise_on: str | None = None,
) -> PreflightReport:
    """Check a compiled model and its data in seconds, before the long run.

    On one small batch, with a clone of the model and a fresh copy of its optimizer (the
    model, its weights and its optimizer state are left exactly as they were): is the initial
    loss what the output layer and loss imply, can the model overfit the batch, does it use
    its input, does every trainable variable get a gradient, and the first-batch lint.

    ```python
    report = tb_trainhealth.preflight(model, x_train, y_train)   # or a tf.data.Dataset
    print(report)                     # report.ok, report.findings
    ```

    Args:
        x, y: what you pass to fit (arrays, dicts of arrays, a tf.data.Dataset, a PyDataset,
            or a generator of batches, of which the first few are consumed).
        batch_size: samples taken (the fit and gradient checks use at most 32 of them).
        log_dir: also write the findings there, as the run's preflight (Health tab, `diagnose`).
        max_seconds: time budget; checks not done by then are skipped and said so.
        raise_on: "warning" or "critical" to raise `PreflightFailed` when a finding is that bad.
    """
    threshold = Severity.parse(raise_on) if raise_on else None
    if is_tf_keras(model):
        raise TypeError(PREFLIGHT_KERAS_3_ONLY)
    if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
        raise ValueError("preflight needs a compiled model: call model.compile(optimizer=..., loss=...) first")
    began = time.perf_counter()
    batch = take_batch(x, y, batch_size)
    event, lint = measure(model, batch, began + max_seconds)
    event = dataclasses.replace(event, seconds=time.perf_counter() - began, max_seconds=float(max_seconds))
    report = PreflightReport(judge(model, [*lint, event]), event, model.name)
    if log_dir is not None:
        write(log_dir, model, [*lint, event])
    if threshold is not None and any(f.severity >= threshold for f in report.findings):
        raise PreflightFailed(report, threshold)
    return report


def measure(model: keras.Model, batch: Batch, deadline: float) -> tuple[PreflightEvent, list[Event]]:
    """Every check on the batch, within the deadline: the measurements and the lint events."""
    step = int(tf.convert_to_tensor(model.optimizer.iterations).numpy()) if model.optimizer is not None else 0
    lint = [dataclasses.replace(e, step=step) for e in _lint(model, batch)]
    loss, _ = loss_of(model)
    rate, _ = optimizer_settings(model.optimizer) if model.optimizer is not None else (None, False)
    fields: dict[str, Any] = {"samples": batch.size, "loss": loss, "learning_rate": rate}
    try:
        clone = clone_compiled(model)
    except CloneError as err:
        return PreflightEvent(step, skipped=(f"initial loss, fit, input and gradient checks: {err}",), **fields), lint
    try:
        return _measure_clone(model, clone, batch, step, fields, deadline), lint
    except Exception as err:  # (the first training step would fail the same way: say why, keep the lint)
        why = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
        return PreflightEvent(
            step, skipped=(f"checks on the model: the loss fails on this batch ({why})",), **fields
        ), lint


def _measure_clone(
    model: keras.Model, clone: keras.Model, batch: Batch, step: int, fields: dict[str, Any], deadline: float
) -> PreflightEvent:
    """Initial loss, gradients, the small-batch fit and the control, on the clone."""
    loss = fields["loss"]
    small = batch.head(FIT_SAMPLES)
    outputs = _outputs(clone, batch)
    fields.update(outputs=outputs, initial_loss=finite_or_none(inference_loss(clone, batch)), fit_samples=small.size)
    expected = expected_initial_loss(loss, outputs, batch.y, batch.sample_weight)
    if expected is not None:
        fields["expected_loss"], fields["expected_how"] = expected
    levels = baseline_and_floor(loss, outputs, small.y, small.sample_weight, label_smoothing(model.loss))
    if levels is not None:
        fields["baseline_loss"], fields["floor_loss"] = levels
    gradients = check_gradients(clone, small)
    fields.update(
        trainable_variables=gradients.trainable,
        no_gradient=gradients.none,
        zero_gradient=gradients.zero,
        trainable_params=int(sum(np.prod(v.shape) for v in model.trainable_variables)),
    )
    if gradients.trainable == 0:
        return PreflightEvent(step, **fields)
    skipped: list[str] = []
    fields.update(_fit_and_control(model, small, fields, deadline, skipped))
    return PreflightEvent(step, skipped=tuple(skipped), **fields)


def _fit_and_control(
    model: keras.Model, small: Batch, fields: dict[str, Any], deadline: float, skipped: list[str]
) -> dict[str, Any]:
    """Overfit the small batch; then, unless that proved the model uses its input, the zeroed control."""
    now = time.perf_counter()
    clone = clone_compiled(model)  # (the gradient check ran BatchNorm in training mode once)
    start = inference_loss(clone, small)
    baseline, floor = fields.get("baseline_loss"), fields.get("floor_loss") or 0.0
    # The scale of the task's losses: what the output implies at initialisation (the first loss
    # can be inflated by the very problem looked for), plus the regression allowance.
    scale = fields.get("expected_loss")
    if scale is not None and loss_is_regression(fields.get("loss")):
        scale += REGRESSION_OUTPUT_ALLOWANCE
    scale = start if scale is None else scale
    useful = baseline is not None and math.isfinite(start) and baseline - floor >= MIN_BASELINE_SHARE * scale
    reference = baseline if useful and baseline is not None else start
    target = floor + FIT_FRACTION * (reference - floor)
    fit = overfit(clone, small, target, deadline=now + FIT_TIME_SHARE * max(deadline - now, 0.0), floor=floor)
    found: dict[str, Any] = {
        "fit_steps": fit.steps,
        "fit_seconds": fit.seconds,
        "fit_start_loss": finite_or_none(fit.start_loss),
        "fit_end_loss": finite_or_none(fit.end_loss),
        "fit_max_loss": finite_or_none(fit.max_loss),
        "fit_reference": finite_or_none(reference),
        "fit_target": finite_or_none(target),
        "fit_stopped": fit.stopped,
    }
    if fit.stopped == FitStop.TIME:
        skipped.append("small-batch fit verdict: max_seconds ran out while the loss was still falling")
    if not useful or fit.stopped == FitStop.NONFINITE or fit.end_loss - floor <= INPUT_USE_PROVEN * (reference - floor):
        return found  # input use proven, or nothing to compare against (no baseline, NaN)
    if time.perf_counter() >= deadline:
        skipped.append("input check: the time budget ran out")
        return found
    control = zeroed_control(clone_compiled(model), small, fit.steps, deadline)
    if control is None:
        skipped.append("input check: the inputs are not numeric (cannot be zeroed)")
    elif control.steps < fit.steps:
        skipped.append(f"input check: the time budget ran out ({control.steps} of {fit.steps} steps)")
    else:
        found.update(
            zeroed_start_loss=finite_or_none(control.start_loss),
            zeroed_end_loss=finite_or_none(control.end_loss),
            zeroed_steps=control.steps,
        )
    return found


def _lint(model: keras.Model, batch: Batch) -> list[Event]:
    """The train-start lint of the model and of this batch (labels vs loss, input scale), and the
    initial weights' statistics (a failed fit names a symmetric or badly scaled initialisation)."""
    init = weight_init(model)
    events: list[Event] = [*lint_model(model), *lint_layers(model), *([init] if init is not None else [])]
    batch_lint = BatchLint(model)
    labels = (batch.x, batch.y) if batch.y is not None else (batch.x,)
    events += batch_lint.inspect(labels) + batch_lint.finish()
    return [e for e in events if getattr(e, "check", None) not in _NOT_FROM_ONE_BATCH]


def _outputs(model: keras.Model, batch: Batch) -> int | None:
    """Units of the model's single output (None for several outputs)."""
    pred = model(batch.head(1).x, training=False)
    if not tf.is_tensor(pred) or pred.shape.rank is None or pred.shape.rank < 2:
        return None
    return int(pred.shape[-1])


def judge(model: keras.Model, events: list[Event]) -> list[Finding]:
    """The findings the rule engine gives for these events (as `diagnose` will for the log)."""
    loss, _ = loss_of(model)
    info = RunInfo(model=model.name, loss=loss.value if loss is not None else None)
    return read_side.diagnose(RunSignals(run=model.name, events=events, info=info), final=True)


def write(log_dir: str, model: keras.Model, events: list[Event]) -> None:
    """The run info and the events under the preflight tag: the run's preflight in the tab and CLI."""
    from tb_trainhealth.callback.record.health_writer import HealthWriter

    writer = HealthWriter(log_dir)
    try:
        step = min(e.step for e in events)
        optimizer = model.optimizer
        rate, clips = optimizer_settings(optimizer)
        loss, _ = loss_of(model)
        info = RunInfo(
            schema=tags.SCHEMA_VERSION,
            model=model.name,
            optimizer=type(optimizer).__name__,
            loss=loss.value if loss is not None else None,
            start_step=step,
            learning_rate=rate,
            clips_gradients=clips,
        )
        writer.write_json(tags.TAG_RUN_INFO, step, info.to_json())
        writer.write_json(tags.TAG_PREFLIGHT, step, [event.to_json() for event in events])
    finally:
        writer.close()
