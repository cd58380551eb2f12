"""`HealthCallback(baseline=...)`: this run, as recorded so far, against a known-good run on disk.

The comparison itself is the read side's (`tb_trainhealth.compare`); this module only turns it
into the events the run keeps, so `diagnose`, `watch` and the Health tab see the same verdict.
One `BaselineWatch` per fit reads and diagnoses the baseline once, at the first epoch end; each
epoch end then judges the run so far against it at the same step (`compare.so_far`: ~0.4 ms,
`python bench/baseline_per_epoch.py`), and records an event only when that verdict changes. The comparison at the end of the fit is the final word. A baseline that cannot be read
is an `unknown` verdict with the reason at the end of the fit, never an error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tb_trainhealth.callback import read_side
from tb_trainhealth.contract.events import ComparisonEvent, FitEndEvent, Verdict
from tb_trainhealth.signals import RunSignals

if TYPE_CHECKING:
    from tb_trainhealth.compare.so_far import Yardstick
    from tb_trainhealth.diagnosis import Diagnosis


class BaselineWatch:
    """One fit's comparisons with the baseline at `path`."""

    def __init__(self, path: str):
        self.path = path
        self._baseline: Diagnosis | None = None
        self._unreadable: str | None = None  # why the baseline could not be read
        self._stick: Yardstick | None = None
        self._behind_since: int | None = None  # the step from which the run is behind; None: not behind
        self._started = False

    def _read(self, run: RunSignals) -> Diagnosis | None:
        """The baseline, read and diagnosed at the first call only (here, not at import: a callback
        without a baseline never loads the read side's loaders)."""
        if self._started:
            return self._baseline
        from tb_trainhealth.compare.runs import RunNotComparable, diagnosed_directory
        from tb_trainhealth.compare.so_far import Yardstick

        self._started = True
        earlier = run.events_of(ComparisonEvent)  # an earlier fit of this run said it was behind
        if earlier and earlier[-1].verdict == Verdict.WORSE:
            self._behind_since = earlier[-1].step
        try:
            self._baseline = diagnosed_directory(self.path, "baseline")
        except RunNotComparable as err:
            self._unreadable = str(err)
            return None
        self._stick = Yardstick.of(run, self._baseline.signals)
        return self._baseline

    def epoch_end(self, run: RunSignals, step: int, metric_classes: dict[str, str]) -> ComparisonEvent | None:
        """The run so far against the baseline at the same step: an event where the verdict
        changed (now clearly behind, or caught up), else None. `metric_classes`: what this fit's
        metrics resolved to (its end of fit, which records them, is not written yet)."""
        from tb_trainhealth.compare.comparison import behind_finding
        from tb_trainhealth.compare.so_far import cut_at, judged_so_far

        baseline = self._read(run)
        if baseline is None or self._stick is None:
            return None
        resolved = FitEndEvent(step, metric_classes=metric_classes)
        judged = judged_so_far(dataclasses.replace(run, events=[*run.events, resolved]), baseline.signals, self._stick)
        if judged is None:
            return None
        behind = judged.judgement.verdict == Verdict.WORSE
        if behind == (self._behind_since is not None):
            return None
        verdict, why = judged.judgement.verdict, judged.judgement.why
        if not behind:
            self._behind_since = None
            return ComparisonEvent(step, baseline.signals.run, verdict, why, during_fit=True)
        self._behind_since = step
        ours, theirs = cut_at(run, judged.run_end), cut_at(baseline.signals, judged.baseline_end)
        finding = behind_finding(ours, theirs, judged.judgement, since=step)
        return ComparisonEvent(step, baseline.signals.run, verdict, why, finding.to_dict(), during_fit=True)

    def end(self, run: RunSignals, step: int) -> ComparisonEvent:
        """The whole run against the whole baseline: the verdict that stays (seconds)."""
        from tb_trainhealth.compare.comparison import CODE, compare

        baseline = self._read(run)
        if baseline is None:
            why = self._unreadable or "the baseline could not be read"
            return ComparisonEvent(step=step, baseline=self.path, verdict=Verdict.UNKNOWN, why=why)
        # (the run's own comparisons so far are this one's, not an earlier verdict to set aside)
        own = [f for f in read_side.diagnose(run, final=True) if f.code != CODE]
        comparison = compare(run, baseline.signals, own, baseline.findings)
        finding = next((f for f in comparison.findings if f.code == CODE), None)
        found = finding.to_dict() if finding is not None else None
        if found is not None and self._behind_since is not None:
            found["detail"] = f"{found['detail']} Behind the baseline since {run.at(self._behind_since)}."
        return ComparisonEvent(step, comparison.baseline or self.path, comparison.verdict, comparison.why, found)
