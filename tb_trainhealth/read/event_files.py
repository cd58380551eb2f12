"""Event files that TensorBoard cannot read (in full), found so they are reported, never hidden.

TensorBoard's loaders skip what they cannot read without a word to the user: the Python
loader stops reading a file at its first bad or incomplete record (logged at debug level),
the Rust data server stops at a bad length checksum (a log line nobody sees), passes records
whose data checksum is wrong, and lists no run at all for a directory whose only file is
garbage. This module walks the TFRecord framing of every event file under a local logdir
(8-byte length, masked CRC-32C of the length, data, masked CRC-32C of the data: the format of
TensorFlow's `RecordWriter`) and says, per file, what is wrong in plain words.

A file that ends inside a record is normal while its writer is still writing (it flushes whole
buffers, not whole records): that is a `partial_live` note when the file was modified within
LIVE_SECONDS, else a `truncated` error (the writing process died mid-record). Unless the file
was modified long after its last complete event (COPY_GAP_SECONDS): then no writer cut it
mid-write, it is a `truncated_copy` (a copy or sync cut short), a note that claims neither live
writing nor a dead writer.

Checked files are remembered by (device, inode) with the offset up to which they were good,
so a re-check (the plugin's, every listing) only reads what was appended since.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
import time

from tb_trainhealth.contract import stall
from tb_trainhealth.run_paths import training_run_of

try:  # C implementation: ~1 GB/s; the pure-Python fallback would take minutes per big file
    from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - google-crc32c is an install requirement
    _crc32c = None

# A file modified within this many seconds may still be written: an incomplete last record is normal.
LIVE_SECONDS = 300.0
# A writer that stops mid-record leaves its file's mtime within its flush interval of its last
# complete event (tf.summary's and TensorBoard's writers flush every 120 s). A file that ends
# mid-record and was modified more than this after its last complete event was cut after the
# fact: a truncated copy. The default stall allowance (contract.stall): past it a run that wrote
# nothing would count as stalled, so such a file is not a live run's either.
COPY_GAP_SECONDS = stall.DEFAULT_STALL_SECONDS
# Kinds of problem (stable strings: the CLI's JSON and the tab's runs route carry them).
UNREADABLE = "unreadable"  # nothing in the file can be read (not an event file, or garbage from byte 0)
CORRUPT = "corrupt"  # a record fails its checksum: TensorBoard reads the file only up to there, or misreads it
TRUNCATED = "truncated"  # the file ends inside a record and is not written any more (the writer died)
PARTIAL_LIVE = "partial_live"  # the file ends inside a record while it is still being written: normal
TRUNCATED_COPY = "truncated_copy"  # ends inside a record, modified long after its last event: a cut copy
ERROR_KINDS = (UNREADABLE, CORRUPT, TRUNCATED)
NOTE_KINDS = (PARTIAL_LIVE, TRUNCATED_COPY)  # what a reader may want to know; the file is not broken
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_CHUNK = 1 << 24  # bytes read at a time
# Bytes of one file walked per check: the walk takes a Python step per record, so walking every byte
# of a big logdir (bench/scale.py's ~4.9 GiB) would add to `diagnose` what it should not spend on
# files that are fine. Damage shows at a file's start (garbage, the wrong file) or at its end (a
# writer killed mid-record); files bigger than this are walked from the start this far per check,
# and the plugin's next checks (every listing, in the background) go on from there to the end. The
# CLI's single pass reads this much of each file.
BYTES_PER_CHECK = 8 << 20


def is_event_file(name: str) -> bool:
    """TensorBoard's own test (`io_wrapper.IsTensorFlowEventsFile`): 'tfevents' in the name."""
    return "tfevents" in name


def framed(data: bytes) -> bytes:
    """One record as an event file holds it (what `check` walks): the format's one writer here, for
    tools that write event files by hand (bench/synthetic_logs.py, tests of damaged files)."""
    length = struct.pack("<Q", len(data))
    return b"".join((length, _CRC.pack(_masked_crc(length)), data, _CRC.pack(_masked_crc(data))))


def _masked_crc(data) -> int:
    crc = _crc32c(data) if _crc32c is not None else _slow_crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _slow_crc32c(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c

    return crc32c(data)


@dataclasses.dataclass(frozen=True)
class FileProblem:
    file: str  # path relative to the logdir, "/"-separated
    kind: str  # UNREADABLE, CORRUPT, TRUNCATED or PARTIAL_LIVE
    error: str  # what is wrong, in plain words

    @property
    def is_error(self) -> bool:
        return self.kind in ERROR_KINDS

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "error": self.error, "kind": self.kind}

    def text(self) -> str:
        return f"{self.file}: {self.error}"


