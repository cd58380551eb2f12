"""`tb-trainhealth diagnose LOGDIR`: every run under a logdir diagnosed, worst first, and the exit
status --fail-on asks for. Owns reading the logdir the fast way: TensorBoard's loader in
batches of runs (a batch that fails is read again by the fallback loader), each event file's
framing checked in a thread meanwhile, and two runs diagnosed at a time.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from tb_trainhealth.cli.exit_status import EXIT_FINDINGS, EXIT_OK, fail
from tb_trainhealth.cli.json_report import RUN_ORDER, UNREADABLE, render_json
from tb_trainhealth.cli.progress import clear_progress, show_reading, show_runs_diagnosed
from tb_trainhealth.cli.text_report import render_text
from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Severity, run_status
from tb_trainhealth.read import event_files
from tb_trainhealth.run_paths import is_local

PARALLEL_RUNS = 2
# diagnose's help, and the top-level parser's: the exit statuses and the JSON.
EPILOG = """\
exit status:
  0  no finding at or above --fail-on
  1  a finding at or above --fail-on (default: critical)
  2  the command could not do its job (unreadable logdir, bad arguments); one line on stderr

--json prints {"runs": [{"run", "status", "findings", "errors", "file_errors",
"event_counts"}, ...]}, worst run first; "status": "critical", "warning", "ok" or
"unreadable" (nothing of the run could be read: counted apart from ok; no run readable at
all exits 2); "file_errors": [{"file", "error", "kind"}]. A finding: {"code", "severity",
"step", "epoch", "title", "detail", "fixes": [{"text", "code"}], "evidence": {"series",
"start_step", "end_step", "layer", "check", "facts": [{"label", "value"}]}}.
Finding codes are stable: see README's table.
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
        results = diagnose_logdir(args.logdir, progress=shows_progress)
    except LogdirError:
        if shows_progress:
            clear_progress()  # "reading event files..." before the error line
        raise
    if shows_progress:
        clear_progress()
    sys.stdout.write(render_json(results) + "\n" if args.json else render_text(results, args.logdir))
    if results and all(r["status"] == UNREADABLE for r in results):
        unread = sum(len(r["errors"]) for r in results)
        return fail(f"nothing under {args.logdir} could be read ({unread} error(s))")
    threshold = Severity.parse(args.fail_on)
    failing = any(f.severity >= threshold for r in results for f in r["findings"])
    return EXIT_FINDINGS if failing else EXIT_OK


