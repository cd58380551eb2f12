"""Diagnoses per run, recomputed only when the run has new data."""

from __future__ import annotations

import dataclasses
import logging
import threading

from tb_trainhealth import engine
from tb_trainhealth.findings import Finding, run_status
from tb_trainhealth.reader import RunGroup, SignalReader
from tb_trainhealth.signals import RunSignals

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Diagnosis:
    group: RunGroup
    signals: RunSignals
    findings: list[Finding]
    errors: list[str]
    fingerprint: tuple[int, float]

    @property
    def status(self) -> str:
        return run_status(self.findings)


class DiagnosisCache:
    """Keyed by run; a run's fingerprint (last step, last wall time) decides staleness."""

    def __init__(self, reader: SignalReader):
        self._reader = reader
        self._lock = threading.Lock()
        self._cache: dict[str, Diagnosis] = {}

    def all(self) -> list[Diagnosis]:
        with self._lock:
            groups = self._reader.groups()
            fresh = {}
            for group in groups:
                fresh[group.name] = self._get(group)
            self._cache = fresh
            return list(fresh.values())

    def one(self, run: str) -> Diagnosis | None:
        with self._lock:
            for group in self._reader.groups():
                if group.name == run:
                    diagnosis = self._get(group)
                    self._cache[run] = diagnosis
                    return diagnosis
            return None

    def _get(self, group: RunGroup) -> Diagnosis:
        fingerprint = self._reader.last_step(group)
        cached = self._cache.get(group.name)
        if cached is not None and cached.fingerprint == fingerprint and cached.group == group:
            return cached
        try:
            signals = self._reader.read(group)
            findings = engine.diagnose(signals)
            errors = list(signals.errors)
        except Exception as err:  # one bad run never hides the others
            logger.exception("tb-trainhealth: could not diagnose run %r", group.name)
            signals, findings, errors = RunSignals(group.name), [], [f"could not read run: {err}"]
        return Diagnosis(group, signals, findings, errors, fingerprint)
