"""Shared fixtures: the demo scenarios trained once per session (real TensorFlow, seconds each)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TB_TRAINHEALTH_STRICT_CODES"] = "1"  # a rule giving a code its spec does not declare fails the test (engine.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The project root (bench/) and demo/ (scenarios): pytest.ini's `pythonpath` for the tests, and the
# environment for every Python they start (training scripts, `python -c` checks), in one place.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, os.path.join(ROOT, "demo"), *filter(None, [os.environ.get("PYTHONPATH")])]
)

import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

from tb_trainhealth import engine
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.signals import RunSignals


def read_logdir(logdir: str) -> dict[str, RunSignals]:
    reader = SignalReader(open_logdir(logdir))
    return {group.name: reader.read(group) for group in reader.groups()}


def diagnose_logdir(logdir: str) -> dict[str, list[Finding]]:
    return {name: engine.diagnose(signals) for name, signals in read_logdir(logdir).items()}


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pytest.ini): one worker more than cores. Many tests wait on real time (a stall
    watchdog, TensorBoard starting, a subprocess): a third worker on two cores fills those waits."""
    return (os.cpu_count() or 1) + 1


@pytest.fixture(scope="session")
def scenario_logdir(tmp_path_factory, worker_id) -> str:
    """Every scenario of demo/scenarios.py trained into one logdir, one run each: once per
    session, also under pytest-xdist (the first worker to need it trains, the others wait)."""
    if worker_id == "master":  # not under xdist
        return _train_scenarios(tmp_path_factory.mktemp("scenarios"))
    shared = tmp_path_factory.getbasetemp().parent  # this session's, shared by its workers
    with FileLock(str(shared / "scenarios.lock")):
        root, trained = shared / "scenarios", shared / "scenarios.trained"
        if not trained.exists():
            shutil.rmtree(root, ignore_errors=True)  # a worker that died half-way
            _train_scenarios(root)
            trained.touch()
    return str(root)


def _train_scenarios(root: Path) -> str:
    from scenarios import SCENARIOS

    for scenario in SCENARIOS:
        scenario.train(str(root / scenario.name))
    return str(root)


@pytest.fixture(scope="session")
def scenario_findings(scenario_logdir) -> dict[str, list[Finding]]:
    return diagnose_logdir(scenario_logdir)


# How long a step waits for its batch depends on what else the machine runs: on a loaded CI
# machine even a well-built pipeline's threads starve (a healthy tf.data twin measured 25-59%
# waits with both cores busy, <5% idle). Tests of healthy runs judge every other code;
# tests/test_input_pipeline.py and the input_bound scenario measure the wait itself.
LOAD_DEPENDENT = frozenset({"input_bound"})


def loud(findings: list[Finding]) -> dict[str, Finding]:
    """A run's warning and critical findings by code, load-dependent codes aside (see above)."""
    return {f.code: f for f in findings if f.severity >= Severity.WARNING and f.code not in LOAD_DEPENDENT}


def alarms(findings: list[Finding]) -> list[str]:
    """A healthy run's warning and critical findings ("code: title"), load-dependent codes aside."""
    return [f"{f.code}: {f.title}" for f in findings if f.severity >= Severity.WARNING and f.code not in LOAD_DEPENDENT]


def run_python(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """A Python subprocess in the project root (its own TensorFlow: device set-up, memory caps)."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# What makes a test slow (pytest.ini's markers): the session's demo trainings (3-4 min on 2 cores
# before the first test that needs them), a model trained by the test's module (in its process or a
# subprocess: its source imports TensorFlow or Keras, or names a training helper), a browser, a
# bucket emulator. The quick set (`-m "not slow"`) is what is left: rules, reading, CLI, contracts.
SLOW_FIXTURES = frozenset({"scenario_logdir", "scenario_findings"})
TRAINS = re.compile(
    r"^\s*(?:import|from) (?:tensorflow|keras|tf_keras)\b|HealthCallback\(|tb_trainhealth\.fit\(|"
    r"\b(?:compare|distributed|multi_worker|tf_keras|oom|stall|live|bucket)_training(?:\.py|\b.*\bimport\b)",
    re.M,
)


@functools.cache
def _module_trains(path: str) -> bool:
    return bool(TRAINS.search(Path(path).read_text()))


def pytest_collection_modifyitems(config, items):
    for item in items:
        in_browser_or_bucket = item.get_closest_marker("browser") or item.get_closest_marker("bucket")
        if in_browser_or_bucket or SLOW_FIXTURES & set(item.fixturenames) or _module_trains(str(item.path)):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):
    """A skipped test proves nothing: the suite fails when one is skipped (the `test` extra and
    .ci/run install everything every test needs: tf-keras, scipy, npm, Chromium)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped and exitstatus == 0:
        reasons = sorted({str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
                          for report in skipped})  # fmt: skip
        reporter.write_line(f"FAILED: {len(skipped)} test(s) skipped: " + "; ".join(reasons), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@contextlib.contextmanager
def reads_held(monkeypatch):
    """Runs stay "being diagnosed" while the block runs: every SignalReader.read waits for its end,
    and the diagnosis cache answers at once with what it has (the pool's threads finish after)."""
    from tb_trainhealth.plugin import diagnosis_cache
    from tb_trainhealth.read.reader import SignalReader

    gate, original = threading.Event(), SignalReader.read

    def gated_read(self, group, *args):
        assert gate.wait(timeout=120), "never released"
        return original(self, group, *args)

    monkeypatch.setattr(SignalReader, "read", gated_read)
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 0.0)
    try:
        yield
    finally:
        gate.set()
