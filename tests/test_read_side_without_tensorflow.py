"""The read side (engine, reader, CLI) works where TensorFlow is not installed at all."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT


def test_cli_and_engine_run_with_tensorflow_unimportable(scenario_logdir, scenario_findings):
    script = textwrap.dedent(
        f"""
        import sys, json
        sys.modules["tensorflow"] = None  # any `import tensorflow` now raises ImportError
        sys.modules["keras"] = None
        sys.path.insert(0, {ROOT!r})
        import tb_trainhealth, tb_trainhealth.engine, tb_trainhealth.reader
        from tb_trainhealth.cli import main
        sys.exit(main(["diagnose", {scenario_logdir!r}, "--json"]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    runs = {r["run"]: [f["code"] for f in r["findings"]] for r in json.loads(proc.stdout)["runs"]}
    assert runs == {name: [f.code for f in findings] for name, findings in scenario_findings.items()}


def test_health_callback_import_error_is_explained():
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["tensorflow"] = None
        sys.modules["keras"] = None
        sys.path.insert(0, {ROOT!r})
        try:
            from tb_trainhealth import HealthCallback
        except ImportError as err:
            print(err)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "pip install 'tb-trainhealth[tf]'" in proc.stdout
