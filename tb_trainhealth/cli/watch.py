"""`tb-trainhealth watch LOGDIR`: follow runs while they are written and print each new
warning/critical finding (again when it gets worse) and each new run or event-file error once,
timestamped. Owns the polling loop: reload, re-diagnose only runs that grew or asked to be
looked at again (a silent run becomes a stall as time passes), sleep, until --timeout or Ctrl-C.
A store that stops answering mid-watch is said once and tried again less and less often
(`Outage`), and said again when it answers: a bucket's blip never ends the watch.
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import TYPE_CHECKING

from tb_trainhealth.cli.exit_status import EXIT_OK
from tb_trainhealth.cli.outage import Outage
from tb_trainhealth.read import event_files
from tb_trainhealth.run_paths import is_local
from tb_trainhealth.tracking import FindingTracker, finding_line

if TYPE_CHECKING:
    from tb_trainhealth.report.run_report import RunReport


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("watch", help="follow live runs and print each new finding once")
    parser.add_argument("logdir", help="a TensorBoard logdir (local path or any tf.io.gfile URL)")
    parser.add_argument("--interval", type=_positive_float, default=10.0, help="seconds between looks (default 10)")
    parser.add_argument(
        "--timeout", type=_positive_float, default=None, help="stop after this many seconds (default: never)"
    )
    parser.set_defaults(run_command=run, path_arguments=["logdir"])


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    return watch_logdir(args.logdir, args.interval, args.timeout)


def watch_logdir(logdir: str, interval: float, timeout: float | None) -> int:
    """Print each new warning/critical finding (and run error) once, as runs are written."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read.logdir import LogdirError, followed_logdir
    from tb_trainhealth.read.reader import SignalReader
    from tb_trainhealth.report.run_report import RunReport

    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        with followed_logdir(logdir, reload_seconds=max(1, round(interval))) as (provider, reload):
            print(f"tb-trainhealth: watching {logdir} every {interval:g} s (Ctrl-C to stop)", flush=True)
            reader = SignalReader(provider)
            trackers: dict[str, FindingTracker] = collections.defaultdict(FindingTracker)
            errors_seen: set[tuple[str, str]] = set()
            fingerprints: dict[str, tuple[int, float, int]] = {}
            recheck_at: dict[str, float | None] = {}
            checker = event_files.EventFileChecker(logdir) if is_local(logdir) else None
            outage = Outage(logdir, interval)
            while True:
                try:
                    reload()
                except LogdirError as err:  # (raised only where the logdir itself cannot be read)
                    _sleep(outage.failed(str(err)), deadline)
                    if deadline is not None and time.monotonic() >= deadline:
                        return EXIT_OK
                    continue
                outage.answered()
                groups = reader.groups()
                problems: dict[str, list[event_files.FileProblem]] = {}
                if checker is not None:  # only what was appended since the last look is read
                    problems = event_files.by_group(checker.check(), {g.name for g in groups})
                    for name, found in problems.items():
                        _print_errors(name, [p.text() for p in found if p.is_error], errors_seen)
                for group in groups:
                    fingerprint = reader.last_step(group)
                    due = recheck_at.get(group.name)
                    if fingerprints.get(group.name) != fingerprint or (due is not None and time.time() >= due):
                        fingerprints[group.name] = fingerprint
                        diagnosis = diagnose_run(reader, group)
                        recheck_at[group.name] = diagnosis.recheck_at
                        report = RunReport.of(diagnosis, problems.get(group.name, ()))
                        _print_new(report, diagnosis.errors, trackers[group.name], errors_seen)
                if deadline is not None and time.monotonic() >= deadline:
                    return EXIT_OK
                _sleep(interval, deadline)
    except KeyboardInterrupt:
        return EXIT_OK


def _sleep(seconds: float, deadline: float | None) -> None:
    time.sleep(seconds if deadline is None else max(0.0, min(seconds, deadline - time.monotonic())))


def _print_new(
    report: RunReport, errors: list[str], tracker: FindingTracker, errors_seen: set[tuple[str, str]]
) -> None:
    """One line per new warning/critical finding of the run's story (as `diagnose` tells it: a run
    whose end a damaged file hides is not killed), again when it gets worse, and per new error."""
    for finding, before in tracker.new(report.findings):
        print(f"{time.strftime('%H:%M:%S')} {finding_line(finding, report.run, before)}", flush=True)
    _print_errors(report.run, errors, errors_seen)


def _print_errors(name: str, errors: list[str], errors_seen: set[tuple[str, str]]) -> None:
    for error in errors:
        if (name, error) not in errors_seen:
            errors_seen.add((name, error))
            print(f"{time.strftime('%H:%M:%S')} [error] {name}: {error}", flush=True)
