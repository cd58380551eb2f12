"""Logs in a bucket, under faults (issue 53, part 2), against the emulators on loopback
(tests/bucket_emulators.py): a bucket that does not exist, credentials the store refuses, an
endpoint that takes no connection. Each command says so in one line on stderr and exits 2 (no
traceback); `compare` keeps the URL's "//" in run names; `watch` outlives a store that goes away
and comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from bucket_emulators import (
    BUCKET,
    client_environment,
    environment,
    free_port,
    running_emulator,
    switchable_proxy,
)
from conftest import ROOT

from tb_trainhealth.contract import series as sig
from tb_trainhealth.diagnosis import diagnose_run
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

pytestmark = pytest.mark.bucket

MISSING = "no-such-bucket"


def cli(*args: str, env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **env},
    )


def one_line_exit_2(proc: subprocess.CompletedProcess, *said: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("tb-trainhealth: error: ") and all(part in lines[0] for part in said), lines
    return lines[0]


def commands(scheme: str, logdir: str) -> dict[str, list[str]]:
    return {
        "diagnose": ["diagnose", logdir],
        "compare": ["compare", logdir, f"{scheme}://{BUCKET}/baseline"],
        "watch": ["watch", logdir],
    }


# Each fault: every command once and both schemes (a CLI call takes seconds; the three commands
# meet the bucket through the same loader, `read.logdir`).
@pytest.mark.parametrize(("scheme", "command"), [("s3", "diagnose"), ("s3", "watch"), ("gs", "compare")])
def test_a_bucket_that_does_not_exist(scheme, command):
    with running_emulator(scheme) as emulator:
        args = commands(scheme, f"{scheme}://{MISSING}/logs")[command]
        one_line_exit_2(cli(*args, env=emulator.env), f"{scheme}://{MISSING}/logs", "bucket does not exist")


@pytest.mark.parametrize(("scheme", "command"), [("s3", "compare"), ("gs", "diagnose"), ("gs", "watch")])
def test_an_endpoint_that_takes_no_connection(scheme, command):
    """Said at once, naming the variable that points at it (gcsfs alone retried ~75 s)."""
    variable = {"s3": "AWS_ENDPOINT_URL", "gs": "STORAGE_EMULATOR_HOST"}[scheme]
    env = client_environment(scheme, f"http://127.0.0.1:{free_port()}")
    args = commands(scheme, f"{scheme}://{BUCKET}/logs")[command]
    one_line_exit_2(cli(*args, env=env, timeout=60), "does not answer", variable)


def test_credentials_the_store_refuses():
    """moto checking every request's keys (it knows none): S3's InvalidAccessKeyId."""
    with running_emulator("s3", refusing_credentials=True) as refusing:
        one_line_exit_2(cli("diagnose", f"s3://{BUCKET}/logs", env=refusing.env), "refused the credentials", "AWS_")


def test_compare_keeps_the_urls_double_slash_in_run_names(tmp_path):
    """Two runs in the bucket compared: the JSON and the text name them s3://... (not s3:/...).
    (gs:// goes through the same naming.)"""
    import keras
    import numpy as np

    from tb_trainhealth import HealthCallback

    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    with running_emulator("s3") as emulator:
        for name in ("good", "bad"):
            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(keras.optimizers.SGD(0.01), "mse")
            callback = HealthCallback(str(tmp_path / name), verbose=False)
            model.fit(x, x.sum(axis=1), epochs=2, batch_size=16, verbose=0, callbacks=[callback])
            emulator.filesystem().put(str(tmp_path / name), f"{BUCKET}/runs/{name}", recursive=True)
        run, baseline = (f"s3://{BUCKET}/runs/{name}" for name in ("bad", "good"))
        answer = cli("compare", run, baseline, "--json", env=emulator.env)
        assert answer.returncode in (0, 1), answer.stderr[-2000:]
        shown = json.loads(answer.stdout)
        assert (shown["run"], shown["baseline"]) == (run, baseline), shown
        text = cli("compare", run, baseline, env=emulator.env)
    assert run in text.stdout and f"s3:/{BUCKET}" not in text.stdout, text.stdout


class NoRunsYet:
    """The tab's diagnosis cache over a bucket TensorBoard lists nothing in."""

    def all(self, ctx):
        return [], []


def test_the_tab_says_a_refused_listing_not_no_runs_yet(monkeypatch):
    """A bucket that does not exist lists nothing: the runs route says why (the tab heads it
    "This TensorBoard cannot read the bucket"); an empty bucket that lists is still "no runs"."""
    from tensorboard import context as tb_context

    from tb_trainhealth.plugin import route_answers

    # (What this test process has installed: TensorFlow, which reads no s3://; its own test.)
    monkeypatch.setattr(route_answers, "bucket_unreadable", lambda logdir: None)
    with running_emulator("s3") as emulator, environment(emulator.env):
        missing = route_answers.runs_answer(NoRunsYet(), tb_context.RequestContext(), None, f"s3://{MISSING}/logs")
        empty = route_answers.runs_answer(NoRunsYet(), tb_context.RequestContext(), None, f"s3://{BUCKET}/logs")
    assert missing["logdir_problem_kind"] == route_answers.BUCKET_UNREADABLE, missing
    assert "bucket does not exist" in missing["logdir_problem"] and f"s3://{MISSING}/logs" in missing["logdir_problem"]
    assert (empty["logdir_problem_kind"], empty["logdir_problem"], empty["runs"]) == (None, None, [])


def _lines_until(stream, wanted: str, seconds: float) -> list[str]:
    """Lines read from `stream` until one contains `wanted` (or the time is up)."""
    import time

    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(wanted in line for line in lines):
        line = stream.readline()
        if not line:
            break
        lines.append(line)
    return lines


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_watch_says_once_that_the_store_went_away_and_carries_on_when_it_returns(scheme, tmp_path):
    """The endpoint stops taking connections mid-watch (its port closed, as a store that went away):
    `watch` says so in one line, keeps looking less and less often, says when the store answers
    again, and prints the finding of a run that arrived meanwhile. No traceback, no exit."""
    script = (
        f"import scenarios; scenarios.nan_input({str(tmp_path / 'run')!r})"
    )
    train = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert train.returncode == 0, train.stderr[-2000:]
    with running_emulator(scheme) as emulator, environment(emulator.env), switchable_proxy(emulator.endpoint) as proxy:
        bucket = emulator.filesystem()
        bucket.put(str(tmp_path / "run"), f"{BUCKET}/logs/first", recursive=True)
        watch = subprocess.Popen(
            [sys.executable, "-m", "tb_trainhealth.cli", "watch", f"{scheme}://{BUCKET}/logs", "--interval", "0.5",
             "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, **client_environment(scheme, proxy.endpoint)},
        )  # fmt: skip
        try:
            lines = _lines_until(watch.stdout, "first: nonfinite", 60)
            proxy.down()
            lines += _lines_until(watch.stdout, "[store]", 30)
            bucket.put(str(tmp_path / "run"), f"{BUCKET}/logs/second", recursive=True)  # (not through the proxy)
            proxy.up()
            lines += _lines_until(watch.stdout, "second: nonfinite", 60)
            lines += (
                _lines_until(watch.stdout, "answers again", 5) if not any("answers again" in x for x in lines) else []
            )
        finally:
            watch.terminate()
            rest, errors = watch.communicate(timeout=30)
    output = "".join(lines) + rest
    store = [line for line in output.splitlines() if "[store]" in line]
    assert len(store) == 2, output
    assert "does not answer" in store[0] and "trying again" in store[0], store
    assert f"{scheme}://{BUCKET}/logs answers again" in store[1], store
    assert "second: nonfinite @ step 38" in output, output
    assert "Traceback" not in errors, errors[-3000:]


def test_a_store_that_goes_away_mid_fit_changes_no_loss_and_gets_the_whole_run_when_it_returns(tmp_path):
    """The endpoint's port closes after the run's first upload and opens again 25 epochs (12 s, past
        the next periodic upload) later: the fit's losses are those of the same fit without the
        callback, an upload that failed meanwhile is said once at most (nothing else on stderr: no
    traceback), and the bucket ends with every epoch."""
    script = os.path.join(ROOT, "tests", "bucket_outage_training.py")
    with running_emulator("s3") as emulator, environment(emulator.env), switchable_proxy(emulator.endpoint) as proxy:
        run = emulator.url("logs/away")
        fit = subprocess.Popen(
            [sys.executable, script, run], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, **client_environment("s3", proxy.endpoint), "TMPDIR": str(tmp_path)},
        )  # fmt: skip
        try:
            lines = _lines_until(fit.stdout, "epoch 1\n", 120)
            bucket = emulator.filesystem()
            _wait_until(lambda: bucket.find(f"{BUCKET}/logs/away"), 30)  # the first upload, through the proxy
            proxy.down()
            lines += _lines_until(fit.stdout, "epoch 26\n", 60)
            proxy.up()
            rest, errors = fit.communicate(timeout=120)
        finally:
            fit.kill()
        plain = subprocess.run([sys.executable, script, "plain"], capture_output=True, text=True, cwd=ROOT, timeout=120)
        bucket.get(f"{BUCKET}/logs/away/", str(tmp_path / "copy"), recursive=True)
    assert fit.returncode == 0, errors[-3000:]
    losses = json.loads(rest.splitlines()[-1])["losses"]
    assert losses == json.loads(plain.stdout.splitlines()[-1])["losses"]
    said = [line for line in errors.splitlines() if line.startswith("tb-trainhealth: ")]
    # (s3fs retries a refused connection for a while: an upload under way may wait the outage out)
    assert len(said) <= 1 and all("could not upload" in x and "training goes on" in x for x in said), errors[-3000:]
    reader = SignalReader(open_logdir(str(tmp_path / "copy")))
    (group,) = reader.groups()
    recorded = diagnose_run(reader, group).signals.get(sig.EPOCH_LOSS)
    assert len(losses) == 30 and recorded is not None, recorded
    assert recorded.values.tolist() == pytest.approx(losses, rel=1e-6)  # every epoch, as trained


def _wait_until(found, seconds: float) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not found():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_writer_closed_after_its_run_was_all_sent_does_not_fail():
    """The exit's last upload sends the run and removes the local copy; the writer's own close can
    come after it (the idle closer's thread): nothing left to send, no error (it raised
    FileNotFoundError on the removed folder when a store outage moved the timings)."""
    import s3fs

    from tb_trainhealth.callback.record.bucket_mirror import BucketMirror

    with running_emulator("s3") as emulator, environment(emulator.env):
        # (fsspec keeps one s3 client per process, made for the endpoint of the first test to ask)
        s3fs.S3FileSystem.clear_instance_cache()
        mirror = BucketMirror(emulator.url("logs/closed"))
        with open(os.path.join(mirror.local_dir, "events.out.tfevents.1"), "wb") as file:
            file.write(b"x" * 100)
        mirror.flushed()
        mirror.ask_last()
        assert mirror.wait(30) is None
        assert not os.path.exists(mirror.local_dir)
        mirror.close()  # the writer's close, late
        (name,) = emulator.filesystem().find(f"{BUCKET}/logs/closed")
    assert name.endswith("events.out.tfevents.1")


class OneRunPending:
    """The tab's diagnosis cache with one run TensorBoard listed before (still being diagnosed)."""

    def all(self, ctx):
        import types

        return [], [types.SimpleNamespace(name="run1")]


def test_the_tab_says_when_a_bucket_it_shows_runs_of_lists_no_more(monkeypatch):
    """TensorBoard's reloader thread stops at the first storage error and the tab kept showing the
    runs it had read, with no word: with runs shown, the runs route now asks (in the background, at
    most every 30 s) whether the bucket still lists, and says why not and what to do."""
    import time

    from tensorboard import context as tb_context

    from tb_trainhealth.plugin import route_answers

    monkeypatch.setattr(route_answers, "bucket_unreadable", lambda logdir: None)
    with running_emulator("s3") as emulator, environment(emulator.env):
        answers = {}
        for bucket in (MISSING, BUCKET):
            logdir = f"s3://{bucket}/logs"
            deadline = time.monotonic() + (30 if bucket == MISSING else 3)  # (loopback: answered in ms)
            while True:  # the first answer starts the check; a later one carries what it found
                answer = route_answers.runs_answer(OneRunPending(), tb_context.RequestContext(), None, logdir)
                if answer["logdir_problem"] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            answers[bucket] = answer
    missing = answers[MISSING]
    assert missing["logdir_problem_kind"] == route_answers.LISTING_FAILING, missing
    assert "bucket does not exist" in missing["logdir_problem"] and "restart tensorboard" in missing["logdir_problem"]
    assert [r["run"] for r in missing["runs"]] == ["run1"]  # the runs stay, as last read
    assert answers[BUCKET]["logdir_problem"] is None  # a bucket that lists: nothing said
