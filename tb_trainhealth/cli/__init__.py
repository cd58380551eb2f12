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
from tb_trainhealth.storage import readable_without_tensorflow, refusal

# Storage clients' loggers: a refused request is said by the command itself, once.
QUIET_LOGGERS = ("gcsfs", "s3fs", "fsspec", "botocore", "aiobotocore", "urllib3")

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "build_parser", "diagnose_logdir", "main", "watch_logdir"]


def _avoid_tensorflow(paths: list[str]) -> None:
    """Local logdirs, and buckets whose library is installed (`storage`), need no TensorFlow:
    TensorBoard's stub reads them, ~2 s faster and quiet (and TensorFlow 2.21 has no s3://).
    Anything else goes through TensorFlow's filesystems (gs:// without gcsfs, hdfs://)."""
    if all(readable_without_tensorflow(path) for path in paths):
        tensorboard_private.read_without_tensorflow()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    for client in QUIET_LOGGERS:  # (they log a refused request with its traceback; we say it in one line)
        logging.getLogger(client).setLevel(logging.CRITICAL)
    _avoid_tensorflow([path for name in args.path_arguments if (path := getattr(args, name))])
    from tb_trainhealth.read.logdir import LogdirError  # after the line above: it imports TensorBoard's tf

    paths = [path for name in args.path_arguments if (path := getattr(args, name))]
    try:
        return args.run_command(args)
    except LogdirError as err:
        return fail(str(err))
    except Exception as err:  # a bucket's store refusing or not answering: one line, exit 2
        for path in paths:
            why = None if is_local(path) else refusal(path, err)
            if why is not None:
                return fail(f"cannot read {path}: {why}")
        raise
