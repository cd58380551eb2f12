"""One run's diagnosis as the CLI and the tab show it: read by a `SignalReader`, judged by the engine."""

from __future__ import annotations

import dataclasses
import logging

from tensorboard import context as tb_context

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
    fingerprint: tuple[int, float]  # how far the data went (last step, last wall time)

    @property
    def status(self) -> str:
        return run_status(self.findings)


def diagnose_run(reader: SignalReader, group: RunGroup, ctx: tb_context.RequestContext | None = None) -> Diagnosis:
    """Read and diagnose one run; a run that cannot be read gets an error, never an exception."""
    fingerprint = reader.last_step(group)
    try:
        signals = reader.read(group, ctx)
        findings = engine.diagnose(signals)
        errors = list(signals.errors)
    except Exception as err:  # one bad run never hides the others
        logger.debug("could not diagnose run %r", group.name, exc_info=True)
        signals, findings, errors = RunSignals(group.name), [], [f"could not read run: {err}"]
    return Diagnosis(group, signals, findings, errors, fingerprint)
