"""Diagnoses per run, recomputed only when the run has new data.

A first look at a big logdir (100 runs of 100,000 steps) takes ~20 s to diagnose in full:
the runs route waits at most ANSWER_WITHIN_SECONDS, answers with what is done, and lets the
rest finish in the background for the next poll (a run with new data keeps showing its
previous diagnosis until the new one is ready).

Every read goes through the data provider with the request context (`ctx`) of the request
that asked for it; a background diagnosis keeps the context of the request that started it.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

from tensorboard import context as tb_context

from tb_trainhealth.diagnosis import Diagnosis, diagnose_run
from tb_trainhealth.read.reader import RunGroup, SignalReader

WORKERS = 4
ANSWER_WITHIN_SECONDS = 2.0
# Shared by every experiment's cache: reading waits on the data provider (gRPC to the Rust
# data server, or file I/O), so a few runs are read at a time.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="tb-trainhealth-diagnose")


class DiagnosisCache:
    """Keyed by run; a run's fingerprint (`SignalReader.last_step`) decides staleness, and
    the clock for a run whose verdict changes with time alone (`Diagnosis.recheck_at`).

    The lock guards the dictionaries only: nobody waits for a diagnosis while holding it.
    A diagnosis under way is never superseded (a run written faster than it is diagnosed
    would stay pending forever): it finishes, is shown, and a newer one starts after it.
    """

    def __init__(self, reader: SignalReader):
        self._reader = reader
        self._lock = threading.Lock()
        self._cache: dict[str, Diagnosis] = {}
        self._running: dict[str, concurrent.futures.Future] = {}

    def all(self, ctx: tb_context.RequestContext) -> tuple[list[Diagnosis], list[RunGroup]]:
        """(diagnoses, runs not diagnosed yet): the latter are still being read and diagnosed."""
        with self._lock:
            groups = self._reader.groups(ctx)
            names = {g.name for g in groups}
            self._cache = {name: d for name, d in self._cache.items() if name in names}
            self._running = {name: f for name, f in self._running.items() if name in names}
            started = [(group, self._start(group, ctx)) for group in groups]
            # Only runs never diagnosed are waited for: a run with new data shows its last
            # diagnosis at once (while TensorBoard's loader is still reading a big logdir,
            # every poll would otherwise wait for the runs it just read more of).
            first_looks = [f for group, f in started if f is not None and group.name not in self._cache]
        concurrent.futures.wait(first_looks, timeout=ANSWER_WITHIN_SECONDS)
        with self._lock:
            diagnoses, pending = [], []
            for group in groups:
                diagnosis = self._collect(group)
                if diagnosis is not None:
                    diagnoses.append(diagnosis)
                else:
                    pending.append(group)
            return diagnoses, pending

    def names(self, ctx: tb_context.RequestContext) -> list[str]:
        """Every run TensorBoard lists (diagnosed or not): a listing, no diagnosis."""
        with self._lock:
            return [group.name for group in self._reader.groups(ctx)]

    def one(self, run: str, ctx: tb_context.RequestContext) -> Diagnosis | None:
        """A fresh diagnosis of `run`, computed on the caller's thread if need be."""
        with self._lock:
            group = next((g for g in self._reader.groups(ctx) if g.name == run), None)
            if group is None:
                return None
            self._collect(group)
            fresh = self._fresh(group)
        if fresh is not None:
            return fresh
        diagnosis = diagnose_run(self._reader, group, ctx)
        with self._lock:
            self._cache[run] = diagnosis
        return diagnosis

    def _fresh(self, group: RunGroup) -> Diagnosis | None:
        cached = self._cache.get(group.name)
        if (
            cached is not None
            and cached.fingerprint == self._reader.last_step(group)
            and cached.group == group
            and not cached.stale(time.time())
        ):
            return cached
        return None

    def _start(self, group: RunGroup, ctx: tb_context.RequestContext) -> concurrent.futures.Future | None:
        """The background diagnosis of `group` under way, started unless its diagnosis is fresh."""
        running = self._running.get(group.name)
        if running is not None and not running.done():
            return running
        self._collect(group)
        if self._fresh(group) is not None:
            return None
        future = _POOL.submit(diagnose_run, self._reader, group, ctx)
        self._running[group.name] = future
        return future

    def _collect(self, group: RunGroup) -> Diagnosis | None:
        """The newest finished diagnosis of `group` (possibly of older data), or None."""
        running = self._running.get(group.name)
        if running is not None and running.done():
            del self._running[group.name]
            self._cache[group.name] = running.result()  # diagnose() never raises
        return self._cache.get(group.name)
