"""The read side (engine, reader, CLI, plugin) works where TensorFlow is not installed, and never imports it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_cli_and_engine_run_with_tensorflow_unimportable(scenario_logdir, scenario_findings):
    script = textwrap.dedent(
        f"""
        import sys, json
        sys.modules["tensorflow"] = None  # any `import tensorflow` now raises ImportError
        sys.modules["keras"] = None
        import tb_trainhealth, tb_trainhealth.engine, tb_trainhealth.read.reader
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
        """
        import sys
        sys.modules["tensorflow"] = None
        sys.modules["keras"] = None
        try:
            from tb_trainhealth import HealthCallback
        except ImportError as err:
            print(err)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "pip install 'tb-trainhealth[tf]'" in proc.stdout


def test_diagnosing_and_comparing_through_the_cli_and_the_plugin_never_imports_tensorflow(scenario_logdir):
    """With TensorFlow installed, nothing on the read side imports it (TensorBoard runs without
    it; `import tensorflow` alone costs ~2 s): checked in sys.modules after real diagnoses."""
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys, types
        # As TensorBoard does where TensorFlow is absent; the CLI sets this itself for local paths.
        sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")
        from tb_trainhealth.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            main(["diagnose", {scenario_logdir!r}, "--json"])
            compared = main(["compare", {scenario_logdir!r} + "/nan_input", {scenario_logdir!r} + "/healthy_mlp"])
        assert compared == 1, compared  # worse: the run went NaN where the baseline did not
        from tensorboard.backend import application
        from tensorboard.plugins import base_plugin
        from werkzeug import test, wrappers
        from tb_trainhealth.read.logdir import open_logdir
        from tb_trainhealth.plugin.health_plugin import HealthPlugin
        provider = open_logdir({scenario_logdir!r})
        plugin = HealthPlugin(base_plugin.TBContext(logdir={scenario_logdir!r}, data_provider=provider))
        client = test.Client(application.TensorBoardWSGI([plugin], data_provider=provider), wrappers.Response)
        runs = json.loads(client.get("/data/plugin/trainhealth/runs").get_data())["runs"]
        for run in runs:
            assert client.get("/data/plugin/trainhealth/findings?run=" + run["run"]).status_code == 200
        compare_route = "/data/plugin/trainhealth/compare?run=nan_input&baseline=healthy_mlp"
        assert client.get(compare_route).status_code == 200
        print(json.dumps({{"runs": len(runs), "loaded": sorted(
            name for name in sys.modules if name.split(".")[0] in ("tensorflow", "keras", "tf_keras")
        )}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["runs"] > 5 and result["loaded"] == []
