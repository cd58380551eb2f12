"""Runs that stop moving: a real hang, a real SIGKILL, a real pause; and their healthy twins.

The hang and the kill run in subprocesses (tests/stall_training.py); the rest train in
process. Diagnoses read the event files as the CLI does, at a clock the test chooses.
"""

from __future__ import annotations

import gc
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import redirect_stdout

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug import test as werkzeug_test
from werkzeug import wrappers

from tb_trainhealth import HealthCallback, cli
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import FitEndEvent, ResumedEvent, StallEvent, StallPhase
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.diagnosis import Diagnosis, diagnose_run
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.plugin import health_plugin
from tb_trainhealth.plugin.diagnosis_cache import DiagnosisCache
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.rules import input_pipeline, stalls
from tb_trainhealth.rules.stalls import MIN_SILENCE_SECONDS, check_ended_abruptly
from tb_trainhealth.signals import RunSignals, Series

STALL_TRAINING = os.path.join(ROOT, "tests", "stall_training.py")
HOUR = 3600.0


def diagnose(logdir: str, at: float | None = None) -> dict[str, Diagnosis]:
    """Every run under logdir, diagnosed at wall time `at` (default: now)."""
    reader = SignalReader(open_logdir(logdir))
    clock = time.time if at is None else (lambda: at)
    return {group.name: diagnose_run(reader, group, clock=clock) for group in reader.groups()}


def codes(diagnosis: Diagnosis) -> dict[str, Finding]:
    return {finding.code: finding for finding in diagnosis.findings}


