"""`worse_than_baseline` from the comparison `HealthCallback(baseline=...)` recorded at the end of
a fit: the read side shows what the callback judged (the baseline may not be readable from here)."""

from __future__ import annotations

from tb_trainhealth.contract.events import ComparisonEvent, Verdict
from tb_trainhealth.findings import Finding
from tb_trainhealth.signals import RunSignals


def check_worse_than_baseline(run: RunSignals) -> list[Finding]:
    """The latest comparison's finding, where it said worse (a later fit compared again decides)."""
    comparisons = run.events_of(ComparisonEvent)
    if not comparisons or comparisons[-1].verdict != Verdict.WORSE or comparisons[-1].finding is None:
        return []
    try:
        return [Finding.from_dict(comparisons[-1].finding)]
    except (KeyError, TypeError, ValueError):  # a malformed record from disk costs this finding only
        return []
