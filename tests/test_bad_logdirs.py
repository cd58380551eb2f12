"""Bad data, one run at a time: the bad run gets an error or a partial diagnosis, the others are untouched."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from conftest import ROOT
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from tb_trainhealth.contract import tags
from tb_trainhealth.read import event_files


def write_events(path, values_by_step, version=tags.SCHEMA_VERSION, tag=tags.TAG_LOSS, plugin=tags.PLUGIN_NAME):
    """One event file of `tag` at each (step, value), a second apart up to now (as if written live)."""
    os.makedirs(path, exist_ok=True)
    writer = EventFileWriter(str(path))
    metadata = tags.summary_metadata(summary_pb2.DATA_CLASS_SCALAR, plugin)
    metadata.plugin_data.content = json.dumps({"version": version}).encode() if version is not None else b"\xff garbage"
    started = time.time() - len(values_by_step)
    for i, (step, value) in enumerate(values_by_step):
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(
                    tag=tag, metadata=metadata, tensor=tensor_util.make_tensor_proto(np.float32(value))
                )
            ]
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=started + i, summary=summary))
    writer.close()
    return max((os.path.join(path, f) for f in os.listdir(path) if "tfevents" in f), key=os.path.getmtime)


def diverging(n=200):
    return [(s, 0.3 * np.exp(s / 40) if s > 100 else 2.0 * np.exp(-s / 20) + 0.3) for s in range(1, n + 1)]


@pytest.fixture()
def logdir(tmp_path, scenario_logdir):
    shutil.copytree(os.path.join(scenario_logdir, "nan_input"), tmp_path / "good_nan")
    shutil.copytree(os.path.join(scenario_logdir, "healthy_mlp"), tmp_path / "good_healthy")
    return tmp_path


def diagnose(logdir) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.returncode, {r["run"]: r for r in json.loads(proc.stdout)["runs"]}


def cli_text(logdir) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def assert_good_runs_untouched(runs):
    assert runs["good_nan"]["status"] == "critical" and runs["good_nan"]["findings"][0]["code"] == "nonfinite"
    assert runs["good_healthy"]["status"] == "ok" and runs["good_healthy"]["errors"] == []


def finished(*event_files_, seconds: float = 3600) -> None:
    """As if written an hour ago: the writing process is gone (not a live run's file)."""
    for path in event_files_:
        os.utime(path, (time.time() - seconds, time.time() - seconds))


def relative(path, logdir) -> str:
    return os.path.relpath(path, logdir).replace(os.sep, "/")


def test_truncated_event_file_keeps_what_was_written_and_says_so(logdir):
    event_file = write_events(logdir / "killed", diverging())
    with open(event_file, "rb+") as f:
        f.truncate(os.path.getsize(event_file) - 7)  # the process died mid-record
    halved = write_events(logdir / "halved", diverging())
    with open(halved, "rb+") as f:
        f.truncate(os.path.getsize(halved) // 2)
    _, runs = diagnose(logdir)  # just written: may still be written, the incomplete record is normal
    assert_good_runs_untouched(runs)
    assert "loss_divergence" in [f["code"] for f in runs["killed"]["findings"]]
    assert runs["killed"]["errors"] == [] and runs["halved"]["errors"] == []
    assert [p["kind"] for p in runs["killed"]["file_errors"]] == ["partial_live"]
    assert runs["killed"]["file_errors"][0]["file"] == relative(event_file, logdir)

    finished(event_file, halved)  # nobody writes them any more: truncated
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    for name, path in (("killed", event_file), ("halved", halved)):
        (problem,) = runs[name]["file_errors"]
        assert problem["kind"] == "truncated" and problem["file"] == relative(path, logdir)
        assert problem["error"].startswith("truncated: the file ends inside a record")
        assert runs[name]["errors"] == [f"{problem['file']}: {problem['error']}"]
    assert "loss_divergence" in [f["code"] for f in runs["killed"]["findings"]]
    text = cli_text(logdir)
    assert f"  ! {relative(halved, logdir)}: truncated: the file ends inside a record" in text


def finished_fit(log_dir: Path) -> Path:
    """A tiny Keras fit with HealthCallback that ends normally (its fit-end record is written last)."""
    import keras
    import scenarios

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(0)
    x, y = scenarios._classes(256, 10, 4, 0)
    model = scenarios._mlp(10, 4)
    model.compile("adam", scenarios.SPARSE_CE)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[HealthCallback(str(log_dir), verbose=False)])
    (event_file,) = log_dir.iterdir()
    return event_file


def cut_copy(event_file: Path, run_dir: Path, mtime: float, cut: int = 100) -> None:
    """A copy of the file without its last `cut` bytes, last modified at `mtime`."""
    run_dir.mkdir(parents=True)
    copy = run_dir / event_file.name
    copy.write_bytes(event_file.read_bytes()[:-cut])
    os.utime(copy, (mtime, mtime))


def test_a_truncated_copy_of_a_finished_run_is_neither_live_nor_killed(tmp_path):
    """One run, one story: a file cut long after its last event is a copy cut short, not a file
    still being written, and its lost tail (the fit's end) is no evidence of a kill."""
    from tb_trainhealth.cli.diagnose import diagnose_logdir
    from tb_trainhealth.cli.text_report import render_text

    original = finished_fit(tmp_path / "original")
    later = time.time() + 15 * 60  # the copy is made, and diagnosed, 15 min after the fit ended
    logdir = tmp_path / "logdir"
    cut_copy(original, logdir / "copy", mtime=later)
    cut_copy(original, logdir / "killed", mtime=os.path.getmtime(original))  # cut by its writer, as it died
    results = {r.run: r for r in diagnose_logdir(str(logdir), clock=lambda: later)}

    copy = results["copy"]
    (note,) = copy.file_problems
    assert note.kind == "truncated_copy" and copy.errors == []
    assert note.error.startswith("the file ends inside a record (")
    assert "a truncated copy, not a live run (its last complete event is 15 min older than the file)" in note.error
    assert [f.code for f in copy.findings] == [] and copy.status == "ok"
    text = render_text(list(results.values()), str(logdir))
    assert "still written" not in text
    assert f"OK       copy  (0 finding(s))\n  note: copy/{original.name}: the file ends inside a record" in text

    killed = results["killed"]  # the same bytes, written last as the fit ended: its writer died mid-record
    (problem,) = killed.file_problems
    assert problem.kind == "truncated" and "died mid-write" in problem.error
    assert [f.code for f in killed.findings] == ["ended_abruptly"] and killed.status == "critical"


def test_a_finished_run_damaged_mid_file_is_named_and_never_called_killed(tmp_path):
    """40 bytes flipped mid-file hide every record after them, the end of fit among them: the file's
    error says where, and the run is judged on what was read, never 'ended abruptly' (issue 47)."""
    from tb_trainhealth.cli.diagnose import diagnose_logdir

    event_file = finished_fit(tmp_path / "logdir" / "damaged")
    data = bytearray(event_file.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40] = b"\xff" * 40
    event_file.write_bytes(bytes(data))
    later = time.time() + 60 * 60  # diagnosed long after the fit: a run without its end would look killed
    (report,) = diagnose_logdir(str(tmp_path / "logdir"), clock=lambda: later)
    (problem,) = report.file_problems
    assert problem.kind == "corrupt" and "fails its checksum" in problem.error and "at byte" in problem.error
    assert "ended_abruptly" not in [f.code for f in report.findings]
    assert report.status != "critical" and report.errors[-1].endswith(problem.error)


def test_a_run_of_several_event_files_damaged_in_one_is_named_by_that_file_and_never_called_killed(tmp_path):
    """HealthCallback's file and Keras' train/ and validation/ files make one run: 40 bytes flipped
    mid-file in one of them name that file and byte, the others are read in full, and the run is
    judged on what was read (issue 47)."""
    import keras
    import scenarios

    from tb_trainhealth import HealthCallback
    from tb_trainhealth.cli.diagnose import diagnose_logdir

    run_dir = tmp_path / "whole" / "run"
    keras.utils.set_random_seed(0)
    x, y = scenarios._classes(512, 10, 4, 0)
    model = scenarios._mlp(10, 4)
    model.compile("adam", scenarios.SPARSE_CE, metrics=["accuracy"])
    callbacks = [HealthCallback(str(run_dir), verbose=False), keras.callbacks.TensorBoard(str(run_dir))]
    model.fit(x, y, epochs=4, batch_size=32, validation_split=0.25, verbose=0, callbacks=callbacks)
    later = time.time() + 60 * 60  # long after the fit: a run without its end would look killed
    (whole,) = diagnose_logdir(str(tmp_path / "whole"), clock=lambda: later)
    assert whole.file_problems == [] and whole.status != "critical"
    for damaged in ("validation", "."):  # Keras' validation file, then the callback's own
        logdir = tmp_path / f"damaged_{damaged.strip('.') or 'health'}"
        shutil.copytree(run_dir, logdir / "run")
        (event_file,) = [p for p in (logdir / "run" / damaged).iterdir() if p.name.startswith("events.out")]
        data = bytearray(event_file.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 40] = b"\xff" * 40
        event_file.write_bytes(bytes(data))
        (report,) = diagnose_logdir(str(logdir), clock=lambda: later)
        (problem,) = report.file_problems
        assert problem.file == os.path.relpath(event_file, logdir).replace(os.sep, "/")
        assert problem.kind == "corrupt" and "at byte" in problem.error and "record(s) before it" in problem.error
        assert "ended_abruptly" not in [f.code for f in report.findings] and report.status != "critical"
        if damaged == "validation":  # the callback's file, whole, still says how far the run got
            assert report.last_position == whole.last_position
    # `watch` tells the same story: the damaged file as an error, and no kill.
    from tb_trainhealth import diagnosis
    from tb_trainhealth.cli.watch import watch_logdir

    later_diagnosis = functools.partial(diagnosis.diagnose_run, clock=lambda: later)
    with (
        mock.patch.object(diagnosis, "diagnose_run", later_diagnosis),
        contextlib.redirect_stdout(io.StringIO()) as out,
    ):
        watch_logdir(str(tmp_path / "damaged_health"), interval=0.2, timeout=0.5)
    assert "corrupt at byte" in out.getvalue() and "ended_abruptly" not in out.getvalue(), out.getvalue()


def flip(event_file, offsets) -> None:
    data = bytearray(Path(event_file).read_bytes())
    for offset in offsets:
        data[offset] ^= 0xFF
    Path(event_file).write_bytes(bytes(data))
    finished(event_file)


def test_records_with_bad_checksums_are_errors(logdir):
    one_flip = write_events(logdir / "corrupt", diverging())
    flip(one_flip, [os.path.getsize(one_flip) // 2])
    forty_flips = write_events(logdir / "flipped", diverging())
    past_the_first_record = np.arange(200, os.path.getsize(forty_flips))  # (there: the file is "unreadable")
    flip(forty_flips, np.random.default_rng(0).choice(past_the_first_record, 40, replace=False))
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    for name, path in (("corrupt", one_flip), ("flipped", forty_flips)):
        (problem,) = runs[name]["file_errors"]
        assert problem["kind"] == "corrupt" and problem["file"] == relative(path, logdir)
        assert "fails its checksum" in problem["error"]
        assert runs[name]["errors"][-1] == f"{problem['file']}: {problem['error']}"


def test_garbage_only_run_beside_good_runs_is_listed_with_its_error(logdir):
    os.makedirs(logdir / "garbage")
    (logdir / "garbage" / "events.out.tfevents.123.host").write_bytes(os.urandom(4096))
    finished(logdir / "garbage" / "events.out.tfevents.123.host")
    code, runs = diagnose(logdir)
    assert code == 1  # good_nan's critical finding, as without the garbage
    assert_good_runs_untouched(runs)
    garbage = runs["garbage"]
    assert garbage["status"] == "unreadable" and garbage["findings"] == [] and garbage["errors"]
    (problem,) = garbage["file_errors"]
    assert problem["file"] == "garbage/events.out.tfevents.123.host" and problem["kind"] == "unreadable"
    assert garbage["errors"] == [f"{problem['file']}: {problem['error']}"]

    text = cli_text(logdir)
    assert "UNREADABLE garbage  (0 finding(s))\n  ! garbage/events.out.tfevents.123.host: unreadable:" in text

    from test_plugin import client_for, get_json

    client = client_for(str(logdir))
    listed = {r["run"]: r for r in get_json(client, "/runs")["runs"]}
    assert listed["garbage"]["file_errors"] == [problem] and listed["garbage"]["errors"] == garbage["errors"]
    assert listed["good_healthy"]["errors"] == [] and listed["good_healthy"]["file_errors"] == []
    findings = get_json(client, "/findings?run=garbage")
    assert findings["findings"] == [] and findings["file_errors"] == [problem]


def cli_run(logdir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def test_an_unreadable_run_is_not_ok_and_is_counted_apart(tmp_path):
    write_events(tmp_path / "plateau_run", [(s, 1.0 + 0.02 * np.sin(s)) for s in range(1, 200)])  # a warning
    write_events(tmp_path / "good_run", [(s, 2.0 * np.exp(-s / 20) + 0.3) for s in range(1, 200)])
    (tmp_path / "garbage_run").mkdir()
    (tmp_path / "garbage_run" / "events.out.tfevents.1.host").write_bytes(os.urandom(4096))
    write_events(tmp_path / "newer_run", diverging(), version=tags.SCHEMA_VERSION + 1)  # listed, nothing read

    as_json = cli_run(tmp_path, "--json")
    assert as_json.returncode == 0, as_json.stderr  # a warning, and unreadable runs: --fail-on decides
    order = [(r["run"], r["status"]) for r in json.loads(as_json.stdout)["runs"]]
    # worst first, then by name; unreadable ranks with ok, where the Health tab lists it
    assert order == [
        ("plateau_run", "warning"),
        ("garbage_run", "unreadable"),
        ("good_run", "ok"),
        ("newer_run", "unreadable"),
    ]
    text = cli_run(tmp_path).stdout
    assert "UNREADABLE garbage_run  (0 finding(s))\n  ! garbage_run/events.out.tfevents.1.host: unreadable: " in text
    assert "UNREADABLE newer_run  (0 finding(s))\n  ! written by a newer tb-trainhealth" in text
    assert text.splitlines()[-1] == "4 run(s): 0 critical, 1 warning, 1 ok, 2 unreadable"
    assert cli_run(tmp_path, "--fail-on", "warning").returncode == 1

    shutil.rmtree(tmp_path / "plateau_run")
    shutil.rmtree(tmp_path / "good_run")
    only_unreadable = cli_run(tmp_path)  # nothing could be read: the command could not do its job
    assert only_unreadable.returncode == 2 and "nothing under" in only_unreadable.stderr
    assert only_unreadable.stdout.splitlines()[-1] == "2 run(s): 0 critical, 0 warning, 0 ok, 2 unreadable"


def test_a_logdir_holding_only_garbage_lists_it_and_exits_2(tmp_path):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(os.urandom(4096))
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "nothing under" in proc.stderr and "could be read" in proc.stderr
    assert "Traceback" not in proc.stderr and "no TensorBoard event files" not in proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["run"] == tmp_path.name and run["file_errors"][0]["kind"] == "unreadable" and run["errors"]


def test_a_growing_file_is_read_again_only_from_where_it_was_good(tmp_path):
    """The tab re-checks every few seconds: only the appended bytes are read."""
    event_file = write_events(tmp_path / "run", diverging())
    data = Path(event_file).read_bytes()
    Path(event_file).write_bytes(data[: len(data) - 30])
    checker = event_files.EventFileChecker(str(tmp_path))
    (problem,) = checker.check()["run"]
    assert problem.kind == event_files.PARTIAL_LIVE and not problem.is_error
    assert checker.check(now=time.time() + 3600)["run"][0].kind == event_files.TRUNCATED
    with open(event_file, "ab") as f:
        f.write(data[len(data) - 30 :])  # the writer's next flush completes the record
    assert checker.check() == {}
    flip(event_file, [len(data) - 10])  # rewritten in place: same size, new mtime
    os.utime(event_file, (time.time(), time.time()))
    assert checker.check()["run"][0].kind == event_files.CORRUPT


@pytest.mark.parametrize("version", [None, tags.SCHEMA_VERSION + 1], ids=["malformed", "unknown-version"])
def test_bad_plugin_payload_is_an_error_for_that_run_only(logdir, version):
    write_events(logdir / "bad_payload", diverging(), version=version)
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["bad_payload"]["errors"] and runs["bad_payload"]["findings"] == []


def test_run_with_nan_inf_and_huge_values_everywhere(logdir):
    values = [(s, [np.nan, np.inf, -np.inf, 3e38, -3e38][s % 5]) for s in range(1, 300)]
    write_events(logdir / "garbage_values", values)
    write_events(logdir / "garbage_values_keras/train", values, tag="epoch_loss", plugin="scalars", version=0)
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["garbage_values"]["findings"][0]["code"] == "nonfinite"


def test_restarted_run_with_steps_going_back(logdir):
    write_events(logdir / "restarted", diverging(150))
    write_events(logdir / "restarted", [(s, 2.0 * np.exp(-s / 20) + 0.3) for s in range(1, 120)])
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["restarted"]["status"] in ("ok", "warning", "critical")
    assert runs["restarted"]["errors"] == []  # read as data, not as a broken run


def test_run_with_tags_but_no_steps(logdir):
    write_events(logdir / "empty_run", [])
    os.makedirs(logdir / "no_events_at_all")
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)


def _without_root_override(command: list[str]) -> list[str]:
    """As root, drop the capabilities that read any directory, so chmod 000 means unreadable."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a directory unreadable")
    return [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *command]


def test_an_unreadable_run_directory_is_listed_with_its_error(logdir):
    write_events(logdir / "locked", diverging())
    os.chmod(logdir / "locked", 0)
    try:
        command = [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), "--json"]
        proc = subprocess.run(_without_root_override(command), capture_output=True, text=True, timeout=120, cwd=ROOT)
        unreadable = subprocess.run(
            _without_root_override([*command[:-2], str(logdir / "locked")]),
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.chmod(logdir / "locked", 0o755)
    assert proc.returncode == 1, proc.stderr  # good_nan is critical: the others are diagnosed as usual
    runs = {r["run"]: r for r in json.loads(proc.stdout)["runs"]}
    assert_good_runs_untouched(runs)
    assert runs["locked"]["errors"] == ["cannot read this directory: Permission denied"]
    assert (
        unreadable.returncode == 2 and "cannot read" in unreadable.stderr and "Permission denied" in unreadable.stderr
    )


def test_text_output_and_watch_say_what_is_wrong_with_each_file(tmp_path):
    write_events(tmp_path / "good", diverging())
    live = write_events(tmp_path / "live", diverging())
    with open(live, "rb+") as f:
        f.truncate(os.path.getsize(live) - 5)  # its writer is mid-record right now
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "events.out.tfevents.1.host").write_bytes(os.urandom(2048))
    text = cli_text(tmp_path)
    assert f"  note: {relative(live, tmp_path)}: last record incomplete while the file is still written" in text
    assert "  ! garbage/events.out.tfevents.1.host: unreadable: " in text
    watch = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "watch", str(tmp_path), "--interval", "1", "--timeout", "2"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert watch.returncode == 0 and "Traceback" not in watch.stderr, watch.stderr
    lines = [line for line in watch.stdout.splitlines() if "[error]" in line]
    assert len(lines) == 1 and "[error] garbage: garbage/events.out.tfevents.1.host: unreadable: " in lines[0]


def test_a_big_file_is_walked_a_budget_at_a_time_and_finished_by_later_checks(tmp_path):
    """The walk stops after BYTES_PER_CHECK per file; the next check goes on to the end and
    then finds the damage at the file's tail."""
    from tb_trainhealth.read import event_files

    run = tmp_path / "run"
    run.mkdir()
    path = run / "events.out.tfevents.1.host"
    data = b"x" * 1000
    record = event_files.framed(data)
    path.write_bytes(record * 50 + record[:500])  # ~50 KB, cut inside its last record
    old = time.time() - 2 * event_files.LIVE_SECONDS
    os.utime(path, (old, old))
    checker = event_files.EventFileChecker(str(tmp_path))
    budget = event_files.BYTES_PER_CHECK
    try:
        event_files.BYTES_PER_CHECK = 10 * len(record)
        passes = [checker.check() for _ in range(6)]
    finally:
        event_files.BYTES_PER_CHECK = budget
    assert passes[0] == {}  # the first 10 records are fine
    assert [p.kind for p in passes[-1]["run"]] == [event_files.TRUNCATED]
