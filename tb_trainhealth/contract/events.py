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
from tb_trainhealth.contract.check_events import LintEvent, PipelineLintEvent, PreflightEvent
from tb_trainhealth.contract.event_base import Event, EventKind
from tb_trainhealth.contract.trial_events import TrialResult, TrialsEvent, TrialVerdict
from tb_trainhealth.contract.vocab import LintCheck, Name, NanOriginWhere, NonfiniteWhere, PipelineCheck

# Every event type, wherever it is defined: importers take them from here.
__all__ = [
    "EVENT_TYPES",
    "ActivationsEvent",
    "BatchSizeEvent",
    "ComparisonEvent",
    "CrashEvent",
    "Event",
    "EventKind",
    "FindingEvent",
    "FitEndEvent",
    "Frame",
    "LayerActivations",
    "LayerWeights",
    "LintEvent",
    "NanOriginEvent",
    "NonfiniteEvent",
    "OomEvent",
    "PartOffEvent",
    "PipelineLintEvent",
    "PreflightEvent",
    "ResumedEvent",
    "StallEvent",
    "StallPhase",
    "ThreadPlace",
    "TrialResult",
    "TrialVerdict",
    "TrialsEvent",
    "UnknownEvent",
    "WeightInitEvent",
    "parse_event",
]


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
class BatchSizeEvent(Event):
    """`tb_trainhealth.fit` grew the batch size back after steps that fit at a smaller one
    (`batch_size` from `previous_batch_size`), from `epoch` on; an OOM at the grown size is an
    OomEvent whose next_batch_size is the size that fit before."""

    kind: ClassVar[EventKind] = EventKind.BATCH_SIZE

    batch_size: int | None = None
    previous_batch_size: int | None = None
    epoch: int | None = None
    peak_mb: float | None = None  # the highest memory reading at the previous size
    limit_mb: float | None = None  # what the process may hold, where known


@dataclasses.dataclass(frozen=True)
class FitEndEvent(Event):
    """How a fit ended: all its epochs, or stopped early (by EarlyStopping, stop_on, ...)."""

    kind: ClassVar[EventKind] = EventKind.FIT_END

    epochs_run: int | None = None
    epochs_planned: int | None = None
    stopped_early: bool = False  # model.stop_training was set
    stopped_by: tuple[str, ...] = ()  # callbacks that can stop a fit and were there (EarlyStopping, ...)
    # What each compiled metric resolved to ({"accuracy": "SparseCategoricalAccuracy"}): Keras picks the
    # class for 'accuracy' from the loss and the shapes, so two runs' "accuracy" may not be one quantity.
    metric_classes: dict[str, str] = dataclasses.field(default_factory=dict)


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


class Verdict(Name):
    """A run against its baseline (`tb_trainhealth.compare`): beyond what seeds alone move, or not."""

    WORSE = "worse"
    SAME = "same"
    BETTER = "better"
    UNKNOWN = "unknown"  # not comparable (no shared metric, an unreadable baseline)

    @classmethod
    def _missing_(cls, value: object) -> Verdict:
        return cls.UNKNOWN  # (a verdict a newer writer added reads as one this reader cannot judge)


@dataclasses.dataclass(frozen=True)
class ComparisonEvent(Event):
    """`HealthCallback(baseline=...)`: the run compared with the baseline at the end of a fit
    (`tb_trainhealth.compare`), or during one (`during_fit`: the run so far against the baseline
    at the same step, recorded when that verdict changes); `finding` is the `worse_than_baseline`
    finding, where it was worse. The latest one is the current verdict."""

    kind: ClassVar[EventKind] = EventKind.COMPARISON
    urgent: ClassVar[bool] = True  # said at once, not at the next scheduled diagnosis

    baseline: str
    verdict: Verdict
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
        BatchSizeEvent,
        FitEndEvent,
        StallEvent,
        ResumedEvent,
        FindingEvent,
        PreflightEvent,
        WeightInitEvent,
        ComparisonEvent,
        PartOffEvent,
        TrialsEvent,
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
