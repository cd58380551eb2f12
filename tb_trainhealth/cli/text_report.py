"""`diagnose` for a person at a terminal: each run's status line, its errors, and each finding
with its detail, its first facts and fixes (the rest are in --json and the Health tab), then a
one-line count. What to record when nothing is found is said here too.
"""

from __future__ import annotations

import collections
import textwrap
from typing import Any

from tb_trainhealth.cli.json_report import UNREADABLE
from tb_trainhealth.findings import STATUS_ORDER, Finding
from tb_trainhealth.read import event_files

MAX_FIXES = 3  # per finding in text output; --json has them all
MAX_FACTS = 8


def render_text(results: list[dict[str, Any]], logdir: str) -> str:
    if not results:
        return (
            f"No training runs found under {logdir}.\n"
            'Record one with:  model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])\n'
        )
    lines = []
    for result in results:
        findings: list[Finding] = result["findings"]
        lines.append(f"{result['status'].upper():8} {result['run']}  ({len(findings)} finding(s))")
        for error in result["errors"]:
            lines.append(f"  ! {error}")
        for problem in result["file_errors"]:
            if problem["kind"] not in event_files.ERROR_KINDS:
                lines.append(f"  note: {problem['file']}: {problem['error']}")
        for finding in findings:
            lines.append(f"  [{finding.severity.label}] {finding.code}{finding.onset_text}: {finding.title}")
            lines.extend(textwrap.wrap(finding.detail, 100, initial_indent="      ", subsequent_indent="      "))
            for fact in finding.evidence.facts[:MAX_FACTS]:
                lines.append(f"      - {fact.label}: {fact.value}")
            for fix in finding.fixes[:MAX_FIXES]:
                lines.append(f"      fix: {fix.text}")
                if fix.code:
                    lines.append(textwrap.indent(fix.code, " " * 11))
            if len(finding.fixes) > MAX_FIXES:
                lines.append(f"      (+{len(finding.fixes) - MAX_FIXES} more fixes: --json, or the Health tab)")
        lines.append("")
    lines.append(summary_line(results))
    return "\n".join(lines) + "\n"


def summary_line(results: list[dict[str, Any]]) -> str:
    """The last line, "3 run(s): 0 critical, 1 warning, 1 ok, 1 unreadable", counted as the
    tab's summary counts them: an unreadable run is not ok, and is named only when there is one."""
    counts = collections.Counter(r["status"] for r in results)
    parts = [f"{counts[status]} {status}" for status in STATUS_ORDER]
    if counts[UNREADABLE]:
        parts.append(f"{counts[UNREADABLE]} {UNREADABLE}")
    return f"{len(results)} run(s): " + ", ".join(parts)
