"""The events of the train-start checks: the model and the first batches (`lint`), the tf.data
pipeline (`pipeline_lint`) and preflight (`preflight`). The richest payloads of the contract, one
field per thing a check measured; `events.py` registers them with the rest."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tb_trainhealth.contract.event_base import Event, EventKind
from tb_trainhealth.contract.vocab import FitStop, LintCheck, LossKind, PipelineCheck


@dataclasses.dataclass(frozen=True)
class LintEvent(Event):
    """A train-start check of the model or the first batches; fields by check."""

    kind: ClassVar[EventKind] = EventKind.LINT
    urgent: ClassVar[bool] = True

    check: LintCheck
    layer: str | None = None
    activation: str | None = None
    loss: LossKind | None = None
    from_logits: bool | None = None
    units: int | None = None
    rate: float | None = None  # dropout
    output_range: tuple[float | None, ...] = ()  # (low, high) of the output activation; None: unbounded
    label_min: float | None = None
    label_max: float | None = None
    label_shape: tuple[int, ...] = ()
    classes: int | None = None  # class ids the labels look like
    share: float | None = None  # single_class: share of the top class
    labels: int | None = None  # single_class: labels sampled
    label_class: int | None = dataclasses.field(default=None, metadata={"key": "class"})
    batches: int | None = None  # batches sampled
    input_value: float | None = None  # constant_input
    input_rms: float | None = None
    input_min: float | None = None
    input_max: float | None = None
    class_counts: tuple[float, ...] = ()  # label_statistics, classification
    # label_statistics, one class per sample: how many classes each sampled batch held, of how many rows
    # (batches read in class order hold one; shuffled ones nearly every class: rules/batch_order.py).
    batch_classes: tuple[int, ...] = ()
    batch_rows: tuple[int, ...] = ()
    count: int | None = None  # label_statistics, regression / binary: targets sampled
    mean: float | None = None
    variance: float | None = None
    # label_statistics (callback/lint/constant_prediction.py): the compiled loss of the best constant
    # prediction, how it is made, and a perfect prediction's where not ~0 (soft targets: their entropy).
    constant_loss: float | None = None
    constant_how: str | None = None
    floor_loss: float | None = None


@dataclasses.dataclass(frozen=True)
class PipelineLintEvent(Event):
    """A tf.data pipeline built in a known-slow or wrong way (callback/lint/pipeline_lint.py)."""

    kind: ClassVar[EventKind] = EventKind.PIPELINE_LINT
    urgent: ClassVar[bool] = True

    check: PipelineCheck
    stage: str | None = None  # the dataset op at fault
    method: str | None = None
    ops: tuple[str, ...] = ()
    buffer_size: int | None = None
    elements: int | None = None


@dataclasses.dataclass(frozen=True)
class PreflightEvent(Event):
    """What one preflight (`tb_trainhealth.preflight`) measured on a small batch, before any
    training step; the read-side rules (rules/preflight.py) judge it. None: not measured."""

    kind: ClassVar[EventKind] = EventKind.PREFLIGHT
    urgent: ClassVar[bool] = True

    samples: int = 0  # in the batch every check used
    seconds: float | None = None  # the whole preflight
    max_seconds: float | None = None
    loss: LossKind | None = None  # a single built-in loss, else None
    outputs: int | None = None  # units of the (single) output
    # Initial loss: measured (inference mode) and what the output layer and loss imply.
    initial_loss: float | None = None
    expected_loss: float | None = None
    expected_how: str | None = None
    # On the fit batch: the best constant prediction's loss (label entropy, target variance) and
    # a perfect prediction's (above 0 with label smoothing or soft labels).
    baseline_loss: float | None = None
    floor_loss: float | None = None
    # Overfitting the batch: losses (best of training and inference mode), steps, why it stopped.
    # The reference is the loss that means "nothing fitted" (the baseline, or the first loss).
    fit_samples: int | None = None
    trainable_params: int | None = None
    learning_rate: float | None = None
    fit_steps: int | None = None
    fit_seconds: float | None = None
    fit_start_loss: float | None = None
    fit_end_loss: float | None = None
    fit_max_loss: float | None = None
    fit_reference: float | None = None
    fit_target: float | None = None
    fit_stopped: FitStop | None = None
    # The same fit with every input zeroed (run only when the real fit did not prove input use).
    zeroed_start_loss: float | None = None
    zeroed_end_loss: float | None = None
    zeroed_steps: int | None = None
    # Gradients on the batch, per trainable variable (paths).
    trainable_variables: int | None = None
    no_gradient: tuple[str, ...] = ()  # gradient None: not connected to the loss
    zero_gradient: tuple[str, ...] = ()  # gradient exactly zero everywhere
    skipped: tuple[str, ...] = ()  # checks that could not run, each "check: why"
