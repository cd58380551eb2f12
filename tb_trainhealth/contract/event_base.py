"""What every event is: its kind and the step it happened at (`events.py` has the kinds and reads
them back). Apart so that the train-start checks' events (`check_events.py`) and the others share
it without importing each other."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tb_trainhealth.contract import payload
from tb_trainhealth.contract.vocab import Name


class EventKind(Name):
    NONFINITE = "nonfinite"
    NAN_ORIGIN = "nan_origin"
    LINT = "lint"
    PIPELINE_LINT = "pipeline_lint"
    ACTIVATIONS = "activations"
    CRASH = "crash"
    OOM = "oom"
    BATCH_SIZE = "batch_size"
    FINDING = "finding"
    FIT_END = "fit_end"
    PREFLIGHT = "preflight"
    STALL = "stall"
    RESUMED = "resumed"
    WEIGHT_INIT = "weight_init"
    COMPARISON = "comparison"
    PART_OFF = "part_off"
    TRIALS = "trials"


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
