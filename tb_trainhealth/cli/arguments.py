"""The command line's grammar: the exit statuses, the top-level parser and its help, and the
list of subcommands registered on it. A subcommand is a module with `register(commands)`,
which adds its parser and sets `run_command` (its `run(args) -> exit status`) and
`path_arguments` (the arguments naming what it reads) as that parser's defaults; adding one
is that module plus one entry in `build_parser`.
"""

from __future__ import annotations

import argparse
import sys

from tb_trainhealth import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, no usage dump
        print(f"tb-trainhealth: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    from tb_trainhealth.cli import compare, diagnose, watch  # here: they import this module's exit statuses

    parser = _Parser(
        prog="tb-trainhealth",
        description="Diagnose TensorFlow training runs from their TensorBoard logs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in (diagnose, watch, compare):
        command.register(commands)
    return parser


def fail(message: str) -> int:
    """The command could not do its job: one line on stderr, exit status 2."""
    print(f"tb-trainhealth: error: {message}", file=sys.stderr)
    return EXIT_ERROR
