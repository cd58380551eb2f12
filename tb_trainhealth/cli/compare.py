"""`tb-trainhealth compare RUN BASELINE`: is this run worse than a known-good one, and which changed
setting most likely made it so. Exit 0 same or better, 1 worse, 2 not comparable (one line why).

`tb-trainhealth compare LOGDIR --baseline RUN|best`: every run under LOGDIR (read and diagnosed once)
against one baseline, or each against the best earlier run of its own model; one line per run, the
most clearly worse first (`compare.many`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import TYPE_CHECKING

from tb_trainhealth.cli.exit_status import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, fail
from tb_trainhealth.cli.progress import clear_progress, show_reading
from tb_trainhealth.compare import fix_text
from tb_trainhealth.compare.comparison import Comparison
from tb_trainhealth.contract.events import Verdict
from tb_trainhealth.run_paths import is_local

if TYPE_CHECKING:
    from tb_trainhealth.compare.many import Pair
    from tb_trainhealth.diagnosis import Diagnosis

EPILOG = """\
exit status (compare RUN BASELINE):
  0  the run is as good as the baseline (within run-to-run noise) or better
  1  the run is worse than the baseline
  2  the runs cannot be compared (not a run, different tasks, baseline still being written); one line on stderr

--json prints {"run", "baseline", "verdict": "worse"|"same"|"better"|"unknown", "why",
"changes": [{"setting", "baseline", "run"}] (most likely culprit first), "parted_at_step",
"metrics": [{"name", "baseline", "run"}] (final, and best_<name>), "findings": [...as diagnose],
"deciding_metric": the metric the verdict was judged on, or null, "signal_changes": [{"signal",
"layer", "baseline", "run", "text"}] (health signals that moved beyond what seeds move them, largest
first; "text": the line printed for it)}.

