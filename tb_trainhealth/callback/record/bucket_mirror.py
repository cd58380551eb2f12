"""A run in a bucket, written through a local folder and uploaded with fsspec.

An object in a bucket cannot be appended to: TensorFlow's own gs:// writer re-sends the whole
file on every flush, and TensorFlow 2.21 has no s3:// filesystem at all. So where fsspec has the
scheme (s3fs, gcsfs), the summary writer writes into a local folder and each event file that
grew is uploaded whole, at most every UPLOAD_SECONDS while training and at once when the writer
flushes for good (end of fit, a crash, a stall). Readers see a file that only ever grows, each
upload ending on a record boundary (uploads follow an explicit flush on the writer's thread).
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref

from tb_trainhealth import storage
from tb_trainhealth.run_paths import is_local

# How often a growing event file is re-sent while training: TensorBoard re-reads every 30 s.
UPLOAD_SECONDS = 10.0


class BucketMirror:
    """The local folder `local_dir` mirrored to the bucket folder `url`."""

    def __init__(self, url: str):
        import fsspec

        self.url = url.rstrip("/")
        self._fs, self._root = fsspec.core.url_to_fs(self.url)
        self.local_dir = tempfile.mkdtemp(prefix="tb-trainhealth-upload-")
        self._sent: dict[str, int] = {}  # file name -> bytes uploaded
        self._last_upload = -math.inf
        self._lock = threading.Lock()
        _LIVE.add(self)

    def due(self) -> bool:
        return time.monotonic() - self._last_upload >= UPLOAD_SECONDS

    def upload(self) -> None:
        """Send every file that grew since its last upload, whole."""
        with self._lock:
            self._last_upload = time.monotonic()
            for name in sorted(os.listdir(self.local_dir)):
                path = os.path.join(self.local_dir, name)
                size = os.path.getsize(path)
                if self._sent.get(name) == size:
                    continue
                try:
                    self._fs.put_file(path, f"{self._root}/{name}")
                except Exception as err:
                    raise OSError(f"could not upload {name} to {self.url} (kept in {self.local_dir}): {err!r}") from err
                self._sent[name] = size

    def finish(self) -> None:
        """The last upload; the local copy is deleted only once everything is in the bucket."""
        self.upload()
        shutil.rmtree(self.local_dir, ignore_errors=True)
        _LIVE.discard(self)


# Mirrors whose writer is still open. An event file is closed only once its fit has been over a
# while (`recording`), which a script that ends with its fit never waits for: at exit, after
# HealthCallback's own hooks flushed (registered later, so run earlier), each is sent and removed.
_LIVE: weakref.WeakSet[BucketMirror] = weakref.WeakSet()


def _finish_all() -> None:
    for mirror in list(_LIVE):
        try:
            mirror.finish()
        except Exception as err:
            print(f"tb-trainhealth: {err}", file=sys.stderr)


atexit.register(_finish_all)


def for_log_dir(log_dir: str) -> BucketMirror | None:
    """A mirror for a bucket fsspec can write here; None where TensorFlow writes `log_dir` itself
    (a local path, or a scheme fsspec lacks here: `writable_problem` said whether TF has it)."""
    return BucketMirror(log_dir) if storage.fsspec_writable(log_dir) else None


def writable_problem(log_dir: str) -> str | None:
    """Why HealthCallback cannot write `log_dir` here (with what to install), or None."""
    if is_local(log_dir) or storage.fsspec_writable(log_dir):
        return None
    import tensorflow as tf

    try:
        tf.io.gfile.exists(log_dir)
    except tf.errors.UnimplementedError:
        return storage.unreachable(log_dir, f"HealthCallback(log_dir={log_dir!r})")
    except Exception:  # TensorFlow has the scheme; a refused request shows on the first write
        return None
    return None
