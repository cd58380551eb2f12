"""`tb-trainhealth diagnose LOGDIR`: every run under a logdir diagnosed, worst first, and the exit
status --fail-on asks for. Owns reading the logdir the fast way: TensorBoard's loader in
batches of runs (a batch that fails is read again by the fallback loader), each event file's
framing checked in a thread meanwhile, and two runs diagnosed at a time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import functools
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tb_trainhealth.cli.exit_status import EXIT_FINDINGS, EXIT_OK, fail
from tb_trainhealth.cli.json_report import render_json
from tb_trainhealth.cli.progress import clear_progress, show_reading, show_runs_diagnosed
from tb_trainhealth.cli.text_report import render_text
from tb_trainhealth.contract.vocab import RunStatus
from tb_trainhealth.findings import Severity
from tb_trainhealth.read import event_files
from tb_trainhealth.report.run_report import RunReport, ToldRun, logdir_reports, worst_first
from tb_trainhealth.run_paths import is_local

if TYPE_CHECKING:
    from tb_trainhealth.diagnosis import Diagnosis

PARALLEL_RUNS = 2
# Processes reading and diagnosing a local logdir's runs: one per core, at most this many.
PARALLEL_PROCESSES = 8
# TB_TRAINHEALTH_LOADER=tensorboard: read every run with TensorBoard's loaders (the data server, else
# the Python one), never from the files directly (slower: what the CLI did before it read the records itself).
LOADER_VARIABLE, TENSORBOARD_LOADERS = "TB_TRAINHEALTH_LOADER", "tensorboard"
# diagnose's help, and the top-level parser's: the exit statuses and the JSON.
EPILOG = """\
exit status:
  0  no finding at or above --fail-on
  1  a finding at or above --fail-on (default: critical)
  2  the command could not do its job (unreadable logdir, bad arguments); one line on stderr

