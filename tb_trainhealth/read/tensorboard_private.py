"""Every use of TensorBoard behaviour that is not its public API, in one place.

Checked on TensorBoard 2.21 with tensorboard-data-server 0.7.2 (the data server's command-line
flags and log lines are not a documented interface). A release that changes one breaks a
test of `tests/test_load_batches.py` or `tests/test_read_side_without_tensorflow.py`.
"""

from __future__ import annotations

import sys
import types

# The data server's log line after each pass over the logdir (at RUST_LOG=info).
LOAD_FINISHED = "Finished load cycle"


def read_without_tensorflow() -> None:
    """Make TensorBoard use its own TensorFlow stub (`tensorboard.compat.tf`), which reads local
    files ~2 s faster than importing TensorFlow and prints nothing. TensorBoard picks the stub when
    the module `tensorboard.compat.notf` exists. No-op once TensorFlow is imported."""
    if "tensorflow" not in sys.modules:
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
