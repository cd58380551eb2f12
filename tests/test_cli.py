"""`tb-trainhealth diagnose` end to end: callback -> event files -> CLI, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import scenarios
import tensorflow as tf

from tb_trainhealth.findings import Severity


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_json_output_matches_the_engine_and_the_contract(scenario_logdir, scenario_findings):
    proc = cli("diagnose", scenario_logdir, "--json")
    assert proc.returncode == 1, proc.stderr  # nan_input is critical; default --fail-on critical
    runs = json.loads(proc.stdout)["runs"]
    assert {r["run"] for r in runs} == set(scenario_findings)
    for run in runs:
        assert [f["code"] for f in run["findings"]] == [f.code for f in scenario_findings[run["run"]]]
        assert run["status"] in ("ok", "warning", "critical")
        for finding in run["findings"]:
            assert set(finding) >= {"code", "severity", "step", "title", "detail", "evidence", "plan_steps"}
        assert bool(run["plan"]) == (run["status"] != "ok")  # what to do: once per run, for a run that failed
    statuses = [r["status"] for r in runs]
    assert statuses == sorted(statuses, key=["critical", "warning", "ok"].index)  # worst first
    assert {r["run"]: r["status"] for r in runs}["healthy_mlp"] == "ok"


def test_local_logdirs_read_from_the_files_the_same_as_through_the_data_server_and_without_it(scenario_logdir):
    from tensorboard.data.grpc_provider import GrpcDataProvider

    from tb_trainhealth.cli.diagnose import LOADER_VARIABLE, TENSORBOARD_LOADERS
    from tb_trainhealth.read.logdir import loaded_logdir

    with loaded_logdir(scenario_logdir) as provider:
        assert isinstance(provider, GrpcDataProvider)  # TensorBoard's Rust loader (bench/scale.py times both)
    files = cli("diagnose", scenario_logdir, "--json")  # read from the files (read/file_provider.py)
    loaders = {LOADER_VARIABLE: TENSORBOARD_LOADERS}
    fast = cli("diagnose", scenario_logdir, "--json", env={"RUST_LOG": "warn", **loaders})  # the user's RUST_LOG
    assert files.returncode == fast.returncode and json.loads(files.stdout) == json.loads(fast.stdout)
    for server in ("/nonexistent", "/bin/false"):  # not installed; installed but cannot start
        slow = cli("diagnose", scenario_logdir, "--json", env={"TENSORBOARD_DATA_SERVER_BINARY": server, **loaders})
        assert slow.returncode == fast.returncode == 1 and slow.stderr == ""
        assert json.loads(slow.stdout) == json.loads(fast.stdout)


def test_human_output_has_one_block_per_run_worst_first(scenario_logdir):
    proc = cli("diagnose", scenario_logdir)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    headers = [line for line in lines if line and not line.startswith(" ")]
    assert headers[0].startswith("CRITICAL") and any(h.startswith("OK") for h in headers)
    assert "  plan 1. " in proc.stdout and "nan_input" in proc.stdout


def test_fail_on_warning(tmp_path):
    scenarios.loss_plateau(str(tmp_path / "plateau"))
    assert cli("diagnose", str(tmp_path)).returncode == 0  # only a warning
    assert cli("diagnose", str(tmp_path), "--fail-on", "warning").returncode == 1


def test_logdir_written_only_by_keras_tensorboard_callback(tmp_path):
    """No HealthCallback: overfitting still found from epoch_loss in train/ and validation/."""
    keras.utils.set_random_seed(0)
    x, y = scenarios._classes(300, 20, 4, 0, noise=1.5)
    model = scenarios._mlp(20, 4, hidden=(256, 256))
    model.compile(keras.optimizers.Adam(2e-3), scenarios.SPARSE_CE)
    tensorboard = keras.callbacks.TensorBoard(log_dir=str(tmp_path / "keras_run"))
    model.fit(x, y, epochs=40, batch_size=16, validation_split=0.3, verbose=0, callbacks=[tensorboard])
    proc = cli("diagnose", str(tmp_path), "--json")
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["run"] == "keras_run"
    assert "overfitting" in [f["code"] for f in run["findings"]]


def test_plain_tf_summary_loss_series(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path / "custom_loop"))
    rng = np.random.default_rng(0)
    with writer.as_default():
        for step in range(1, 401):
            loss = 2.0 * np.exp(-step / 50) + 0.3 if step < 250 else 0.3 * np.exp((step - 250) / 30)
            tf.summary.scalar("loss", loss * np.exp(0.05 * rng.normal()), step=step)
    writer.close()
    proc = cli("diagnose", str(tmp_path), "--json")
    (run,) = json.loads(proc.stdout)["runs"]
    (finding,) = [f for f in run["findings"] if f["code"] == "loss_divergence"]
    assert 230 <= finding["step"] <= 270 and Severity.parse(finding["severity"]) >= Severity.WARNING


def test_a_run_folder_given_as_the_logdir_is_named_by_its_folder(tmp_path):
    """TensorBoard calls a run in the logdir itself "."; the user who typed its folder knows it by name."""
    writer = tf.summary.create_file_writer(str(tmp_path / "my_run"))
    with writer.as_default():
        for step in range(1, 201):
            tf.summary.scalar("loss", 1.0 + 0.02 * np.sin(step), step=step)  # a plateau: one warning
    writer.close()
    for logdir in (str(tmp_path / "my_run"), str(tmp_path / "my_run") + "/"):
        (run,) = json.loads(cli("diagnose", logdir, "--json").stdout)["runs"]
        assert run["run"] == "my_run" and run["status"] == "warning"
        assert cli("diagnose", logdir).stdout.startswith("WARNING  my_run  (1 finding(s))\n")
    in_it = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", ".", "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path / "my_run",
    )  # fmt: skip
    assert [r["run"] for r in json.loads(in_it.stdout)["runs"]] == ["my_run"]


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", "/nonexistent/logdir"],
        ["diagnose", "{empty}"],
        ["diagnose", "{file}"],
        ["diagnose", "{empty}", "--fail-on", "sometimes"],
        ["diagnose"],
        ["frobnicate", "{empty}"],
    ],
    ids=["missing", "empty", "file", "bad-fail-on", "no-logdir", "bad-command"],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("not a logdir")
    args = [a.format(empty=tmp_path / "empty", file=tmp_path / "file") for a in args]
    proc = cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_keras_tensorboard_and_health_callback_share_one_run(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = scenarios._classes(400, 10, 4, 0)
    model = scenarios._mlp(10, 4)
    model.compile("adam", scenarios.SPARSE_CE)
    log_dir = str(tmp_path / "run1")
    from tb_trainhealth import HealthCallback

    callbacks = [keras.callbacks.TensorBoard(log_dir=log_dir, update_freq=1), HealthCallback(log_dir, verbose=False)]
    model.fit(x, y, epochs=3, batch_size=32, validation_split=0.25, verbose=0, callbacks=callbacks)
    from conftest import read_logdir

    (name, run), *others = read_logdir(str(tmp_path)).items()
    assert name == "run1" and others == []
    assert run.has_health_data and len(run.series["loss"]) == 30  # Keras' record_if did not gate our writes
    assert len(run.series["epoch_val_loss"]) == 3


def test_health_run_in_a_directory_named_train_is_its_own_run(tmp_path):
    from conftest import read_logdir

    scenarios.loss_plateau(str(tmp_path / "train"))
    runs = read_logdir(str(tmp_path))
    assert list(runs) == ["train"] and runs["train"].has_health_data


def test_watch_prints_each_new_finding_once_while_a_run_trains(tmp_path):
    import time

    watch = subprocess.Popen(
        [sys.executable, "-m", "tb_trainhealth.cli", "watch", str(tmp_path), "--interval", "0.5", "--timeout", "90"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(2)  # watching an empty logdir: nothing to say yet
        script = (
            f"import scenarios; scenarios.nan_input({str(tmp_path / 'live')!r})"
        )
        train = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert train.returncode == 0, train.stderr[-2000:]
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("nonfinite" in line for line in lines):
            lines.append(watch.stdout.readline())
        time.sleep(3)  # a few more looks at the same data must print nothing new
    finally:
        watch.terminate()
        rest, _ = watch.communicate(timeout=30)
    output = "".join(lines) + rest
    findings = [line for line in output.splitlines() if "] live:" in line]
    assert any("[critical] live: nonfinite @ step 38" in line for line in findings), output
    assert len(findings) == len(set(findings))


def test_progress_bar_only_on_a_terminal(scenario_logdir):
    import pty

    assert cli("diagnose", scenario_logdir).stderr == ""  # piped: silent
    primary, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", scenario_logdir],
        stdout=subprocess.PIPE, stderr=secondary, timeout=120,
    )  # fmt: skip
    os.close(secondary)
    bar = os.read(primary, 65536).decode()
    os.close(primary)
    assert "diagnosing [" in bar and proc.returncode == 1