--json prints {"runs": [{"run", "status", "plan", "plan_note", "findings", "errors",
"file_errors", "event_counts"}, ...]}, worst run first; "plan": what to do, at most 3 steps, root cause first:
[{"text", "code", "intents": [{"setting", "direction"}], "answers": [codes], "tried", "trial":
{"verdict", "label", "error"} or null, "measured"}]; "plan_note": why its changes were
not tried on the run's data (trials skipped, or out of time), or null; "status": "critical", "warning", "ok" or
"unreadable" (nothing of the run could be read: counted apart from ok; no run readable at
all exits 2); "file_errors": [{"file", "error", "kind"}]. A finding: {"code", "severity",
"step", "epoch", "title", "detail", "plan_steps": [the plan's steps that answer it],
"trial_note": what a trial said against its usual fix or null, "evidence": {"series",
"start_step", "end_step", "layer", "check", "facts": [{"label", "value"}]}}.
Finding codes are stable: see docs/codes.md.
"""


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diagnose",
        help="diagnose every run under LOGDIR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("logdir", help="a TensorBoard logdir (local path or any tf.io.gfile URL)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--fail-on",
        choices=["warning", "critical"],
        default="critical",
        help="exit 1 when a finding at or above this severity exists (default: critical)",
    )
    parser.set_defaults(run_command=run, path_arguments=["logdir"])


def run(args: argparse.Namespace) -> int:
    from tb_trainhealth.read.logdir import LogdirError

    shows_progress = not args.json and sys.stderr.isatty()
    try:
        reports = diagnose_logdir(args.logdir, progress=shows_progress)
    except LogdirError:
        if shows_progress:
            clear_progress()  # "reading event files..." before the error line
        raise
    if shows_progress:
        clear_progress()
    sys.stdout.write(render_json(reports) + "\n" if args.json else render_text(reports, args.logdir))
    if reports and all(report.status is RunStatus.UNREADABLE for report in reports):
        unread = sum(len(report.errors) for report in reports)
        return fail(f"nothing under {args.logdir} could be read ({unread} error(s))")
    threshold = Severity.parse(args.fail_on)
    failing = any(f.severity >= threshold for report in reports for f in report.findings)
    return EXIT_FINDINGS if failing else EXIT_OK


def diagnose_logdir(logdir: str, progress: bool = False, clock: Callable[[], float] = time.time) -> list[RunReport]:
    """Every run under logdir diagnosed and reported (`report.RunReport`), worst first, each with
    its event files that cannot be read in full. A run none of whose files can be read is listed
    too, for its errors (status "unreadable"), as is a listed run of which nothing could be read.

    progress: draw a one-line progress bar on stderr (only for a terminal, never with --json).
    clock: the wall-clock time of the diagnosis (runs that stopped writing and event files are
    judged against it; tests pass their own)."""
    from tb_trainhealth.read.logdir import NoRunsError, unreadable_directories

    if progress:
        show_reading()
    unread = {run: [f"cannot read this directory: {why}"] for run, why in unreadable_directories(logdir)}
    told: list[ToldRun] = []
    with contextlib.ExitStack() as stack:
        runs = _RunsTold(logdir, clock, skip=set(unread), progress=progress, stack=stack)
        # Every event file's framing and checksums, while the runs are read (started after the
        # reading processes are, so that none is forked from a process running this thread).
        checking = stack.enter_context(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        file_check = checking.submit(event_files.check_logdir, logdir, clock()) if is_local(logdir) else None
        try:
            told = runs.finish()
        except NoRunsError:
            if file_check is None or not any(p.is_error for ps in file_check.result().values() for p in ps):
                raise
        problems = file_check.result() if file_check is not None else {}
    reports = logdir_reports([], problems, unread=unread, told=told)
    return worst_first(_name_the_logdir_run(reports, logdir))


def diagnosed_runs(
    logdir: str,
    clock: Callable[[], float] = time.time,
    skip: set[str] | None = None,
    expected_runs: int = 0,
    runs: list[str] | None = None,
) -> list[Diagnosis]:
    """Every run under `logdir` (or only `runs`, TensorBoard run names) read and diagnosed once by
    TensorBoard's loaders (a batch of runs at a time: `loaded_run_batches`), but those in `skip`,
    in the order read. Raises NoRunsError where no loader lists a run. expected_runs: draw a
    progress bar of this many runs in all (0: none)."""
    from tb_trainhealth.read.load_batches import loaded_run_batches

    diagnoses: list[Diagnosis] = []
    for provider in loaded_run_batches(logdir, runs):
        _diagnose_runs(
            _reader(provider), functools.partial(_diagnose, clock=clock), diagnoses, set(skip or ()), expected_runs
        )
    return diagnoses


class _RunsTold:
    """The runs of a logdir read and diagnosed, each told (`ToldRun`): a local logdir's training
    runs each read from its files (`read.file_provider`) and diagnosed in a process of a pool of
    one per core, started here; runs whose files hold what that reader leaves to TensorBoard, and
    logdirs elsewhere, by TensorBoard's loaders in this process (`diagnosed_runs`)."""

    def __init__(self, logdir: str, clock: Callable[[], float], skip: set[str], progress: bool, stack):
        from tb_trainhealth.read.load_batches import run_directories, training_runs

        self._logdir, self._clock, self._skip, self._progress = logdir, clock, skip, progress
        from_files = is_local(logdir) and os.environ.get(LOADER_VARIABLE) != TENSORBOARD_LOADERS
        self._groups = training_runs(run_directories(logdir)) if from_files else []
        self._results = None
        if self._groups:
            processes = max(1, min(os.cpu_count() or 1, PARALLEL_PROCESSES, len(self._groups)))
            pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(processes, mp_context=_process_context()))
            now = clock()
            self._results = pool.map(_told_from_files, [(logdir, runs, now, frozenset(skip)) for runs in self._groups])

    def finish(self) -> list[ToldRun]:
        from tb_trainhealth.read.logdir import NoRunsError

        if self._results is None:
            return [ToldRun.of(d) for d in diagnosed_runs(self._logdir, self._clock, self._skip)]
        told: list[ToldRun] = []
        elsewhere: list[str] = []
        listed = False
        for runs, result in zip(self._groups, self._results):
            if result is None:
                elsewhere += runs
                continue
            listed = listed or result[0]
            told += result[1]
            if self._progress:
                show_runs_diagnosed(len(told), len(self._groups))
        if elsewhere:
            try:
                told += [
                    ToldRun.of(d)
                    for d in diagnosed_runs(
                        self._logdir, self._clock, self._skip | {t.run for t in told}, runs=elsewhere
                    )
                ]
            except NoRunsError:
                if not listed:
                    raise
        elif not listed:
            raise NoRunsError.under(self._logdir)
        return told


