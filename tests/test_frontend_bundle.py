"""The committed bundle is exactly what a fresh build of frontend/ produces (so pip needs no Node)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

BUNDLE = Path(ROOT, "tb_trainhealth", "plugin", "static", "index.js")


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed")
def test_committed_bundle_matches_a_fresh_build_and_typechecks(tmp_path):
    source = Path(ROOT, "frontend")
    copy = tmp_path / "frontend"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("node_modules"))
    (tmp_path / "tb_trainhealth" / "plugin" / "static").mkdir(parents=True)
    for command in (["npm", "ci", "--no-audit", "--no-fund"], ["npm", "run", "check"], ["npm", "run", "build"]):
        proc = subprocess.run(command, cwd=copy, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    fresh = (tmp_path / "tb_trainhealth" / "plugin" / "static" / "index.js").read_bytes()
    assert fresh == BUNDLE.read_bytes(), "rebuild the bundle: cd frontend && npm ci && npm run build"


def test_bundle_never_builds_html_from_strings():
    """Run names, tags and messages are data: the tab must not parse them as HTML."""
    sources = "".join(p.read_text() for p in Path(ROOT, "frontend", "src").glob("*.ts"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in sources, sink
