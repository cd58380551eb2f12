"""A run in a bucket, written through a local folder and uploaded with fsspec on a thread of its own.

An object in a bucket cannot be appended to: TensorFlow's own gs:// writer re-sends the whole
file on every flush, and TensorFlow 2.21 has no s3:// filesystem at all. So where fsspec has the
scheme (s3fs, gcsfs), the summary writer writes into a local folder and each event file that
grew is uploaded whole. Readers see a file that only ever grows, each upload ending on a record
boundary: the writer flushes, notes each file's size (`BucketMirror.flushed`), and the uploader
sends a copy of that many bytes.

Uploading never holds up training: each mirror has its own daemon thread that sends, while the
writer's and the training thread only note sizes. One upload at a time: a periodic one is due
UPLOAD_SECONDS after the last (or UPLOAD_SPACING times its duration, for a large file) and not
while one runs; a flush (end of fit, a crash, a stall) asks for one at once, run after the one
under way. At exit the last upload gets FINAL_UPLOAD_SECONDS; past them, or where it failed, one
line says where the run is kept (with the command that sends it), and the process exits.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 (its exit hook registered before ours)
import math
import os
import shutil
import sys
import tempfile
import threading
import time

from tb_trainhealth import storage
from tb_trainhealth.run_paths import is_local

# How often a growing event file is re-sent while training, at most: TensorBoard re-reads every 30 s.
UPLOAD_SECONDS = 10.0
# Uploads start at least this many times the last one's duration apart: a file large enough to
# take long to send keeps the uploader (and the network) busy a fifth of the time at most.
UPLOAD_SPACING = 4.0
# How long the process waits at exit for the last uploads (a network outage: retries for minutes).
FINAL_UPLOAD_SECONDS = 30.0


class BucketMirror:
    """The local folder `local_dir` mirrored to the bucket folder `url` by a daemon thread."""

    def __init__(self, url: str):
        import fsspec

        self.url = url.rstrip("/")
        self._fs, self._root = fsspec.core.url_to_fs(self.url)
        self._home = tempfile.mkdtemp(prefix="tb-trainhealth-upload-")
        self.local_dir = os.path.join(self._home, "run")
        os.mkdir(self.local_dir)
        self._flushed: dict[str, int] = {}  # file name -> size at its last flush (a record boundary)
        self._sent: dict[str, int] = {}  # file name -> bytes uploaded (the uploader's own)
        self._next_due = -math.inf
        self._asked = self._answered = 0  # uploads asked for; the latest ask an upload answered
        self._error: Exception | None = None  # of the latest upload
        self._closed = self._gone = self._at_exit = self._told = False
        self._state = threading.Condition()
        _LIVE.add(self)
        threading.Thread(target=self._upload_forever, name="tb-trainhealth-upload", daemon=True).start()

    def due(self) -> bool:
        """Whether the writer should flush for a periodic upload: none asked or under way, and spaced."""
        with self._state:
            return self._answered == self._asked and time.monotonic() >= self._next_due

    def flushed(self) -> None:
        """Just after the writer flushed every file here: their sizes end on a record boundary;
        ask for an upload of them (after the one under way, if any). Returns at once. Nothing once the
        run is all sent and its local copy gone (a writer closed after the exit's last upload)."""
        with self._state:  # (the uploader removes the copy only after it says gone, under this lock)
            if self._gone:
                return
            local = self.local_dir
            self._flushed.update({name: os.path.getsize(os.path.join(local, name)) for name in os.listdir(local)})
            self._ask()

    def close(self) -> None:
        """The writer closed its files (flushed): the last upload, then the local copy goes."""
        with self._state:
            self._closed = True
        self.flushed()

    def ask_last(self) -> None:
        """At exit: ask for the last upload (every mirror's at once: then `wait` for each)."""
        with self._state:
            self._closed = self._at_exit = True
            self._ask()

    def wait(self, timeout: float) -> str | None:
        """Wait up to `timeout` for the uploads asked for; None once the run is all in the bucket
        (the local copy removed), else why it is not."""
        with self._state:
            asked = self._asked
            if not self._state.wait_for(lambda: self._answered >= asked, max(0.0, timeout)):
                return f"did not finish within {FINAL_UPLOAD_SECONDS:g} s"
            return None if self._error is None else f"failed: {self._error}"

    def _ask(self) -> None:
        if not self._gone:
            self._asked += 1
            self._state.notify_all()

    def _upload_forever(self) -> None:
        """The uploader: each ask sends the files as flushed by then; asks made during an upload
        are answered by one upload after it. Ends once a closed mirror's files are all sent."""
        while True:
            with self._state:
                self._state.wait_for(lambda: self._asked > self._answered)
                asked, sizes = self._asked, dict(self._flushed)
            started = time.monotonic()
            error = self._send(sizes)
            with self._state:
                self._next_due = time.monotonic() + max(UPLOAD_SECONDS, UPLOAD_SPACING * (time.monotonic() - started))
                self._gone = self._closed and error is None and self._asked == asked
                tell = error is not None and not self._told and not self._at_exit
                self._told |= tell
            if tell:
                print(
                    f"tb-trainhealth: {error}; the run is kept in {self.local_dir} "
                    "(training goes on; it is sent again at the next upload)",
                    file=sys.stderr,
                )
            if self._gone:  # removed before the answer: the process may exit once it is given
                shutil.rmtree(self._home, ignore_errors=True)
                _LIVE.discard(self)
            with self._state:
                self._answered, self._error = (self._asked if self._gone else asked), error
                self._state.notify_all()
            if self._gone:
                return

    def _send(self, sizes: dict[str, int]) -> Exception | None:
        """Each file that grew, whole, as far as its flushed size: a copy of those bytes goes
        (the writer may be appending to the file meanwhile)."""
        for name, size in sorted(sizes.items()):
            if self._sent.get(name) == size:
                continue
            copy = os.path.join(self._home, "sending")
            try:
                _copy_head(os.path.join(self.local_dir, name), copy, size)
                self._fs.put_file(copy, f"{self._root}/{name}")
            except Exception as err:
                return OSError(f"could not upload {name} to {self.url}: {err!r}")
            finally:
                if os.path.exists(copy):
                    os.remove(copy)
            self._sent[name] = size
        return None

    def send_command(self) -> str:
        """What sends the kept local copy to the bucket, to paste."""
        return (
            f"python -c \"import fsspec; fs, to = fsspec.core.url_to_fs('{self.url}'); "
            f"fs.put('{self.local_dir}/', to, recursive=True)\""
        )


def _copy_head(source: str, target: str, size: int) -> None:
    with open(source, "rb") as src, open(target, "wb") as dst:
        while size > 0:
            chunk = src.read(min(size, 1 << 20))
            if not chunk:
                raise OSError(f"{source} is shorter than the {size} bytes flushed")
            dst.write(chunk)
            size -= len(chunk)


# Mirrors whose files are not all in the bucket yet. An event file is closed only once its fit
# has been over a while (`recording`), which a script that ends with its fit never waits for: at
# exit each gets its last upload, all within FINAL_UPLOAD_SECONDS of the first exit hook.
_LIVE: set[BucketMirror] = set()
_REPORTED: set[BucketMirror] = set()  # those whose kept copy was said at exit
_deadline: list[float] = []


def _finish_all() -> None:
    if not _deadline:
        _deadline.append(time.monotonic() + FINAL_UPLOAD_SECONDS)
    mirrors = list(_LIVE)
    for mirror in mirrors:
        mirror.ask_last()
    for mirror in mirrors:
        problem = mirror.wait(_deadline[0] - time.monotonic())
        if problem is not None and mirror not in _REPORTED:
            _REPORTED.add(mirror)
            print(
                f"tb-trainhealth: the last upload to {mirror.url} {problem}; the run is kept in "
                f"{mirror.local_dir}; to send it: {mirror.send_command()}",
                file=sys.stderr,
            )


# First among threading's own exit hooks (latest registered runs first), so before
# concurrent.futures stops taking work (registered at its import, here before ours): s3fs and
# gcsfs need its threads (a DNS lookup). Then again among atexit's, for what HealthCallback's
# own exit hook flushes (a fit that never ended), within the same deadline.
getattr(threading, "_register_atexit", atexit.register)(_finish_all)
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