@dataclasses.dataclass
class _Scan:
    """How far one file is known good; `problem` is what stopped the walk there (None: clean)."""

    good_bytes: int = 0
    records: int = 0
    size: int = 0
    mtime: float = 0.0
    problem: tuple[str, str] | None = None  # (kind, error) before the live/finished decision
    at_end: bool = False  # the walk reached the file's end (else it stopped at BYTES_PER_CHECK)
    last_record_at: int = -1  # offset of the last complete record (-1: none yet)
    last_event_time: float | None = None  # its wall time, read when the file ends inside a record


def _walk(path: str, scan: _Scan) -> None:
    """Continue the framing walk of `path` from scan.good_bytes, to its end or BYTES_PER_CHECK
    bytes on (CPU: a Python step per record)."""
    scan.problem, scan.at_end = None, False
    stop_at = scan.good_bytes + BYTES_PER_CHECK
    good_headers: set[bytes] = set()
    with open(path, "rb") as f:
        f.seek(scan.good_bytes)
        buffer, pos = b"", 0  # buffer[pos] is the file's byte at scan.good_bytes
        while True:
            if len(buffer) - pos < _HEADER.size:
                buffer, pos = buffer[pos:] + f.read(_CHUNK), 0
                if len(buffer) == 0:
                    scan.at_end = True
                    return
                if len(buffer) < _HEADER.size:
                    scan.problem = (TRUNCATED, f"ends inside a record's header ({len(buffer)} of 12 bytes)")
                    scan.last_event_time = _event_time(f, scan.last_record_at)
                    return
            header = buffer[pos : pos + _HEADER.size]
            if header not in good_headers:  # records of one kind repeat their length: checked once
                length, length_crc = _HEADER.unpack(header)
                if _masked_crc(header[:8]) != length_crc:
                    scan.problem = (CORRUPT, "the record's length fails its checksum")
                    return
                good_headers.add(header)
            length = _HEADER.unpack(header)[0]
            start = pos + _HEADER.size
            end = start + length
            if end + _CRC.size > len(buffer):
                buffer, pos = buffer[pos:] + f.read(max(_CHUNK, end + _CRC.size - len(buffer))), 0
                if _HEADER.size + length + _CRC.size > len(buffer):
                    have = len(buffer) - _HEADER.size
                    scan.problem = (TRUNCATED, f"ends inside a record ({have} of {length + 4} bytes)")
                    scan.last_event_time = _event_time(f, scan.last_record_at)
                    return
                continue
            if _masked_crc(buffer[start:end]) != _CRC.unpack_from(buffer, end)[0]:
                scan.problem = (CORRUPT, "the record's data fails its checksum")
                return
            scan.last_record_at = scan.good_bytes
            scan.good_bytes += end + _CRC.size - pos
            scan.records += 1
            pos = end + _CRC.size
            if scan.good_bytes >= stop_at:
                return


