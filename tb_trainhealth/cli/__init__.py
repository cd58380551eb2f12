"""`tb-trainhealth diagnose LOGDIR`: the Health tab's diagnoses in a terminal or CI job.

Exit status: 0 nothing at or above --fail-on, 1 something is, 2 the command could
not do its job (unreadable logdir, bad arguments), with one line on stderr.

This module runs a command line: parse it (`arguments`), read local paths without TensorFlow,
run the subcommand (`diagnose`, `watch`), and turn an unreadable logdir into exit status 2.
"""

from __future__ import annotations

import logging

from tb_trainhealth.cli.arguments import build_parser
from tb_trainhealth.cli.diagnose import diagnose_logdir
from tb_trainhealth.cli.exit_status import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, fail
from tb_trainhealth.cli.watch import watch_logdir
from tb_trainhealth.read import tensorboard_private
from tb_trainhealth.run_paths import is_local

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "build_parser", "diagnose_logdir", "main", "watch_logdir"]


def _avoid_tensorflow_for_local_paths(paths: list[str]) -> None:
    """Local logdirs need no TensorFlow: TensorBoard's stub reads them, ~2 s faster and quiet.

    URLs (gs://, s3://, hdfs://) still go through TensorFlow's filesystems.
    """
    if all(is_local(path) for path in paths):
        tensorboard_private.read_without_tensorflow()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    _avoid_tensorflow_for_local_paths([path for name in args.path_arguments if (path := getattr(args, name))])
    from tb_trainhealth.read.logdir import LogdirError  # after the line above: it imports TensorBoard's tf

    try:
        return args.run_command(args)
    except LogdirError as err:
        return fail(str(err))
