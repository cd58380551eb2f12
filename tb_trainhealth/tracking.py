"""Which findings were reported already: each is reported once, and again when it gets worse.

Shared by the callback (console line, `on_finding`, `stop_on`) and `tb-trainhealth watch`,
so both report the same findings at the same moments, in the same words.
"""

from __future__ import annotations

from collections.abc import Iterable

from tb_trainhealth.findings import Finding, Severity


class FindingTracker:
    """Findings at or above `threshold` not reported before at their severity.

    A finding is known by its key (code and layer): the same problem seen again in a
    later diagnosis of the growing run is not new, unless its severity rose (a warning
    that became critical is reported again, so `stop_on="critical"` and pages fire)."""

    def __init__(self, threshold: Severity = Severity.WARNING):
        self.threshold = threshold
        self._reported: dict[tuple[str, str | None], Severity] = {}

    def new(self, findings: Iterable[Finding]) -> list[tuple[Finding, Severity | None]]:
        """The findings to report now, each with the severity it was reported at before
        (None: never); they are remembered as reported."""
        fresh = []
        for finding in findings:
            if finding.severity < self.threshold:
                continue
            before = self._reported.get(finding.key)
            if before is None or finding.severity > before:
                self._reported[finding.key] = finding.severity
                fresh.append((finding, before))
        return fresh


def finding_line(finding: Finding, run: str, escalated_from: Severity | None = None) -> str:
    """One line for a finding as it is reported: `[critical] run: code @ step 38: title`."""
    worse = f" (was {escalated_from.label})" if escalated_from is not None else ""
    return f"[{finding.severity.label}] {run}: {finding.code}{finding.onset_text}: {finding.title}{worse}"
