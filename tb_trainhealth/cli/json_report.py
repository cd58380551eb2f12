"""`diagnose --json`: the one JSON object CI jobs and scripts parse (its shape is a contract:
README's "The CLI" section and the parser's epilog). Only what is in it here is promised; the results' other keys
(axis, diagnosed) stay internal.
"""

from __future__ import annotations

import json
from typing import Any

from tb_trainhealth.findings import STATUS_ORDER

# A run nothing of which could be read: it has no finding because nothing was looked at, so it
# is not "ok" (DESIGN's JSON contract lists it; the tab shows an "unreadable" badge).
UNREADABLE = "unreadable"
# Worst first, then by name. An unreadable run ranks with the "ok" runs, where the Health tab
# lists it (its runs route calls such a run "ok" with errors and no data).
RUN_ORDER = {**STATUS_ORDER, UNREADABLE: STATUS_ORDER["ok"]}


def render_json(results: list[dict[str, Any]]) -> str:
    runs = [
        {
            "run": r["run"],
            "status": r["status"],
            "findings": [f.to_dict() for f in r["findings"]],
            "errors": r["errors"],
            "file_errors": r["file_errors"],
            "event_counts": r["event_counts"],
        }
        for r in results
    ]
    return json.dumps({"runs": runs}, indent=2, allow_nan=False)
