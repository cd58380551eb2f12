"""`diagnose --json`: the one JSON object CI jobs and scripts parse (its shape is a contract:
DESIGN.md and the parser's epilog). Only what is in it here is promised; the results' other keys
(axis, diagnosed) stay internal.
"""

from __future__ import annotations

import json
from typing import Any


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