def _event_time(f, offset: int) -> float | None:
    """Wall time of the complete record at `offset` (None: no record, or not an event): what
    tells a truncated copy from a file its writer is still writing."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    if offset < 0:
        return None
    f.seek(offset)
    length = _HEADER.unpack(f.read(_HEADER.size))[0]
    try:
        wall_time = event_pb2.Event.FromString(f.read(length)).wall_time
    except DecodeError:
        return None
    return wall_time or None


def _age_text(seconds: float) -> str:
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.0f} days"


def _copy_gap(scan: _Scan) -> float | None:
    """How much later than its last complete event the file was modified, where that is too long
    for the writer to have cut it mid-write (COPY_GAP_SECONDS); else None."""
    if scan.last_event_time is None:
        return None
    gap = scan.mtime - scan.last_event_time
    return gap if gap > COPY_GAP_SECONDS else None


def _problem(relpath: str, scan: _Scan, now: float) -> FileProblem | None:
    if scan.problem is None:
        return None
    kind, what = scan.problem
    rest = scan.size - scan.good_bytes
    if kind == TRUNCATED:
        gap = _copy_gap(scan)
        if gap is not None:
            return FileProblem(
                relpath,
                TRUNCATED_COPY,
                f"the file {what}: a truncated copy, not a live run (its last complete event is "
                f"{_age_text(gap)} older than the file); the {scan.records} complete record(s) before the cut are "
                "read, what followed them (the run's end, if it had one) is not in this copy",
            )
        if now - scan.mtime < LIVE_SECONDS:
            return FileProblem(
                relpath, PARTIAL_LIVE, f"last record incomplete while the file is still written ({what})"
            )
        return FileProblem(
            relpath,
            TRUNCATED,
            f"truncated: the file {what}; the writing process likely died mid-write "
            f"({scan.records} complete record(s) before it are read)",
        )
    if scan.records == 0:
        return FileProblem(
            relpath,
            UNREADABLE,
            f"unreadable: {what} in its very first record, so nothing in this file can be read "
            "(not an event file, or damaged from its start)",
        )
    return FileProblem(
        relpath,
        CORRUPT,
        f"corrupt at byte {scan.good_bytes} (record {scan.records + 1}): {what}; TensorBoard reads at most "
        f"the {scan.records} record(s) before it, the remaining {rest} byte(s) may be lost or misread",
    )


class EventFileChecker:
    """Checks every event file under a local logdir; `check()` again goes on from where each file
    was known good (a file not walked to its end yet, or one that grew), never re-reading it."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._scans: dict[tuple[int, int, str], _Scan] = {}
        self._lock = threading.Lock()

    def check(self, now: float | None = None) -> dict[str, list[FileProblem]]:
        """{TensorBoard run name (directory relative to the logdir, "." for itself): problems}."""
        with self._lock:
            now = time.time() if now is None else now
            problems: dict[str, list[FileProblem]] = {}
            seen = set()
            for directory, _, names in os.walk(self.logdir):
                for name in sorted(n for n in names if is_event_file(n)):
                    path = os.path.join(directory, name)
                    try:
                        stat = os.stat(path)
                        key = (stat.st_dev, stat.st_ino, path)
                        scan = self._scans.get(key)
                        changed = scan is None or (scan.size, scan.mtime) != (stat.st_size, stat.st_mtime)
                        if changed or not scan.at_end:
                            if scan is None or stat.st_size < scan.size or (changed and stat.st_size == scan.size):
                                scan = _Scan()  # new, or rewritten (writers only append): from the start
                            scan.size, scan.mtime = stat.st_size, stat.st_mtime
                            _walk(path, scan)  # from where it was known good
                        problem = _problem(self._relpath(path), scan, now)
                    except OSError as err:
                        problem = FileProblem(self._relpath(path), UNREADABLE, f"cannot read: {err.strerror or err}")
                        key, scan = None, None
                    if key is not None:
                        seen.add(key)
                        self._scans[key] = scan
                    if problem is not None:
                        run = self._relpath(directory)
                        problems.setdefault(run, []).append(problem)
            self._scans = {k: v for k, v in self._scans.items() if k in seen}
            return problems

    def _relpath(self, path: str) -> str:
        return os.path.relpath(path, self.logdir).replace(os.sep, "/")


def check_logdir(logdir: str, now: float | None = None) -> dict[str, list[FileProblem]]:
    """Problems of every event file under a local logdir, by TensorBoard run name (one pass)."""
    return EventFileChecker(logdir).check(now)


def group_name(run: str, groups: set[str]) -> str:
    """The run group (as `reader.group_runs` forms them) that a TensorBoard run belongs to:
    Keras' `D/train` and `D/validation` are part of `D`, unless it is listed on its own."""
    return training_run_of(run, standalone=groups)[0]


def by_group(problems: dict[str, list[FileProblem]], groups: set[str]) -> dict[str, list[FileProblem]]:
    out: dict[str, list[FileProblem]] = {}
    for run, found in sorted(problems.items()):
        out.setdefault(group_name(run, groups), []).extend(found)
    return out


class BackgroundChecker:
    """The tab's view of a logdir's event files: a check at most every `ttl` seconds, on a
    thread of its own (each check walks up to BYTES_PER_CHECK more of every file),
    so a route waits at most `wait` seconds and otherwise answers with the last result."""

    def __init__(self, logdir: str, ttl: float):
        self._checker = EventFileChecker(logdir)
        self._ttl = ttl
        self._lock = threading.Lock()
        self._result: dict[str, list[FileProblem]] = {}
        self._checked_at = -float("inf")
        self._running: threading.Thread | None = None

    def latest(self, wait: float) -> dict[str, list[FileProblem]]:
        with self._lock:
            if time.monotonic() - self._checked_at >= self._ttl and (
                self._running is None or not self._running.is_alive()
            ):
                self._running = threading.Thread(target=self._check, name="tb-trainhealth-files", daemon=True)
                self._running.start()
            first_look = self._checked_at == -float("inf")
            running = self._running
        if first_look and running is not None:
            running.join(wait)
        with self._lock:
            return self._result

    def _check(self) -> None:
        started = time.monotonic()
        try:
            result = self._checker.check()
        except OSError:  # the logdir itself went away: nothing to say about its files
            result = {}
        with self._lock:
            self._result, self._checked_at = result, started
