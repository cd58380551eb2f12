"""`diagnose --json`: the one JSON object CI jobs and scripts parse. Each run is its report's JSON
form (`report.RunReport.to_json`), the keys its contract promises only (docs/cli.md's "The CLI"
section and the parser's epilog): the tab's routes send more keys of the same form.
"""

from __future__ import annotations

import json

from tb_trainhealth.report.run_report import RunReport

CONTRACT_KEYS = ("run", "status", "plan", "plan_note", "findings", "errors", "file_errors", "event_counts")


def render_json(reports: list[RunReport]) -> str:
    runs = [report.to_json(CONTRACT_KEYS) for report in reports]
    return json.dumps({"runs": runs}, indent=2, allow_nan=False)
