"""`tb-trainhealth compare RUN BASELINE` end to end: real training with HealthCallback (and with
Keras' TensorBoard callback only), event files, the CLI's text, JSON and exit status, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from tb_trainhealth import HealthCallback

SAMPLES = 1200


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 12)).astype("float32")
    return x, np.argmax(np.tanh(x @ rng.normal(size=(12, 8))) @ rng.normal(size=(8, 3)), axis=1)


def _train(log_dir: str, learning_rate: float = 3e-3, seed: int = 0, classifier: bool = True,
           keras_tensorboard_only: bool = False, baseline: str | None = None) -> HealthCallback | None:  # fmt: skip
    keras.utils.set_random_seed(seed)
    x, y = _data()
    head = keras.layers.Dense(3, activation="softmax") if classifier else keras.layers.Dense(1)
    model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(32, activation="relu"), head])
    loss = "sparse_categorical_crossentropy" if classifier else "mse"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss, metrics=["accuracy"] if classifier else [])
    health = None if keras_tensorboard_only else HealthCallback(log_dir, verbose=False, baseline=baseline)
    callback = keras.callbacks.TensorBoard(log_dir) if health is None else health
    target = y if classifier else y.astype("float32")
    model.fit(x, target, epochs=6, batch_size=32, validation_split=0.25, verbose=0, callbacks=[callback])
    return health


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("compare")
    paths = {name: str(root / name) for name in ("good", "twin", "tiny_lr", "regression", "plain_good", "plain_bad")}
    _train(paths["good"])
    _train(paths["twin"], seed=1)
    _train(paths["tiny_lr"], learning_rate=3e-6)
    _train(paths["regression"], classifier=False)
    _train(paths["plain_good"], keras_tensorboard_only=True)
    _train(paths["plain_bad"], learning_rate=3e-6, keras_tensorboard_only=True)
    return paths


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "compare", *args], capture_output=True, text=True, timeout=180
    )


def test_a_learning_rate_1000x_too_small_is_worse_and_named_first(runs):
    proc = cli(runs["tiny_lr"], runs["good"], "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "worse"
    assert result["run"] == os.path.normpath(runs["tiny_lr"]) and result["baseline"] == os.path.normpath(runs["good"])
    assert result["changes"][0]["setting"] == "learning_rate"
    assert result["changes"][0]["baseline"] == pytest.approx(3e-3)
    assert isinstance(result["parted_at_step"], int)
    worse = result["findings"][0]
    assert worse["code"] == "worse_than_baseline" and "learning_rate" in worse["title"]
    assert any("learning_rate=0.003" in (fix["code"] or "") for fix in worse["fixes"])
    metrics = {m["name"]: m for m in result["metrics"]}
    assert metrics["val_accuracy"]["run"] < metrics["val_accuracy"]["baseline"] - 0.1


def test_another_seed_is_the_same_and_exits_0(runs):
    proc = cli(runs["twin"], runs["good"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("SAME")
    assert "worse_than_baseline" not in proc.stdout


def test_text_output_names_the_culprit_and_the_fix(runs):
    proc = cli(runs["tiny_lr"], runs["good"])
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("WORSE")
    changes = lines.index("  changed settings (most likely culprit first):")
    assert lines[changes + 1].strip().startswith("learning_rate: 0.003 -> 3e-06")
    assert "fix: Set learning_rate back to the baseline's 0.003." in proc.stdout


def test_runs_without_the_callback_compare_by_their_curves(runs):
    proc = cli(runs["plain_bad"], runs["plain_good"], "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "worse" and result["changes"] == []


@pytest.mark.parametrize(
    "run, baseline, message",
    [
        ("regression", "good", "different tasks"),
        ("good", "/nonexistent/run", "not a readable run"),
        ("good", "EMPTY", "no TensorBoard event files"),
        ("good", "ROOT", "training runs"),
    ],
)
def test_runs_that_cannot_be_compared_exit_2_with_one_line(runs, tmp_path, run, baseline, message):
    paths = {**runs, "EMPTY": str(tmp_path), "ROOT": os.path.dirname(runs["good"])}
    proc = cli(paths.get(run, run), paths.get(baseline, baseline))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("tb-trainhealth")]
    assert len(error_lines) == 1 and message in error_lines[0], proc.stderr


def test_the_callback_compares_with_its_baseline_at_the_end_of_fit(runs, tmp_path):
    from tb_trainhealth.cli import diagnose_logdir

    worse = _train(str(tmp_path / "worse"), learning_rate=3e-6, baseline=runs["good"])
    assert worse is not None
    (found,) = [f for f in worse.findings if f.code == "worse_than_baseline"]
    assert "learning_rate" in found.title
    (result,) = diagnose_logdir(str(tmp_path / "worse"))  # recorded: the read side shows it too
    assert "worse_than_baseline" in [f.code for f in result.findings]
    twin = _train(str(tmp_path / "twin"), seed=1, baseline=runs["good"])
    assert twin is not None and "worse_than_baseline" not in [f.code for f in twin.findings]
    missing = _train(str(tmp_path / "missing"), baseline=str(tmp_path / "no_such_run"))
    assert missing is not None and not missing.guard.disabled  # an unreadable baseline breaks nothing


# -- compare LOGDIR --baseline RUN|best: every run of the fixture's logdir at once ------------------

# The fixture's runs, trained in this order: good, twin, tiny_lr, regression (one output unit: another
# model), plain_good, plain_bad (Keras' TensorBoard callback only: no model recorded).
COMPARISON_KEYS = {
    "run",
    "baseline",
    "verdict",
    "why",
    "changes",
    "parted_at_step",
    "metrics",
    "findings",
    "deciding_metric",
    "signal_changes",
}


def _logdir_of(runs: dict[str, str], tmp_path, names: tuple[str, ...]) -> str:
    """A logdir holding copies of the named runs (their event files keep their wall times)."""
    for name in names:
        shutil.copytree(runs[name], tmp_path / name)
    return str(tmp_path)


def test_every_run_against_a_named_baseline_worse_first_in_one_line_each(runs):
    root = os.path.dirname(runs["good"])
    proc = cli(root, "--baseline", "good")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["WORSE", "tiny_lr"],
        ["UNKNOWN", "plain_bad"],
        ["UNKNOWN", "plain_good"],
        ["UNKNOWN", "regression"],
        ["SAME", "twin"],
    ]  # the baseline itself is not compared with itself
    assert "vs good:" in lines[0] and lines[0].endswith("likely cause learning_rate 0.003 -> 3e-06")
    as_json = cli(root, "--baseline", runs["good"], "--json")  # the baseline by its path: the same run
    assert as_json.returncode == 1, as_json.stderr
    pairs = json.loads(as_json.stdout)
    assert [pair["run"] for pair in pairs] == [line.split()[1] for line in lines]
    assert all(set(pair) == COMPARISON_KEYS | {"baseline_choice", "likely_cause"} for pair in pairs)
    assert pairs[0]["likely_cause"] == "learning_rate 0.003 -> 3e-06"  # the line's words (the tab shows them)
    assert all(pair["likely_cause"] is None for pair in pairs[1:])  # not worse: no cause to name
    assert {pair["baseline_choice"]["rule"] for pair in pairs} == {"named"}
    two_runs = json.loads(cli(runs["tiny_lr"], runs["good"], "--json").stdout)  # the two-run form's object
    for key in ("verdict", "changes", "parted_at_step", "metrics"):
        assert pairs[0][key] == two_runs[key], key
    (regression,) = [pair for pair in pairs if pair["run"] == "regression"]
    assert regression["baseline_choice"]["differs"] == ["output units 3 vs this run's 1"]


def test_every_run_against_the_best_earlier_run_of_its_own_model(runs):
    root = os.path.dirname(runs["good"])
    proc = cli(root, "--baseline", "best", "--json")
    assert proc.returncode == 1, proc.stderr
    pairs = {pair["run"]: pair for pair in json.loads(proc.stdout)}
    assert list(pairs) == ["tiny_lr", "good", "plain_bad", "plain_good", "regression", "twin"]  # worse, unknown, same
    assert pairs["tiny_lr"]["verdict"] == "worse" and pairs["twin"]["verdict"] == "same"
    assert pairs["tiny_lr"]["baseline"] in ("good", "twin") and pairs["twin"]["baseline"] == "good"
    assert pairs["twin"]["baseline_choice"]["rule"] in ("no_warnings", "best")
    assert pairs["twin"]["baseline_choice"]["model"]["output_units"] == 3
    first = pairs["good"]  # trained first: nothing earlier
    assert (first["baseline"], first["verdict"], first["baseline_choice"]["rule"]) == (None, "unknown", "none")
    assert set(first) == COMPARISON_KEYS | {"baseline_choice", "likely_cause"}
    other = pairs["regression"]  # the same layers, but one output unit: no earlier run of its model
    assert other["baseline"] is None and "closest" in other["why"]
    closest = other["baseline_choice"]["closest"]
    assert [c["run"] for c in closest] == ["tiny_lr", "twin", "good"]
    assert all(c["differs"] == ["output units 3 vs this run's 1"] for c in closest)


def test_a_run_marked_good_is_the_baseline_of_the_runs_after_it(runs, tmp_path):
    logdir = _logdir_of(runs, tmp_path, ("good", "twin", "tiny_lr"))
    unmarked = {p["run"]: p for p in json.loads(cli(logdir, "--baseline", "best", "--json").stdout)}["tiny_lr"]
    other = next(name for name in ("good", "twin") if name != unmarked["baseline"])
    (tmp_path / other / ".tb-trainhealth-good").touch()
    marked = {p["run"]: p for p in json.loads(cli(logdir, "--baseline", "best", "--json").stdout)}["tiny_lr"]
    assert (marked["baseline"], marked["baseline_choice"]["rule"]) == (other, "marked_good")


@pytest.mark.parametrize(
    "names, baseline, status, stderr",
    [
        (("good", "twin"), "good", 0, ""),
        (("good", "twin"), "best", 0, ""),  # good has no earlier run: listed, but not a failure alone
        (("good", "regression"), "good", 2, "cannot compare 1 of 1 run(s) with their baseline: regression"),
        (("good",), "best", 2, "no run under"),
        (("good", "tiny_lr"), "OUTSIDE", 1, ""),
    ],
)
def test_the_exit_status_is_the_worst_of_the_runs(runs, tmp_path, names, baseline, status, stderr):
    logdir = _logdir_of(runs, tmp_path / "logdir", names)
    proc = cli(logdir, "--baseline", runs["twin"] if baseline == "OUTSIDE" else baseline)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert stderr in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == (1 if stderr else 0), proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("--baseline", "nope"), "--baseline 'nope' is no run under"),
        (("ROOT/good", "--baseline", "good"), "not both"),
        ((), "needs a BASELINE"),
    ],
)
def test_a_bad_baseline_is_one_line_and_exit_2(runs, args, message):
    root = os.path.dirname(runs["good"])
    proc = cli(root, *(arg.replace("ROOT", root) for arg in args))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert message in line and "Traceback" not in proc.stderr
    if "nope" in args:
        assert "good, plain_bad, plain_good, regression, tiny_lr" in line


# -- damaged baselines (issue 47): name the damage, never "still being written" -----------------------
def _health_file(run_dir: str) -> str:
    """The callback's own event file of a run (the one holding the end of fit)."""
    files = [os.path.join(run_dir, f) for f in os.listdir(run_dir) if f.startswith("events.out.tfevents")]
    return max(files, key=os.path.getsize)


