"""Events: the discrete records under `tags.TAG_EVENTS`, one typed payload per kind.

The callback builds these objects and writes `to_json()` of each (a JSON list per
record); readers turn what they read back into the same objects with `parse_event`,
once. The online engine gets the very objects the callback wrote. A valid event has a
known kind and a step (an int >= 0, never a bool); anything else is not an event.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tb_trainhealth.contract import payload
from tb_trainhealth.contract.vocab import (
    FitStop,
    LintCheck,
    LossKind,
    Name,
    NanOriginWhere,
    NonfiniteWhere,
    PipelineCheck,
)


class EventKind(Name):
    NONFINITE = "nonfinite"
    NAN_ORIGIN = "nan_origin"
    LINT = "lint"
    PIPELINE_LINT = "pipeline_lint"
    ACTIVATIONS = "activations"
    CRASH = "crash"
    OOM = "oom"
    FINDING = "finding"
    FIT_END = "fit_end"
    PREFLIGHT = "preflight"
    STALL = "stall"
    RESUMED = "resumed"
    WEIGHT_INIT = "weight_init"
    COMPARISON = "comparison"
    PART_OFF = "part_off"


@dataclasses.dataclass(frozen=True)
class Event:
    """Base of every event: where in training it happened."""

    kind: ClassVar[EventKind]
    # Events that sample the state of training, like a series point (cut with the series
    # when a run is judged up to a step), rather than one-off records.
    measurement: ClassVar[bool] = False
    # Worth a diagnosis at once: a finding should not wait for the next scheduled one.
    urgent: ClassVar[bool] = False

    step: int

    def __post_init__(self) -> None:
        if isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 0:
            raise payload.Invalid(f"{type(self).__name__}: step must be an int >= 0, got {self.step!r}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, **payload.to_json(self)}


@dataclasses.dataclass(frozen=True)
class NonfiniteEvent(Event):
    """The first step whose loss, gradients or weights held NaN/Inf (one event per `where`)."""

    kind: ClassVar[EventKind] = EventKind.NONFINITE
    urgent: ClassVar[bool] = True

    where: NonfiniteWhere
    layers: tuple[str, ...] = ()  # the layers hit at that step
    count: float | None = None  # layers with non-finite gradients (where == "gradients")
    replicas: tuple[int, ...] = ()  # replicas whose own gradients were non-finite, before the all-reduce


@dataclasses.dataclass(frozen=True)
class NanOriginEvent(Event):
    """Where the first NaN came from, found by replaying its batch (see callback/nan/nan_origin.py)."""

    kind: ClassVar[EventKind] = EventKind.NAN_ORIGIN

    where: NanOriginWhere
    layer: str | None = None
    op: str | None = None
    message: str | None = None  # TensorFlow's check_numerics message
    count: int | None = None  # NaN/Inf values in the batch (input, labels)
    position: tuple[int, ...] = ()  # (batch row, index...) of the first one
    layers: tuple[str, ...] = ()  # layers with non-finite weights (where == "weights")


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
class LayerActivations:
    activation: str = "?"
    units: int | None = None
    dead: float | None = None  # ReLU: share of units off for >99% of the probe batch
    saturated: float | None = None  # sigmoid/tanh: share of units in their flat regions


@dataclasses.dataclass(frozen=True)
class ActivationsEvent(Event):
    """Per-layer activation shares on the probe batch (dead_relu, saturated_activation)."""

    kind: ClassVar[EventKind] = EventKind.ACTIVATIONS
    measurement: ClassVar[bool] = True

    layers: dict[str, LayerActivations]
    epoch: int | None = None


@dataclasses.dataclass(frozen=True)
class LayerWeights:
    """One Dense/Conv kernel's statistics (rules/initialization.py)."""

    activation: str = "?"  # the layer's own activation ("linear" when none)
    fan_in: int | None = None  # inputs per unit (kernel size x input channels)
    units: int | None = None  # output units / filters
    std: float | None = None  # over every element of the kernel
    mean: float | None = None


@dataclasses.dataclass(frozen=True)
class WeightInitEvent(Event):
    """Kernel statistics of every Dense/Conv layer at train start, in model order (once per fit,
    on the host before the first step: what the initialiser gave, or what a previous fit left)."""

    kind: ClassVar[EventKind] = EventKind.WEIGHT_INIT
    urgent: ClassVar[bool] = True

    layers: dict[str, LayerWeights]
    normalized: bool = False  # the model has a normalisation layer (BatchNorm, LayerNorm, ...)


@dataclasses.dataclass(frozen=True)
class CrashEvent(Event):
    """An exception that ended training, recorded before it propagated."""

    kind: ClassVar[EventKind] = EventKind.CRASH
    urgent: ClassVar[bool] = True

    error_type: str = "Exception"
    message: str = ""
    phase: str | None = None  # "training", "validation", "fit"
    epoch: int | None = None


@dataclasses.dataclass(frozen=True)
class OomEvent(Event):
    """An out-of-memory error caught by `tb_trainhealth.fit` (retried unless next_batch_size is None)."""

    kind: ClassVar[EventKind] = EventKind.OOM
    urgent: ClassVar[bool] = True

    batch_size: int | None = None
    next_batch_size: int | None = None
    memory_mb: float | None = None
    epoch: int | None = None


