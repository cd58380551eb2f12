"""`tb-trainhealth diagnose LOGDIR`: the Health tab's diagnoses in a terminal or CI job.

Exit status: 0 nothing at or above --fail-on, 1 something is, 2 the command could
not do its job (unreadable logdir, bad arguments), with one line on stderr.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import json
import logging
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any

from tb_trainhealth import __version__
from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import STATUS_ORDER, Finding, Severity
from tb_trainhealth.read import event_files, tensorboard_private
from tb_trainhealth.run_paths import is_local
from tb_trainhealth.tracking import FindingTracker, finding_line

if TYPE_CHECKING:
    from tb_trainhealth.diagnosis import Diagnosis

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
PARALLEL_RUNS = 2
MAX_FIXES = 3  # per finding in text output; --json has them all
MAX_FACTS = 8


EPILOG = """\
exit status:
  0  no finding at or above --fail-on
  1  a finding at or above --fail-on (default: critical)
  2  the command could not do its job (unreadable logdir, bad arguments); one line on stderr

--json prints {"runs": [{"run", "status", "findings", "errors", "event_counts"}, ...]}, worst
run first. A finding: {"code", "severity", "step", "epoch", "title", "detail", "fixes":
[{"text", "code"}], "evidence": {"series", "start_step", "end_step", "layer", "check",
"facts": [{"label", "value"}]}}. Finding codes are stable: see README's table.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, no usage dump
        print(f"tb-trainhealth: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tb-trainhealth",
        description="Diagnose TensorFlow training runs from their TensorBoard logs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    diagnose = commands.add_parser(
        "diagnose",
        help="diagnose every run under LOGDIR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diagnose.add_argument("logdir", help="a TensorBoard logdir (local path or any tf.io.gfile URL)")
    diagnose.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    diagnose.add_argument(
        "--fail-on",
        choices=["warning", "critical"],
        default="critical",
        help="exit 1 when a finding at or above this severity exists (default: critical)",
    )
    watch = commands.add_parser("watch", help="follow live runs and print each new finding once")
    watch.add_argument("logdir", help="a TensorBoard logdir (local path or any tf.io.gfile URL)")
    watch.add_argument("--interval", type=_positive_float, default=10.0, help="seconds between looks (default 10)")
    watch.add_argument(
        "--timeout", type=_positive_float, default=None, help="stop after this many seconds (default: never)"
    )
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def watch_logdir(logdir: str, interval: float, timeout: float | None) -> int:
    """Print each new warning/critical finding (and run error) once, as runs are written."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read.logdir import followed_logdir
    from tb_trainhealth.read.reader import SignalReader

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
            while True:
                reload()
                groups = reader.groups()
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
                        _print_new(diagnosis, trackers[group.name], errors_seen)
                if deadline is not None and time.monotonic() >= deadline:
                    return EXIT_OK
                time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
    except KeyboardInterrupt:
        return EXIT_OK


def _print_new(diagnosis: Diagnosis, tracker: FindingTracker, errors_seen: set[tuple[str, str]]) -> None:
    """One line per new warning/critical finding (again when it gets worse) and error."""
    name = diagnosis.group.name
    for finding, before in tracker.new(diagnosis.findings):
        print(f"{time.strftime('%H:%M:%S')} {finding_line(finding, name, before)}", flush=True)
    _print_errors(name, diagnosis.errors, errors_seen)


def _print_errors(name: str, errors: list[str], errors_seen: set[tuple[str, str]]) -> None:
    for error in errors:
        if (name, error) not in errors_seen:
            errors_seen.add((name, error))
            print(f"{time.strftime('%H:%M:%S')} [error] {name}: {error}", flush=True)


def diagnose_logdir(logdir: str, progress: bool = False) -> list[dict[str, Any]]:
    """Diagnose every run under logdir, worst first: [{"run", "status", "findings", "errors",
    "file_errors", "event_counts", "axis", "diagnosed"}]: the run's recorded events by kind
    (nonfinite, oom, ...), whether its positions are batch steps or (per-epoch data only)
    epochs, and its event files that cannot be read in full (`event_files.FileProblem`s).
    A run none of whose files can be read is listed too, with its errors (diagnosed: False).

    progress: draw a one-line progress bar on stderr (only for a terminal, never with --json)."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read import event_files
    from tb_trainhealth.read.load_batches import loaded_run_batches, run_directories, training_runs
    from tb_trainhealth.read.logdir import NoRunsError, unreadable_directories
    from tb_trainhealth.read.reader import SignalReader

    if progress:
        print("reading event files...", end="", file=sys.stderr, flush=True)
    results = [
        _undiagnosed(run, [f"cannot read this directory: {why}"], []) for run, why in unreadable_directories(logdir)
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as checking:
        # Every event file's framing and checksums, while TensorBoard's loader reads the same files.
        file_check = checking.submit(event_files.check_logdir, logdir) if is_local(logdir) else None
        try:
            expected = len(training_runs(run_directories(logdir))) if progress and is_local(logdir) else 0
            for provider in loaded_run_batches(logdir):
                _diagnose_runs(SignalReader(provider), diagnose_run, results, expected)
        except NoRunsError:
            if file_check is None or not any(p.is_error for ps in file_check.result().values() for p in ps):
                raise
        problems = file_check.result() if file_check is not None else {}
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
    results.sort(key=lambda r: (STATUS_ORDER[r["status"]], r["run"]))
    return results


def _undiagnosed(run: str, errors: list[str], file_errors: list[dict[str, str]]) -> dict[str, Any]:
    """A run listed for its errors only: nothing in it could be read."""
    return {
        "run": run,
        "status": "ok",
        "findings": [],
        "errors": errors,
        "file_errors": file_errors,
        "event_counts": {},
        "axis": sig.STEP_AXIS,
        "diagnosed": False,
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
                index = len(results) + 1
                bar = int(30 * min(index / expected_runs, 1))
                print(f"\rdiagnosing [{'#' * bar}{'.' * (30 - bar)}] {index} runs", end="", file=sys.stderr, flush=True)
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
                }
            )


def _render_text(results: list[dict[str, Any]], logdir: str) -> str:
    if not results:
        return (
            f"No training runs found under {logdir}.\n"
            'Record one with:  model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])\n'
        )
    lines = []
    for result in results:
        findings: list[Finding] = result["findings"]
        lines.append(f"{result['status'].upper():8} {result['run']}  ({len(findings)} finding(s))")
        for error in result["errors"]:
            lines.append(f"  ! {error}")
        for problem in result["file_errors"]:
            if problem["kind"] not in event_files.ERROR_KINDS:
                lines.append(f"  note: {problem['file']}: {problem['error']}")
        for finding in findings:
            lines.append(f"  [{finding.severity.label}] {finding.code}{finding.onset_text}: {finding.title}")
            lines.extend(textwrap.wrap(finding.detail, 100, initial_indent="      ", subsequent_indent="      "))
            for fact in finding.evidence.facts[:MAX_FACTS]:
                lines.append(f"      - {fact.label}: {fact.value}")
            for fix in finding.fixes[:MAX_FIXES]:
                lines.append(f"      fix: {fix.text}")
                if fix.code:
                    lines.append(textwrap.indent(fix.code, " " * 11))
            if len(finding.fixes) > MAX_FIXES:
                lines.append(f"      (+{len(finding.fixes) - MAX_FIXES} more fixes: --json, or the Health tab)")
        lines.append("")
    counts = {s: sum(r["status"] == s for r in results) for s in STATUS_ORDER}
    lines.append(
        f"{len(results)} run(s): {counts['critical']} critical, {counts['warning']} warning, {counts['ok']} ok"
    )
    return "\n".join(lines) + "\n"


def _render_json(results: list[dict[str, Any]]) -> str:
    runs = [
        {
            "run": r["run"],
            "status": r["status"],
            "findings": [f.to_dict() for f in r["findings"]],
            "errors": r["errors"],
            "file_errors": r["file_errors"],
            "event_counts": r["event_counts"],
        }
        for r in results
    ]
    return json.dumps({"runs": runs}, indent=2, allow_nan=False)


def _avoid_tensorflow_for_local_paths(logdir: str) -> None:
    """Local logdirs need no TensorFlow: TensorBoard's stub reads them, ~2 s faster and quiet.

    URLs (gs://, s3://, hdfs://) still go through TensorFlow's filesystems.
    """
    if is_local(logdir):
        tensorboard_private.read_without_tensorflow()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    _avoid_tensorflow_for_local_paths(args.logdir)
    from tb_trainhealth.read.logdir import LogdirError

    progress = args.command == "diagnose" and not args.json and sys.stderr.isatty()
    try:
        if args.command == "watch":
            return watch_logdir(args.logdir, args.interval, args.timeout)
        results = diagnose_logdir(args.logdir, progress=progress)
        if progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)  # clear the bar
    except LogdirError as err:
        if progress:
            print("\r\033[K", end="", file=sys.stderr)  # clear "reading event files..."
        print(f"tb-trainhealth: error: {err}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(_render_json(results) + "\n" if args.json else _render_text(results, args.logdir))
    if results and not any(r["diagnosed"] for r in results):
        unread = sum(len(r["errors"]) for r in results)
        print(f"tb-trainhealth: error: nothing under {args.logdir} could be read ({unread} error(s))", file=sys.stderr)
        return EXIT_ERROR
    threshold = Severity.parse(args.fail_on)
    failing = any(f.severity >= threshold for r in results for f in r["findings"])
    return EXIT_FINDINGS if failing else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
