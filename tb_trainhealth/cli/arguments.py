"""The command line's grammar: the top-level parser and its help, and the list of subcommands
registered on it (what their exit statuses mean: `exit_status`). A subcommand is a module with
`register(commands)`, which adds its parser and sets `run_command` (its `run(args) -> exit
status`) and `path_arguments` (the arguments naming what it reads) as that parser's defaults;
adding one is that module plus one entry in `build_parser`.
"""

from __future__ import annotations

import argparse
import sys

from tb_trainhealth import __version__
from tb_trainhealth.cli import compare, diagnose, watch
from tb_trainhealth.cli.exit_status import EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, no usage dump
        print(f"tb-trainhealth: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tb-trainhealth",
        description="Diagnose TensorFlow training runs from their TensorBoard logs.",
        epilog=diagnose.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in (diagnose, watch, compare):
        command.register(commands)
    return parser