@dataclasses.dataclass(frozen=True)
class FitEndEvent(Event):
    """How a fit ended: all its epochs, or stopped early (by EarlyStopping, stop_on, ...)."""

    kind: ClassVar[EventKind] = EventKind.FIT_END

    epochs_run: int | None = None
    epochs_planned: int | None = None
    stopped_early: bool = False  # model.stop_training was set
    stopped_by: tuple[str, ...] = ()  # callbacks that can stop a fit and were there (EarlyStopping, ...)


class StallPhase(Name):
    """What the training thread was doing when no step finished in time."""

    INPUT = "input"  # waiting for its next batch (the input probe's fetch)
    STEP = "step"  # inside the compiled step (or a fetch the probe cannot see)
    CALLBACK = "callback"  # inside a callback's hook
    EVALUATION = "evaluation"  # inside validation


@dataclasses.dataclass(frozen=True)
class Frame:
    file: str = "?"
    function: str = "?"
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class ThreadPlace:
    """Where one Python thread was: its innermost user frames (not TensorFlow, Keras, the
    standard library or tb-trainhealth), innermost first, and the frame it waited in."""

    thread: str = "?"
    # "training" (the thread running fit), "generator" (a Dataset.from_generator generator),
    # "py_function" (a tf.py_function / numpy_function), "PyDataset" (a keras PyDataset
    # worker), or None.
    runs: str | None = None
    frames: tuple[Frame, ...] = ()
    waiting_in: Frame | None = None  # the innermost frame of all (socket read, lock, sleep...)


@dataclasses.dataclass(frozen=True)
class StallEvent(Event):
    """No training step finished for longer than the allowance; written by the watchdog thread at once."""

    kind: ClassVar[EventKind] = EventKind.STALL
    urgent: ClassVar[bool] = True

    seconds: float  # since the last step finished
    allowance: float  # seconds that counted as a stall here
    phase: StallPhase = StallPhase.STEP
    callback: str | None = None  # phase "callback": "ModelCheckpoint.on_epoch_end"
    first_step: bool = False  # the fit's first step or an evaluation's first batch (tracing)
    epoch: int | None = None
    threads: tuple[ThreadPlace, ...] = ()


@dataclasses.dataclass(frozen=True)
class ResumedEvent(Event):
    """The stall before it ended: a step finished again, or the fit ended (`ended`)."""

    kind: ClassVar[EventKind] = EventKind.RESUMED

    seconds: float  # how long no step finished, in all
    ended: bool = False  # the fit ended (or crashed) rather than a step finishing


@dataclasses.dataclass(frozen=True)
class FindingEvent(Event):
    """A finding the callback reported live (`Finding.to_dict()`), kept for the record."""

    kind: ClassVar[EventKind] = EventKind.FINDING

    finding: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ComparisonEvent(Event):
    """`HealthCallback(baseline=...)`: the run compared with the baseline at the end of a fit
    (`tb_trainhealth.compare`), or during one (`during_fit`: the run so far against the baseline
    at the same step, recorded when that verdict changes); `finding` is the `worse_than_baseline`
    finding, where it was worse. The latest one is the current verdict."""

    kind: ClassVar[EventKind] = EventKind.COMPARISON
    urgent: ClassVar[bool] = True  # said at once, not at the next scheduled diagnosis

    baseline: str
    verdict: str  # "worse", "same", "better", "unknown"
    why: str = ""
    finding: dict[str, Any] | None = None
    during_fit: bool = False


@dataclasses.dataclass(frozen=True)
class PartOffEvent(Event):
    """A part of the callback (`vocab.Part`; a newer writer may name others) is off from `step`
    for the rest of the fit: so a reader can tell "not measured" from "nothing happened"."""

    kind: ClassVar[EventKind] = EventKind.PART_OFF

    part: str
    reason: str  # one line: the error ("AttributeError: ..."), or the setting that rules it out
    error: bool = True  # an internal error (else a setting or platform it cannot run in)
    keras_version: str | None = None  # the Keras that ran (an internal moved in it?)


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


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind.value: cls
    for cls in (
        NonfiniteEvent,
        NanOriginEvent,
        LintEvent,
        PipelineLintEvent,
        ActivationsEvent,
        CrashEvent,
        OomEvent,
        FitEndEvent,
        StallEvent,
        ResumedEvent,
        FindingEvent,
        PreflightEvent,
        WeightInitEvent,
        ComparisonEvent,
        PartOffEvent,
    )
}


class UnknownEvent(payload.Invalid):
    """A well-formed event this reader does not know: a kind or a check added by a newer
    writer. Readers skip it without a word (a newer callback must not look like a broken log)."""


_CHECKS = {EventKind.LINT.value: LintCheck, EventKind.PIPELINE_LINT.value: PipelineCheck}


def parse_event(raw: Any) -> Event:
    """The event a decoded JSON object describes; raises UnknownEvent for a kind or check this
    version does not know, payload.Invalid for anything else that is not a valid event."""
    if not isinstance(raw, dict):
        raise payload.Invalid(f"expected an object, got {type(raw).__name__}")
    kind, check = raw.get("kind"), raw.get("check")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        if isinstance(kind, str):
            raise UnknownEvent(f"unknown event kind {kind[:40]!r}")
        raise payload.Invalid(f"event kind {str(kind)[:40]!r}")
    if kind in _CHECKS and isinstance(check, str) and check not in {c.value for c in _CHECKS[kind]}:
        raise UnknownEvent(f"unknown {kind} check {check[:40]!r}")
    try:
        return payload.parse(cls, raw)
    except (TypeError, ValueError) as err:  # (step checked in __post_init__)
        raise payload.Invalid(str(err)) from err
