"""Two rules of thumb about run names and paths, used by both sides: which TensorBoard runs
make up one training run, and whether a logdir is a path on this machine."""

from __future__ import annotations

import posixpath
from collections.abc import Container

# Keras' TensorBoard callback writes to `<log_dir>/train` and `<log_dir>/validation`.
KERAS_SUBRUNS = ("train", "validation")
MAIN = "main"  # the role of a run that is its own training run


def training_run_of(run: str, standalone: Container[str] = ()) -> tuple[str, str]:
    """(training run, role) of a TensorBoard run: Keras' `D/train` and `D/validation` belong to
    `D` (`"."` for a logdir's own), as roles "train" and "validation"; any other run, and one in
    `standalone` (written by HealthCallback, even into a directory named `train`), is its own,
    as role "main"."""
    parent, base = posixpath.split(run)
    if base in KERAS_SUBRUNS and run not in standalone:
        return parent or ".", base
    return run, MAIN


def is_local(path: str) -> bool:
    """A path on this machine, not a URL (gs://, s3://, hdfs://) for TensorFlow's filesystems."""
    return "://" not in path
