"""Diagnoses per run, recomputed only when the run has new data."""

from __future__ import annotations

import concurrent.futures
import threading

from tb_trainhealth.reader import Diagnosis, RunGroup, SignalReader

WORKERS = 4


class DiagnosisCache:
    """Keyed by run; a run's fingerprint (last step, last wall time) decides staleness."""

    def __init__(self, reader: SignalReader):
        self._reader = reader
        self._lock = threading.Lock()
        self._cache: dict[str, Diagnosis] = {}

    def all(self) -> list[Diagnosis]:
        with self._lock:
            groups = self._reader.groups()
            # Reading waits on the data provider (gRPC to the Rust data server, or file I/O):
            # stale runs are diagnosed a few at a time.
            with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
                diagnoses = list(pool.map(self._get, groups))
            self._cache = {d.group.name: d for d in diagnoses}
            return diagnoses

    def one(self, run: str) -> Diagnosis | None:
        with self._lock:
            for group in self._reader.groups():
                if group.name == run:
                    self._cache[run] = self._get(group)
                    return self._cache[run]
            return None

    def _get(self, group: RunGroup) -> Diagnosis:
        cached = self._cache.get(group.name)
        if cached is not None and cached.fingerprint == self._reader.last_step(group) and cached.group == group:
            return cached
        return self._reader.diagnose(group)