compare LOGDIR --baseline RUN|best: every run under LOGDIR against RUN (a run name as diagnose
names it, or a run directory; RUN itself is not compared), or each against the best earlier run of
its own model ("best": same layer classes, input_shape and output units; a run marked as good with
a file .tb-trainhealth-good in its directory first, then runs with no warning, then the best final
val_accuracy, else val_loss, else loss). One line per run: worse, unknown, same, better; within
each, the largest shortfall on the deciding metric first. --json prints a list of the objects
above, each with "baseline_choice": {"rule": "named"|"marked_good"|"no_warnings"|"best"|"none",
"why", "model", "differs", "closest": [{"run", "differs"}]} and "likely_cause": the first changed
setting as the line says it ("learning_rate 0.003 -> 3e-06") where the run is worse, else null; a
run with no baseline has "baseline": null. Exit 1 if any run is worse; else 2 if a run with a baseline could not be judged
against it, or no run had a baseline (one line on stderr); else 0. A run for which "best" finds no
earlier run of its model is listed, and alone does not make the exit status 2.
"""
MAX_CHANGES = 12  # in text output; --json has them all


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare",
        help="compare RUN with a known-good BASELINE run: verdict, changed settings, likely culprit",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run", help="the run directory to judge (the log_dir given to HealthCallback); with --baseline: a LOGDIR"
    )
    parser.add_argument("baseline", nargs="?", help="the run directory of a known-good run")
    parser.add_argument(
        "--baseline",
        dest="against",
        metavar="RUN|best",
        help="compare every run under the LOGDIR with RUN (a run name under it, or a run directory), "
        "or with the best earlier run of its own model (best)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(run_command=run, path_arguments=["run", "baseline", "against"])


def run(args: argparse.Namespace) -> int:
    from tb_trainhealth.compare.runs import RunNotComparable, compare_directories

    if args.against is not None:
        if args.baseline is not None:
            return fail(f"give a BASELINE ({args.baseline}) or --baseline, not both")
        try:
            return run_many(args)
        except RunNotComparable as err:
            return fail(str(err))
    if args.baseline is None:
        return fail(
            "compare needs a BASELINE run directory, or --baseline RUN|best to compare every run under a logdir"
        )
    try:
        comparison = compare_directories(args.run, args.baseline)
    except RunNotComparable as err:
        return fail(str(err))
    text = json.dumps(comparison.to_json(), indent=2, allow_nan=False) + "\n" if args.json else render(comparison)
    sys.stdout.write(text)
    if comparison.verdict is Verdict.UNKNOWN:
        print(f"tb-trainhealth: cannot compare: {comparison.why}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_FINDINGS if comparison.verdict is Verdict.WORSE else EXIT_OK


def run_many(args: argparse.Namespace) -> int:
    """compare LOGDIR --baseline RUN|best: every run under LOGDIR, one line (or JSON object) each."""
    from tb_trainhealth.cli.diagnose import diagnosed_runs
    from tb_trainhealth.compare import many
    from tb_trainhealth.compare.baseline_pick import marked_good

    shows_progress = not args.json and sys.stderr.isatty()
    if shows_progress:
        show_reading()
    try:
        diagnoses = _named_as_diagnose_names(diagnosed_runs(args.run), args.run)
    finally:
        if shows_progress:
            clear_progress()
    if args.against == BEST:
        marked_groups = marked_good(args.run, [d.group.name for d in diagnoses])
        pairs = many.against_best(diagnoses, {d.signals.run for d in diagnoses if d.group.name in marked_groups})
    else:
        pairs = many.against_one(diagnoses, _baseline(args.run, args.against, diagnoses))
    if args.json:
        text = json.dumps([pair.to_json() for pair in pairs], indent=2, allow_nan=False) + "\n"
    else:
        text = "".join(render_line(pair) + "\n" for pair in pairs)
    sys.stdout.write(text)
    return _many_exit_status(pairs, args.run)


# --baseline's value meaning "each run's best earlier run of its own model".
BEST = "best"
# Run names listed in the error for a --baseline that names none.
NAMES_SHOWN = 5


def _named_as_diagnose_names(diagnoses: list[Diagnosis], logdir: str) -> list[Diagnosis]:
    """A run written into LOGDIR itself ("." to TensorBoard) is named by its folder, as diagnose names it."""
    from tb_trainhealth.cli.diagnose import folder_name

    name = folder_name(logdir)
    if name and not any(d.signals.run == name for d in diagnoses):
        for d in diagnoses:
            if d.signals.run == ".":
                d.signals.run = name
    return diagnoses


def _baseline(logdir: str, value: str, diagnoses: list[Diagnosis]) -> Diagnosis:
    """The run --baseline names: a run under LOGDIR by name or by path, else a run directory
    elsewhere (read on its own). RunNotComparable where it names none."""
    from tb_trainhealth.compare.runs import RunNotComparable, diagnosed_directory

    by_name = {d.signals.run: d for d in diagnoses} | {d.group.name: d for d in diagnoses}
    if value in by_name:
        return by_name[value]
    if is_local(value) and os.path.isdir(value):
        inside = os.path.relpath(os.path.abspath(value), os.path.abspath(logdir)).replace(os.sep, "/")
        if inside in by_name:
            return by_name[inside]
        return diagnosed_directory(value, "baseline")
    if not is_local(value):
        return diagnosed_directory(value, "baseline")
    names = sorted({d.signals.run for d in diagnoses})
    shown = ", ".join(names[:NAMES_SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > NAMES_SHOWN else "")
    raise RunNotComparable(
        f"--baseline {value!r} is no run under {logdir} (its runs: {shown or 'none'}) nor a run directory; "
        f"give one of them, a run directory, or {BEST}"
    )


def _many_exit_status(pairs: list[Pair], logdir: str) -> int:
    """1 if any run is worse; else 2 if a run with a baseline could not be judged against it, or no
    run had one (a run "best" found no baseline for does not count alone); else 0."""
    if any(pair.comparison.verdict is Verdict.WORSE for pair in pairs):
        return EXIT_FINDINGS
    judged = [pair.comparison for pair in pairs if pair.comparison.baseline is not None]
    unknown = [comparison for comparison in judged if comparison.verdict is Verdict.UNKNOWN]
    if unknown:
        first = unknown[0]
        print(
            f"tb-trainhealth: cannot compare {len(unknown)} of {len(pairs)} run(s) with their baseline: "
            f"{first.run}: {first.why}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    if not judged:
        return fail(f"no run under {logdir} had a baseline to compare with")
    return EXIT_OK


def render_line(pair: Pair) -> str:
    """One run against its baseline, on one line: verdict, run, baseline, why, and the likely cause."""
    comparison = pair.comparison
    against = f"vs {comparison.baseline}" if comparison.baseline is not None else "no baseline"
    line = f"{comparison.verdict.value.upper():8} {comparison.run}  {against}: {comparison.why}"
    if pair.likely_cause is not None:
        line += f"; likely cause {pair.likely_cause}"
    return line


def render(comparison: Comparison) -> str:
    lines = [f"{comparison.verdict.value.upper():8} {comparison.run}  vs baseline {comparison.baseline}"]
    lines += textwrap.wrap(comparison.why, 100, initial_indent="  ", subsequent_indent="  ")
    if comparison.parted_at_step is not None:
        lines.append(f"  parted from the baseline at step {comparison.parted_at_step}")
    if comparison.metrics:
        lines.append("  metric                     baseline          run")
        for pair in comparison.metrics:
            for entry in pair.to_dicts():
                lines.append(f"    {entry['name']:22} {_number(entry['baseline']):>10}   {_number(entry['run']):>10}")
    if comparison.changes:
        lines.append("  changed settings (most likely culprit first):")
        for change in comparison.changes[:MAX_CHANGES]:
            lines.append(f"    {fix_text.change_text(change)}")
        if len(comparison.changes) > MAX_CHANGES:
            lines.append(f"    (+{len(comparison.changes) - MAX_CHANGES} more: --json)")
    else:
        lines.append("  no recorded setting differs")
    if comparison.signal_changes:
        lines.append("  health signals that moved beyond what seeds move them:")
        lines += [f"    {change.text()}" for change in comparison.signal_changes[:MAX_CHANGES]]
    for finding in comparison.findings:
        lines.append(f"  [{finding.severity.label}] {finding.code}{finding.onset_text}: {finding.title}")
        lines += textwrap.wrap(finding.detail, 100, initial_indent="      ", subsequent_indent="      ")
        for fix in finding.fixes[:3]:
            lines.append(f"      fix: {fix.text}")
            if fix.code:
                lines.append(textwrap.indent(fix.code, " " * 11))
    return "\n".join(lines) + "\n"


def _number(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else "NaN" if value is None else str(value)