def diagnose_logdir(
    logdir: str, progress: bool = False, clock: Callable[[], float] = time.time
) -> list[dict[str, Any]]:
    """Diagnose every run under logdir, worst first: [{"run", "status", "findings", "errors",
    "file_errors", "event_counts", "axis", "diagnosed", "empty"}]: the run's recorded events by
    kind (nonfinite, oom, ...), whether its positions are batch steps or (per-epoch data only)
    epochs, and its event files that cannot be read in full (`event_files.FileProblem`s).
    A run none of whose files can be read is listed too, with its errors (diagnosed: False) and
    the status "unreadable", as is a listed run of which nothing could be read.

    progress: draw a one-line progress bar on stderr (only for a terminal, never with --json).
    clock: the wall-clock time of the diagnosis (runs that stopped writing and event files are
    judged against it; tests pass their own)."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read.load_batches import loaded_run_batches, run_directories, training_runs
    from tb_trainhealth.read.logdir import NoRunsError, unreadable_directories
    from tb_trainhealth.read.reader import SignalReader

    if progress:
        show_reading()
    results = [
        _undiagnosed(run, [f"cannot read this directory: {why}"], []) for run, why in unreadable_directories(logdir)
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as checking:
        # Every event file's framing and checksums, while TensorBoard's loader reads the same files.
        file_check = checking.submit(event_files.check_logdir, logdir, clock()) if is_local(logdir) else None
        try:
            expected = len(training_runs(run_directories(logdir))) if progress and is_local(logdir) else 0
            for provider in loaded_run_batches(logdir):
                _diagnose_runs(SignalReader(provider), functools.partial(diagnose_run, clock=clock), results, expected)
        except NoRunsError:
            if file_check is None or not any(p.is_error for ps in file_check.result().values() for p in ps):
                raise
        problems = file_check.result() if file_check is not None else {}
    _add_file_problems(results, problems)
    for result in results:
        _tell_one_story(result)
    _name_the_logdir_run(results, logdir)
    results.sort(key=lambda r: (RUN_ORDER[r["status"]], r["run"]))
    return results


def _add_file_problems(results: list[dict[str, Any]], problems: dict[str, list[event_files.FileProblem]]) -> None:
    """Each run's event-file problems into its result; a run TensorBoard does not list (no
    readable file) is added for its errors."""
    by_name = {r["run"]: r for r in results}
    for name, found in event_files.by_group(problems, set(by_name)).items():
        errors = [p.text() for p in found if p.is_error]
        if name not in by_name:
            if not errors:
                continue  # only a file still being written: nothing to show yet
            by_name[name] = _undiagnosed(name, [], [])
            results.append(by_name[name])
        by_name[name]["errors"].extend(errors)
        by_name[name]["file_errors"].extend(p.to_dict() for p in found)


def _name_the_logdir_run(results: list[dict[str, Any]], logdir: str) -> None:
    """TensorBoard names a run written into the logdir itself "."; a user who points diagnose at
    a run's own folder knows it by that folder's name ("." stays where the name is taken)."""
    name = _folder_name(logdir)
    if not name or any(r["run"] == name for r in results):
        return
    for result in results:
        if result["run"] == ".":
            result["run"] = name


def _folder_name(logdir: str) -> str:
    """The last part of a local path (resolved: "." is the current folder) or of a URL."""
    if is_local(logdir):
        return os.path.basename(os.path.abspath(logdir))
    return logdir.rstrip("/").rsplit("/", 1)[-1]


def _tell_one_story(result: dict[str, Any]) -> None:
    """The run's status from its findings and files together: a run cut short after the fact
    (a truncated copy) was not killed, and a run of which nothing was read is not ok."""
    from tb_trainhealth.rules.stalls import without_kill_claim  # (here: the rules load with the first diagnosis)

    cut = any(problem["kind"] == event_files.TRUNCATED_COPY for problem in result["file_errors"])
    findings = without_kill_claim(result["findings"], tail_cut_off=cut)
    if len(findings) != len(result["findings"]):
        result["findings"], result["status"] = findings, run_status(findings)
    if _read_nothing(result):
        result["status"] = UNREADABLE


def _read_nothing(result: dict[str, Any]) -> bool:
    """Nothing of the run was read and an error says why (garbage files, a log from a newer
    tb-trainhealth): no finding means nothing was looked at, not a healthy run. The tab's test
    for its "unreadable" badge, so both call the same runs unreadable."""
    return result["empty"] and bool(result["errors"]) and not result["findings"]


def _undiagnosed(run: str, errors: list[str], file_errors: list[dict[str, str]]) -> dict[str, Any]:
    """A run listed for its errors only: nothing in it could be read."""
    return {
        "run": run,
        "status": UNREADABLE,
        "findings": [],
        "errors": errors,
        "file_errors": file_errors,
        "event_counts": {},
        "axis": sig.STEP_AXIS,
        "diagnosed": False,
        "empty": True,
    }


def _diagnose_runs(reader, diagnose_run, results: list[dict[str, Any]], expected_runs: int) -> None:
    """Diagnose the reader's runs not in `results` yet (a batch that failed to load is read
    again by the fallback loader) into `results`. expected_runs: draw a progress bar of this
    many runs in all (0: none)."""
    done = {r["run"] for r in results}
    groups = [group for group in reader.groups() if group.name not in done]
    # Two runs at a time: one waits on the data server while the other is diagnosed.
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        diagnoses = pool.map(functools.partial(diagnose_run, reader), groups)
        for group, d in zip(groups, diagnoses):
            if expected_runs:
                show_runs_diagnosed(len(results) + 1, expected_runs)
            kinds = collections.Counter(e.kind.value for e in d.signals.events)
            results.append(
                {
                    "run": group.name,
                    "status": d.status,
                    "findings": d.findings,
                    "errors": list(d.errors),
                    "file_errors": [],
                    "event_counts": dict(sorted(kinds.items())),
                    "axis": d.signals.axis,
                    "diagnosed": True,
                    "empty": not d.signals.has_health_data and d.signals.last_position is None,
                }
            )