def test_a_baseline_damaged_mid_file_is_named_and_judged_on_what_was_read(runs, tmp_path):
    baseline = str(tmp_path / "damaged")
    shutil.copytree(runs["good"], baseline)
    path = _health_file(baseline)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xff" * 40)  # 40 bytes flipped mid-file: the records after them are lost
    proc = cli(runs["twin"], baseline)
    text = proc.stdout + proc.stderr
    assert "still being written" not in text, text
    assert "damaged" in text and os.path.basename(path) in text, text


def test_a_baseline_whose_only_event_file_is_garbage_says_so(runs, tmp_path):
    baseline = tmp_path / "garbage"
    baseline.mkdir()
    (baseline / "events.out.tfevents.1700000000.host").write_bytes(os.urandom(4096))
    proc = cli(runs["twin"], str(baseline))
    assert proc.returncode == 2
    assert "no TensorBoard event files" not in proc.stderr, proc.stderr
    assert "events.out.tfevents.1700000000.host" in proc.stderr and "none is a readable event file" in proc.stderr


def test_the_end_of_each_fit_records_what_its_metrics_resolved_to(runs):
    """Keras picks the class behind 'accuracy' at the first step; compare needs it to know whether two
    runs' accuracy is one quantity (test_compare: an accuracy of another meaning is not compared)."""
    from tb_trainhealth.compare.runs import diagnosed_directory
    from tb_trainhealth.contract.events import FitEndEvent

    (end,) = diagnosed_directory(runs["good"], "run").signals.events_of(FitEndEvent)
    assert end.metric_classes == {"accuracy": "SparseCategoricalAccuracy"}
    (end,) = diagnosed_directory(runs["regression"], "run").signals.events_of(FitEndEvent)
    assert end.metric_classes == {}  # compiled without metrics