def start_training(log_dir: str, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, STALL_TRAINING, log_dir, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def wait_for_line(process: subprocess.Popen, text: str, timeout: float = 120.0) -> None:
    """Read the child's stdout until `text` (a reader thread: readline must not block the deadline)."""
    seen = threading.Event()

    def read():
        for line in process.stdout:
            if text in line:
                seen.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not seen.wait(timeout):
        process.kill()
        raise AssertionError(f"{text!r} never printed; stderr: {process.stderr.read()[-3000:]}")


def tab_client(logdir: str) -> werkzeug_test.Client:
    provider = open_logdir(logdir)
    context = base_plugin.TBContext(logdir=logdir, data_provider=provider)
    app = application.TensorBoardWSGI([health_plugin.HealthPlugin(context)], data_provider=provider)
    return werkzeug_test.Client(app, wrappers.Response)


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(30)


def test_a_hanging_generator_is_reported_while_it_hangs_naming_the_generator(tmp_path, monkeypatch, capsys):
    process = start_training(str(tmp_path / "hang"), "hang")
    try:
        wait_for_line(process, "HANGING")
        deadline, found = time.monotonic() + 60, None
        while found is None and time.monotonic() < deadline:
            found = codes(diagnose(str(tmp_path))["hang"]).get("training_stalled")
            time.sleep(0.5)
        assert found is not None, "no training_stalled while the process hangs"
        assert process.poll() is None  # diagnosed while it still hangs
        assert found.severity == Severity.CRITICAL
        assert "endless_batches" in found.title and "waiting for its next batch" in found.title
        assert found.step == 12  # HANG_AFTER batches finished
        assert any("timeout" in fix.text for fix in found.fixes)
        out = io.StringIO()
        with redirect_stdout(out):
            status = cli.main(["diagnose", str(tmp_path)])
        assert status == cli.EXIT_FINDINGS and "training_stalled" in out.getvalue()
        tab = tab_client(str(tmp_path))  # the Health tab: the run list and the run page
        (listed,) = tab.get("/data/plugin/trainhealth/runs").get_json()["runs"]
        assert listed["run"] == "hang" and listed["status"] == "critical"
        page = tab.get("/data/plugin/trainhealth/findings?run=hang").get_json()
        assert [f["code"] for f in page["findings"] if f["severity"] == "critical"] == ["training_stalled"]
        # Alive (the watchdog's heartbeat goes on while it hangs): never "ended abruptly".
        time.sleep(3)
        assert "ended_abruptly" not in codes(diagnose(str(tmp_path), at=time.time() + MIN_SILENCE_SECONDS / 2)["hang"])
    finally:
        kill(process)
    # `watch` looks again at a run that went silent once its allowance has passed, with no new data.
    monkeypatch.setattr(stalls, "MIN_SILENCE_SECONDS", 10.0)
    capsys.readouterr()
    assert cli.watch_logdir(str(tmp_path), interval=0.5, timeout=20) == cli.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    stalled_at = next(i for i, line in enumerate(lines) if "training_stalled" in line)
    ended_at = next(i for i, line in enumerate(lines) if "ended_abruptly" in line)
    assert stalled_at < ended_at  # first the hang, then (10 s of silence later) the kill
    monkeypatch.undo()
    (stall,) = diagnose(str(tmp_path))["hang"].signals.events_of(StallEvent)
    assert stall.phase == StallPhase.INPUT and stall.allowance == 2.0
    generator = [t for t in stall.threads if t.runs == "generator"]
    assert generator and generator[0].frames[0].function == "endless_batches"
    # Killed while it hung: still stalled, and now ended abruptly too, saying so.
    later = codes(diagnose(str(tmp_path), at=time.time() + HOUR)["hang"])
    assert later["training_stalled"].severity == Severity.CRITICAL
    assert later["ended_abruptly"].severity == Severity.CRITICAL
    assert "stalled since step 12" in later["ended_abruptly"].detail


def test_a_run_killed_with_sigkill_ended_abruptly_at_its_last_step(tmp_path):
    process = start_training(str(tmp_path / "killed"), "steady")
    try:
        wait_for_line(process, "STARTED")
        time.sleep(6)  # a few epochs: rows, epoch logs and memory readings on disk
    finally:
        kill(process)
    now = diagnose(str(tmp_path))["killed"]
    assert "ended_abruptly" not in codes(now)  # within its allowance: it might still be writing
    assert now.recheck_at is not None and now.recheck_at == pytest.approx(now.signals.last_write + MIN_SILENCE_SECONDS)
    later = diagnose(str(tmp_path), at=time.time() + HOUR)["killed"]
    found = codes(later)
    assert set(found) & {"ended_abruptly", "training_stalled"} == {"ended_abruptly"}
    last_step = max(int(series.steps[-1]) for series in later.signals.series.values())
    assert found["ended_abruptly"].severity == Severity.CRITICAL and found["ended_abruptly"].step == last_step
    assert "Last memory readings: host memory" in found["ended_abruptly"].detail
    assert any("BackupAndRestore" in (fix.code or "") for fix in found["ended_abruptly"].fixes)


def toy_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    return model


def generator_data(batches: int, sleep_at: dict[int, float]) -> tf.data.Dataset:
    """`batches` batches; before batch i, sleep sleep_at[i] seconds (a slow read)."""

    def batches_with_pauses():
        rng = np.random.default_rng(0)
        for index in range(batches):
            time.sleep(sleep_at.get(index, sleep_at.get(-1, 0.0)))
            x = rng.normal(size=(16, 4)).astype("float32")
            yield x, x.sum(axis=1, keepdims=True)

    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    return tf.data.Dataset.from_generator(batches_with_pauses, output_signature=spec)


class SlowUpload(keras.callbacks.Callback):
    """Uploads a checkpoint on the training thread at the first epoch's end (4 s)."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            time.sleep(4.0)


def slow_py_function_data() -> tf.data.Dataset:
    calls = []

    def decode_slowly(x):
        if len(calls) == 5:
            time.sleep(4.0)
        calls.append(1)
        return x

    data = generator_data(10, {}).map(lambda x, y: (tf.py_function(decode_slowly, [x], tf.float32), y))
    return data.map(lambda x, y: (tf.ensure_shape(x, (None, 4)), y))


def silent_server_data() -> tuple[tf.data.Dataset, socket.socket]:
    """Batch 5 is read from an HTTP server that accepts the connection and never answers; the
    read times out after 4 s and the generator goes on (a read that eventually returned)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    url = f"http://127.0.0.1:{server.getsockname()[1]}/batch"

    def batches_from_server():
        rng = np.random.default_rng(0)
        for index in range(10):
            if index == 5:
                try:
                    urllib.request.urlopen(url, timeout=4.0).read()
                except OSError:
                    pass  # timed out: use the local copy
            x = rng.normal(size=(16, 4)).astype("float32")
            yield x, x.sum(axis=1, keepdims=True)

    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    return tf.data.Dataset.from_generator(batches_from_server, output_signature=spec), server


@pytest.mark.parametrize(
    "place, named, fix",
    [
        ("generator", "batches_with_pauses", "timeout"),
        ("network", "batches_from_server() at test_stall.py", "timeout=30"),
        ("py_function", "decode_slowly", "num_parallel_calls"),
        ("callback", "SlowUpload.on_epoch_end", "background thread"),
    ],
)
def test_a_long_pause_that_ends_is_a_warning_naming_its_place(tmp_path, place, named, fix):
    # stop_on="critical": the pause must not read as a hang once training moves again.
    gc.collect()  # not inside the fit: freeing earlier tests' TensorFlow objects can take seconds
    health = HealthCallback(str(tmp_path / "paused"), stall_after=1.5, verbose=False, stop_on="critical")
    model = toy_model()
    if place == "generator":
        history = model.fit(generator_data(40, {5: 4.0}), epochs=1, verbose=0, callbacks=[health])
    elif place == "py_function":
        history = model.fit(slow_py_function_data(), epochs=1, verbose=0, callbacks=[health])
    elif place == "network":
        data, server = silent_server_data()
        with server:
            history = model.fit(data, epochs=1, verbose=0, callbacks=[health])
    else:
        history = model.fit(generator_data(6, {}), epochs=2, verbose=0, callbacks=[health, SlowUpload()])
    assert len(history.epoch) == (2 if place == "callback" else 1)
    diagnosis = diagnose(str(tmp_path), at=time.time() + HOUR)["paused"]
    stalls, resumes = diagnosis.signals.events_of(StallEvent), diagnosis.signals.events_of(ResumedEvent)
    # (A loaded machine may add a short stall where an epoch's tf.data iterator is torn down.)
    assert stalls and len(resumes) == len(stalls) and not resumes[0].ended
    assert stalls[0].step == (6 if place == "callback" else 5)
    assert 3.5 < resumes[0].seconds < 12  # the 4 s pause (and, for the callback, an epoch change)
    expected_phase = StallPhase.CALLBACK if place == "callback" else StallPhase.INPUT
    assert stalls[0].phase == expected_phase
    found = codes(diagnosis)
    assert found["training_stalled"].severity == Severity.WARNING
    assert named in found["training_stalled"].title
    assert any(fix in text for text in [f.text + (f.code or "") for f in found["training_stalled"].fixes])
    if place == "network":  # waiting for the server's answer: a timeout is the first fix
        assert "waiting in readinto() (socket.py)" in found["training_stalled"].title
        assert "timeout=30" in found["training_stalled"].fixes[0].code
    assert "ended_abruptly" not in found  # it finished, however long ago
    # One stalled read is not a steady input cost: its wait is recorded but not counted (the
    # share, hence input_bound, is the same with that wait zeroed). Not judged by input_bound's
    # severity: a loaded machine makes every generator step wait.
    if place != "callback":
        waits = diagnosis.signals.get(sig.INPUT_WAIT_MS)
        stalled = np.isin(waits.steps, [stall.step + 1 for stall in stalls])
        assert waits.values[stalled].max() > 3500
        share = input_pipeline.input_share(diagnosis.signals)
        waits.values[stalled] = 0.0
        assert input_pipeline.input_share(diagnosis.signals) == share
    assert not threading_watchdogs()


def threading_watchdogs() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tb-trainhealth-watchdog"]


def slow_first_call(data: tf.data.Dataset) -> tf.data.Dataset:
    """The batches of `data`; the first one takes 8 s more (a py_function that sleeps once)."""
    calls = []

    def first_call_is_slow(x):
        if not calls:
            time.sleep(8.0)
        calls.append(1)
        return x

    data = data.map(lambda x, y: (tf.py_function(first_call_is_slow, [x], tf.float32), y))
    return data.map(lambda x, y: (tf.ensure_shape(x, (None, 4)), y))


@pytest.mark.parametrize(
    "twin",
    [
        "slow_but_steady",  # every step 1.5 s, stall_after 5 s
        "slow_first_step",  # the first step waits 8 s (a py_function at step 0 only), stall_after 5 s
        "slow_validation",  # the first validation's first batch waits 8 s
    ],
)
def test_healthy_twins_stay_quiet(tmp_path, twin):
    gc.collect()  # not inside the fit: freeing earlier tests' TensorFlow objects can take seconds
    model = toy_model()
    # (5 s: an epoch's end, tearing down its tf.data iterator, takes seconds on a loaded machine)
    health = HealthCallback(str(tmp_path / twin), stall_after=5.0, verbose=False)
    if twin == "slow_but_steady":
        model.fit(generator_data(6, {-1: 1.5}), epochs=1, verbose=0, callbacks=[health])
    elif twin == "slow_first_step":
        model.fit(slow_first_call(generator_data(8, {})), epochs=1, verbose=0, callbacks=[health])
    else:  # (as the test step's tracing, once: the first validation's first batch)
        validation = slow_first_call(generator_data(4, {}))
        model.fit(generator_data(8, {}), validation_data=validation, epochs=2, verbose=0, callbacks=[health])
    diagnosis = diagnose(str(tmp_path), at=time.time() + HOUR)[twin]
    assert not diagnosis.signals.events_of(StallEvent)
    assert not set(codes(diagnosis)) & {"training_stalled", "ended_abruptly"}
    assert diagnosis.signals.info.watchdog and diagnosis.recheck_at is None  # finished: nothing to wait for
    assert not threading_watchdogs()  # stopped at train end


def test_a_run_of_keras_tensorboard_callback_alone_never_ended_abruptly(tmp_path):
    model = toy_model()
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    board = keras.callbacks.TensorBoard(str(tmp_path / "plain"))
    model.fit(x, x.sum(axis=1, keepdims=True), epochs=2, verbose=0, callbacks=[board])
    (diagnosis,) = diagnose(str(tmp_path), at=time.time() + HOUR).values()
    assert diagnosis.signals.series and "ended_abruptly" not in codes(diagnosis)


def test_a_watchdog_error_never_breaks_training_and_the_crash_stops_it(tmp_path, capsys):
    health = HealthCallback(str(tmp_path / "r"), stall_after=1.0, verbose=False)

    def broken(event):
        raise RuntimeError("watchdog bug")

    health._watch._on_stall = broken
    history = toy_model().fit(generator_data(6, {2: 2.5}), epochs=1, verbose=0, callbacks=[health])
    assert len(history.epoch) == 1
    assert "watchdog probe disabled" in capsys.readouterr().err
    assert not threading_watchdogs()

    def crash_after_two():
        for index in range(10):
            if index == 2:
                raise ValueError("corrupt record")
            yield np.zeros((16, 4), "float32"), np.zeros((16, 1), "float32")

    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    crashing = tf.data.Dataset.from_generator(crash_after_two, output_signature=spec)
    with pytest.raises(Exception, match="corrupt record"):
        toy_model().fit(crashing, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "c"), verbose=False)])
    assert not threading_watchdogs()  # stopped on the crash
    crashed = diagnose(str(tmp_path), at=time.time() + HOUR)["c"]
    assert "training_crash" in codes(crashed) and "ended_abruptly" not in codes(crashed)