def _process_context():
    """Fork (the workers start at once, with everything imported) from a process with one thread and
    no TensorFlow, as the CLI's is when the pool starts; else a fresh interpreter per worker (forking
    a process whose other threads may hold locks can deadlock the child)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and "tensorflow" not in sys.modules:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _told_from_files(job: tuple[str, list[str], float, frozenset[str]]) -> tuple[bool, list[ToldRun]] | None:
    """In a pool process: one training run's TensorBoard runs read from their files and diagnosed
    as of `now`: (whether any run was listed, the runs told); None: leave them to TensorBoard's loader."""
    from tb_trainhealth.read import file_provider
    from tb_trainhealth.read.logdir import SAMPLES_PER_PLUGIN, has_runs

    logdir, runs, now, skip = job
    try:
        provider = file_provider.load_runs(logdir, runs, SAMPLES_PER_PLUGIN)
    except file_provider.NotSimple:
        return None
    reader = _reader(provider)
    told = [
        ToldRun.of(_diagnose(reader, group, clock=lambda: now)) for group in reader.groups() if group.name not in skip
    ]
    return has_runs(provider), told


def _reader(provider):
    from tb_trainhealth.read.reader import SignalReader

    return SignalReader(provider)


def _diagnose(reader, group, clock: Callable[[], float] = time.time) -> Diagnosis:
    from tb_trainhealth.diagnosis import diagnose_run

    return diagnose_run(reader, group, clock=clock)


def _name_the_logdir_run(reports: list[RunReport], logdir: str) -> list[RunReport]:
    """TensorBoard names a run written into the logdir itself "."; a user who points diagnose at
    a run's own folder knows it by that folder's name ("." stays where the name is taken)."""
    name = folder_name(logdir)
    if not name or any(report.run == name for report in reports):
        return reports
    return [dataclasses.replace(report, run=name) if report.run == "." else report for report in reports]


def folder_name(logdir: str) -> str:
    """The last part of a local path (resolved: "." is the current folder) or of a URL."""
    if is_local(logdir):
        return os.path.basename(os.path.abspath(logdir))
    return logdir.rstrip("/").rsplit("/", 1)[-1]


def _diagnose_runs(reader, diagnose_run, diagnoses: list[Diagnosis], unread: set[str], expected_runs: int) -> None:
    """Diagnose the reader's runs neither in `diagnoses` yet (a batch that failed to load is read
    again by the fallback loader) nor `unread`, into `diagnoses`. expected_runs: draw a progress
    bar of this many runs in all (0: none)."""
    done = unread | {d.group.name for d in diagnoses}
    groups = [group for group in reader.groups() if group.name not in done]
    # Two runs at a time: one waits on the data server while the other is diagnosed.
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        for diagnosis in pool.map(functools.partial(diagnose_run, reader), groups):
            if expected_runs:
                show_runs_diagnosed(len(diagnoses) + len(unread) + 1, expected_runs)
            diagnoses.append(diagnosis)
