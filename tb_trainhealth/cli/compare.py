"""`tb-trainhealth compare RUN BASELINE`: is this run worse than a known-good one, and which changed
setting most likely made it so. Exit 0 same or better, 1 worse, 2 not comparable (one line why).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from tb_trainhealth.cli.exit_status import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, fail
from tb_trainhealth.compare import fix_text
from tb_trainhealth.compare.comparison import Comparison
from tb_trainhealth.compare.noise import Verdict

EPILOG = """\
exit status:
  0  the run is as good as the baseline (within run-to-run noise) or better
  1  the run is worse than the baseline
  2  the runs cannot be compared (not a run, different tasks, baseline still being written); one line on stderr

--json prints {"run", "baseline", "verdict": "worse"|"same"|"better"|"unknown", "why",
"changes": [{"setting", "baseline", "run"}] (most likely culprit first), "parted_at_step",
"metrics": [{"name", "baseline", "run"}] (final, and best_<name>), "findings": [...as diagnose]}.
"""
MAX_CHANGES = 12  # in text output; --json has them all


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare",
        help="compare RUN with a known-good BASELINE run: verdict, changed settings, likely culprit",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", help="the run directory to judge (the log_dir given to HealthCallback)")
    parser.add_argument("baseline", help="the run directory of a known-good run")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.set_defaults(run_command=run, path_arguments=["run", "baseline"])


def run(args: argparse.Namespace) -> int:
    from tb_trainhealth.compare.runs import RunNotComparable, compare_directories

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
