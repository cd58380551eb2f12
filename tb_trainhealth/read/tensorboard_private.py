"""Every use of TensorBoard behaviour that is not its public API, in one place.

Checked on TensorBoard 2.21 with tensorboard-data-server 0.7.2 (the data server's command-line
flags and log lines are not a documented interface). A release that changes one breaks a
test of `tests/test_framework_adapters.py` (every flag in the server's `--help`),
`tests/test_load_batches.py` or `tests/test_read_side_without_tensorflow.py`.
"""

from __future__ import annotations

import os
import sys
import types

# The data server's log line after each pass over the logdir (at RUST_LOG=info).
LOAD_FINISHED = "Finished load cycle"
# The environment that makes the data server log LOAD_FINISHED (a user's RUST_LOG=warn would hide it).
DATA_SERVER_LOG_LEVEL = {"RUST_LOG": "info"}


def data_server_command(
    binary: str, logdir: str, reload_seconds: int | None, samples: dict[str, int], scratch: str
) -> list[str]:
    """The data server's command line: load `logdir` once (or every `reload_seconds`) keeping
    `samples` points per plugin (0: all), on a free port written to a file in `scratch`, errors
    to another, until its stdin closes; `--verbose` logs LOAD_FINISHED. The flags TensorBoard's
    own `server_ingester` passes."""
    per_plugin = ",".join(f"{plugin}={'all' if n == 0 else n}" for plugin, n in samples.items())
    return [
        binary, f"--logdir={logdir}", f"--reload={reload_seconds or 'once'}", f"--samples-per-plugin={per_plugin}",
        "--port=0", f"--port-file={data_server_port_file(scratch)}", f"--error-file={os.path.join(scratch, 'error')}",
        "--die-after-stdin", "--verbose",
    ]  # fmt: skip


def data_server_port_file(scratch: str) -> str:
    """Where `data_server_command`'s server writes the port it listens on."""
    return os.path.join(scratch, "port")


def read_without_tensorflow() -> None:
    """Make TensorBoard use its own TensorFlow stub (`tensorboard.compat.tf`), which reads local
    files ~2 s faster than importing TensorFlow and prints nothing. TensorBoard picks the stub when
    the module `tensorboard.compat.notf` exists. No-op once TensorFlow is imported."""
    if "tensorflow" not in sys.modules:
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
