"""Which library reaches a bucket (s3://, gs://) here, and what to install where none does.

Both sides use it and neither imports TensorFlow through it. The write side uploads through
fsspec (s3fs, gcsfs), the read side reads through TensorBoard's own filesystems without
TensorFlow (boto3 for s3://, fsspec for the rest): TensorFlow 2.21 has no s3:// filesystem,
and its gs:// one (like TensorBoard's data server) talks to storage.googleapis.com only.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from tb_trainhealth.run_paths import is_local

# scheme -> the extra that brings what both sides need for it.
EXTRAS = {"s3": "s3", "gs": "gcs", "gcs": "gcs"}
# scheme -> the modules that extra brings: fsspec's implementation first (writes), then any other
# module TensorBoard reads the scheme with.
MODULES = {"s3": ("s3fs", "boto3"), "gs": ("gcsfs",), "gcs": ("gcsfs",)}


def scheme(url: str) -> str:
    """'s3' for 's3://bucket/logs'; '' for a local path."""
    return "" if is_local(url) else url.split("://", 1)[0].lower()


def requirement(url: str) -> str:
    """What to pip install for `url`'s scheme: "tb-trainhealth[s3]"; "" where none is known."""
    name = scheme(url)
    return f"tb-trainhealth[{EXTRAS[name]}]" if name in EXTRAS else ""


def install_hint(url: str) -> str:
    """The command that makes `url` reachable, or why nothing tested does."""
    if requirement(url):
        return f"pip install '{requirement(url)}'"
    return f"tb-trainhealth is tested with s3:// and gs:// only; no library for {scheme(url)}:// is known to it"


def missing_modules(url: str) -> list[str]:
    """The modules `url`'s scheme needs that are not installed ([] for a local path)."""
    name = scheme(url)
    if not name:
        return []
    needed = MODULES.get(name)
    if needed is None:  # untested here: left to TensorFlow's filesystems
        return [f"a library tested with {name}://"]
    return [module for module in needed if importlib.util.find_spec(module) is None]


def fsspec_writable(url: str) -> bool:
    """Whether fsspec can write `url` here: a tested scheme whose implementation is installed."""
    name = scheme(url)
    return name in MODULES and _fsspec_knows(name)


def readable_without_tensorflow(url: str) -> bool:
    """Whether TensorBoard's own filesystems (its TensorFlow stub) read `url` here."""
    return is_local(url) or not missing_modules(url)


def unreachable(url: str, by: str) -> str:
    """A sentence for a bucket `by` cannot reach here, with what to install."""
    missing = missing_modules(url) if scheme(url) in MODULES else []
    lacking = f" ({', '.join(missing)} not installed)" if missing else ""
    return f"{by} cannot reach {url}: nothing here reads or writes {scheme(url)}://{lacking}; {install_hint(url)}"


def reader_problem(url: str, tb_tf: Any) -> str | None:
    """Why TensorBoard's loader cannot read the bucket `url` here (with what to do), or None.
    `tb_tf`: `tensorboard.compat.tf`, TensorFlow or TensorBoard's stub of it, whichever loads."""
    if is_local(url):
        return None
    try:
        tb_tf.io.gfile.exists(url)
    except (ImportError, ValueError, tb_tf.errors.UnimplementedError):
        pass  # the stub has no filesystem for the prefix; TensorFlow: "scheme not implemented"
    except Exception:  # the scheme is there; a refused request is told where it happens
        return None
    else:
        return None
    if getattr(tb_tf, "__version__", "stub") != "stub" and not missing_modules(url):
        return (
            f"TensorBoard cannot read {url}: where TensorFlow is installed TensorBoard reads through it, and "
            f"TensorFlow has no {scheme(url)}:// filesystem. Start TensorBoard from an environment without "
            f"TensorFlow: pip install tensorboard '{requirement(url)}'"
        )
    return unreachable(url, "TensorBoard")


def _fsspec_knows(name: str) -> bool:
    if importlib.util.find_spec("fsspec") is None:
        return False
    import fsspec

    try:
        fsspec.get_filesystem_class(name)
    except (ImportError, ValueError):
        return False
    return True
