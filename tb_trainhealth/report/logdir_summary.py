"""A logdir's one-line count of its runs, told once for the CLI's last line and the tab's toolbar:
"4 run(s): 0 critical, 1 warning, 1 ok, 2 unreadable". An unreadable run is not ok, and is named
only when there is one; so are runs the tab is still diagnosing."""

from __future__ import annotations

import collections

from tb_trainhealth.contract.vocab import JUDGED_STATUSES, RunStatus
from tb_trainhealth.report.run_report import RunReport


def summary_line(reports: list[RunReport]) -> str:
    counts = collections.Counter(report.status for report in reports)
    parts = [f"{counts[status]} {status}" for status in JUDGED_STATUSES]
    if counts[RunStatus.UNREADABLE]:
        parts.append(f"{counts[RunStatus.UNREADABLE]} {RunStatus.UNREADABLE}")
    if counts[RunStatus.PENDING]:
        parts.append(f"{counts[RunStatus.PENDING]} still being diagnosed")
    return f"{len(reports)} run(s): " + ", ".join(parts)
