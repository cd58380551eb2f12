"""README's example output is what the product prints: its NaN example's fixes are the fixes
`diagnose` gives today on the same demo scenario (trained once per session), so the README cannot
keep a fix the product no longer offers (it showed "lower the learning rate" for a NaN input)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT, loud

EXAMPLE = re.compile(r"<!-- example-output:start -->\n```\n(.*?)```\n<!-- example-output:end -->", re.S)


def readme_run_fixes(run: str) -> list[str]:
    """The `fix:` lines README's example prints under `run` (the shown ones, before "+N more")."""
    block = EXAMPLE.search((Path(ROOT) / "README.md").read_text()).group(1)
    section = block.split(f" {run} ", 1)[1].split("\n\n", 1)[0]
    return [line.split("fix: ", 1)[1].strip() for line in section.splitlines() if "fix: " in line]


def test_the_nan_example_shows_the_fixes_diagnose_gives_today(scenario_findings):
    shown = readme_run_fixes("nan_input")
    finding = loud(scenario_findings["nan_input"])["nonfinite"]
    assert shown, "README's example has no fix lines under nan_input"
    assert shown == [fix.text for fix in finding.fixes[: len(shown)]]
