"""A run's discrete events as one line each, in step order: lint, OOM retries, the first
NaN and its origin, stalls, the crash, findings first seen live, the fit's end. The tab shows
it beside the charts so "what happened when" reads in one place."""

from __future__ import annotations

import dataclasses
from typing import Any

from tb_trainhealth.contract.events import (
    ActivationsEvent,
    BatchSizeEvent,
    ComparisonEvent,
    CrashEvent,
    Event,
    FindingEvent,
    FitEndEvent,
    LintEvent,
    NanOriginEvent,
    NonfiniteEvent,
    OomEvent,
    PipelineLintEvent,
    PreflightEvent,
    ResumedEvent,
    StallEvent,
    TrialsEvent,
    TrialVerdict,
    Verdict,
    WeightInitEvent,
)
from tb_trainhealth.signals import RunSignals

MAX_ENTRIES = 200  # a run that retried or stalled all night: the first ones tell the story
MAX_TEXT = 200


@dataclasses.dataclass(frozen=True)
class Entry:
    step: int
    kind: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "kind": self.kind, "text": self.text}


def _text(event: Event) -> str | None:
    """One line for an event; None for measurements (activation probes, kernel and data statistics)."""
    match event:
        case NonfiniteEvent():
            layers = f" in {', '.join(event.layers[:3])}" if event.layers else ""
            return f"first NaN/Inf in the {event.where}{layers}"
        case NanOriginEvent():
            where = event.op or event.layer
            return f"NaN origin: {event.where}" + (f" ({where})" if where else "")
        case LintEvent() if event.check.value.endswith("_statistics"):
            return None  # what the first batches look like, recorded for the rules: not a problem
        case LintEvent() | PipelineLintEvent():
            return f"check failed: {event.check.value.replace('_', ' ')}" + (
                f" ({event.layer})" if isinstance(event, LintEvent) and event.layer else ""
            )
        case OomEvent():
            then = f", retried at {event.next_batch_size}" if event.next_batch_size else ", gave up"
            return f"out of memory at batch size {event.batch_size}{then}"
        case BatchSizeEvent():
            return f"batch size grown back to {event.batch_size} (from {event.previous_batch_size})"
        case CrashEvent():
            return f"crashed: {event.error_type}" + (f" in {event.phase}" if event.phase else "")
        case StallEvent():
            return f"no step finished for {event.seconds:.0f} s ({event.phase.value})"
        case ResumedEvent():
            return "fit ended during the stall" if event.ended else f"resumed after {event.seconds:.0f} s"
        case FindingEvent():
            code, title = event.finding.get("code", "?"), event.finding.get("title", "")
            return f"reported live: {code}" + (f": {title}" if isinstance(title, str) and title else "")
        case PreflightEvent():
            return f"preflight on {event.samples} samples" + (f" ({event.seconds:.1f} s)" if event.seconds else "")
        case FitEndEvent():
            planned = f"/{event.epochs_planned}" if event.epochs_planned is not None else ""
            epochs = f" after {event.epochs_run}{planned} epochs" if event.epochs_run is not None else ""
            return ("fit stopped early" if event.stopped_early else "fit ended") + epochs
        case ComparisonEvent(during_fit=True):
            how = "behind" if event.verdict == Verdict.WORSE else "no longer behind"
            return f"{how} baseline {event.baseline} at the same step"
        case ComparisonEvent():
            return f"compared with baseline {event.baseline}: {event.verdict}"
        case TrialsEvent(skipped=str() as why):
            return f"changes not tried: {why}"
        case TrialsEvent():
            helped = sum(t.verdict is TrialVerdict.HELPED for t in event.trials)
            return f"tried {len(event.trials)} change(s) on {event.samples} samples in {event.seconds:.1f} s: {helped} helped"
        case ActivationsEvent() | WeightInitEvent():
            return None
    return event.kind.value


def timeline(run: RunSignals) -> list[Entry]:
    """The run's events worth a line, by step (a stable sort keeps same-step events in write order)."""
    entries = []
    for event in sorted(run.events, key=lambda e: e.step):
        text = _text(event)
        if text is not None:
            entries.append(Entry(event.step, event.kind.value, text[:MAX_TEXT]))
    return entries[:MAX_ENTRIES]
