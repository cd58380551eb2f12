"""The code base stays ruff-clean (the same check a reviewer runs)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import ROOT


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_ruff_clean():
    proc = subprocess.run(["ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