class FailsAtEpochEnd(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyError("a bug in the user's callback")


def test_a_fit_left_without_train_end_is_not_a_stall_nor_a_kill(tmp_path):
    """As in a notebook: the fit stopped by an exception Keras does not report to callbacks (or
    Ctrl-C), and the kernel lives on. The watchdog records the fit's end and stops watching."""
    health = HealthCallback(str(tmp_path / "r"), stall_after=1.0, verbose=False)
    with pytest.raises(KeyError):
        toy_model().fit(generator_data(4, {}), epochs=3, verbose=0, callbacks=[health, FailsAtEpochEnd()])
    time.sleep(3.0)  # three allowances in the kernel that goes on
    assert not threading_watchdogs()
    diagnosis = diagnose(str(tmp_path), at=time.time() + HOUR)["r"]
    assert not diagnosis.signals.events_of(StallEvent)
    (end,) = diagnosis.signals.events_of(FitEndEvent)
    assert end.stopped_early and end.step == 4
    assert not set(codes(diagnosis)) & {"training_stalled", "ended_abruptly"}


def silent_run(info: RunInfo, events=(), last_step: int = 40) -> RunSignals:
    steps = np.arange(1, last_step + 1)
    return RunSignals(
        run="r",
        series={"loss": Series.of(steps, 1.0 / steps)},
        events=list(events),
        info=info,
        has_health_data=True,
        last_write=1000.0,
        now=1000.0 + HOUR,
    )


def test_ended_abruptly_only_for_watched_runs_whose_last_fit_has_no_end():
    from tb_trainhealth.contract.events import CrashEvent

    watched = RunInfo(watchdog=True, start_step=20)
    assert check_ended_abruptly(silent_run(watched))  # silent for an hour, no end
    assert not check_ended_abruptly(silent_run(RunInfo(start_step=20)))  # an older writer: no watchdog
    assert not check_ended_abruptly(silent_run(watched, [FitEndEvent(step=40)]))
    assert not check_ended_abruptly(silent_run(watched, [CrashEvent(step=31)]))
    # The previous fit's end (at this fit's start step) does not end this fit.
    assert check_ended_abruptly(silent_run(watched, [FitEndEvent(step=20)]))
    within = dataclasses_replace(silent_run(watched), now=1000.0 + MIN_SILENCE_SECONDS - 1)
    assert not check_ended_abruptly(within)
    slow = RunInfo(watchdog=True, start_step=20, stall_after=600.0)  # its own allowance: 10 minutes
    assert not check_ended_abruptly(dataclasses_replace(silent_run(slow), now=1000.0 + 500))
    assert not check_ended_abruptly(dataclasses_replace(silent_run(watched), now=None))  # the online engine


def dataclasses_replace(run: RunSignals, **changes) -> RunSignals:
    import dataclasses

    return dataclasses.replace(run, **changes)


def test_the_tab_rediagnoses_a_silent_run_once_its_allowance_has_passed(tmp_path):
    health = HealthCallback(str(tmp_path / "r"), stall_after=1.5, verbose=False)
    toy_model().fit(generator_data(4, {}), epochs=1, verbose=0, callbacks=[health])
    reader = SignalReader(open_logdir(str(tmp_path)))
    cache = DiagnosisCache(reader)
    from tensorboard import context as tb_context

    ctx = tb_context.RequestContext()
    first = cache.one("r", ctx)
    assert cache.one("r", ctx) is first  # same data, no deadline: cached
    first.recheck_at = time.time() - 1  # as for a run that went silent: its deadline passed
    assert cache.one("r", ctx) is not first


def test_a_hang_inside_the_step_points_at_a_dead_peer_first():
    """Read side only: a real multi-worker hang needs two TF processes and a collective timeout
    of minutes; the event is what the watchdog writes for one (tests above write real ones)."""
    from tb_trainhealth.contract.events import Frame, ThreadPlace
    from tb_trainhealth.rules.stalls import PEER_FIX, check_training_stalled

    training = ThreadPlace("MainThread", "training", (Frame("train.py", "main", 40),), Frame("context.py", "sync", 9))
    stalled = StallEvent(300, seconds=301.0, allowance=300.0, phase=StallPhase.STEP, threads=(training,))
    (finding,) = check_training_stalled(RunSignals("r", events=[stalled], has_health_data=True))
    assert finding.severity == Severity.CRITICAL and "inside the training step" in finding.title
    assert "main() at train.py:40" in finding.title and finding.fixes[0] == PEER_FIX


def test_a_stall_that_a_later_process_trained_past_is_a_pause_not_a_hang():
    """Killed while stalled, then restarted into the same run directory (BackupAndRestore): the
    old stall never got a `resumed` record, but steps past it were recorded."""
    from tb_trainhealth.rules.stalls import check_training_stalled

    stalled = StallEvent(5, seconds=301.0, allowance=300.0, phase=StallPhase.INPUT)
    for last_step, severity in ((5, Severity.CRITICAL), (40, Severity.WARNING)):
        steps = np.arange(1, last_step + 1)
        run = RunSignals("r", series={"loss": Series.of(steps, 1.0 / steps)}, events=[stalled], has_health_data=True)
        (finding,) = check_training_stalled(run)
        assert finding.severity == severity and finding.step == 5
