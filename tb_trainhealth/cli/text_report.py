"""`diagnose` for a person at a terminal: each run's status line, its errors, its plan (what to do,
at most three steps, with what trials measured), and each finding with its detail and its first
facts (the rest are in --json and the Health tab), then a one-line count. What to record when
nothing is found is said here too.
"""

from __future__ import annotations

import textwrap

from tb_trainhealth.advice.plan import plan_lines
from tb_trainhealth.report.logdir_summary import summary_line
from tb_trainhealth.report.run_report import RunReport

MAX_FACTS = 8


def render_text(reports: list[RunReport], logdir: str) -> str:
    if not reports:
        return (
            f"No training runs found under {logdir}.\n"
            'Record one with:  model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])\n'
        )
    lines = []
    for report in reports:
        lines.append(f"{report.status.upper():8} {report.run}  ({len(report.findings)} finding(s))")
        for error in report.errors:
            lines.append(f"  ! {error}")
        for note in report.notes:
            lines.append(f"  note: {note}")
        lines.extend(plan_lines(report.plan))
        for finding in report.findings:
            lines.append(f"  [{finding.severity.label}] {finding.code}{finding.onset_text}: {finding.title}")
            lines.extend(textwrap.wrap(finding.detail, 100, initial_indent="      ", subsequent_indent="      "))
            for fact in finding.evidence.facts[:MAX_FACTS]:
                lines.append(f"      - {fact.label}: {fact.value}")
            steps = report.plan.steps_answering(finding.code)
            if steps:
                lines.append(f"      -> plan step {', '.join(map(str, steps))}")
            note = report.plan.overruled.get(finding.code)
            if note:
                lines.extend(textwrap.wrap(note, 100, initial_indent="      ", subsequent_indent="      "))
        lines.append("")
    lines.append(summary_line(reports))
    return "\n".join(lines) + "\n"
