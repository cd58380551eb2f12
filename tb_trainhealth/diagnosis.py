"""One run's diagnosis as the CLI and the tab show it: read by a `SignalReader`, judged by the engine."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from tensorboard import context as tb_context

from tb_trainhealth import engine
from tb_trainhealth.findings import Finding, run_status
from tb_trainhealth.read.reader import RunGroup, SignalReader
from tb_trainhealth.rules.stalls import judged_again_at
from tb_trainhealth.signals import RunSignals

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Diagnosis:
    group: RunGroup
    signals: RunSignals
    findings: list[Finding]
    errors: list[str]
    fingerprint: tuple[int, float, int]  # how far the data went (`SignalReader.last_step`)
    # Wall time after which the same data gets another diagnosis (a silent run ends
    # abruptly once its allowance has passed); None: only new data changes it.
    recheck_at: float | None = None

    def stale(self, now: float) -> bool:
        return self.recheck_at is not None and now >= self.recheck_at

    @property
    def status(self) -> str:
        return run_status(self.findings)


def diagnose_run(
    reader: SignalReader,
    group: RunGroup,
    ctx: tb_context.RequestContext | None = None,
    clock: Callable[[], float] = time.time,
) -> Diagnosis:
    """Read and diagnose one run; a run that cannot be read gets an error, never an exception.

    clock: the wall-clock time of the diagnosis (Unix seconds); a run that stopped writing is
    judged against it (tests pass their own)."""
    fingerprint = reader.last_step(group)
    recheck_at = None
    try:
        signals = reader.read(group, ctx)
        signals.now = clock()
        findings = engine.diagnose(signals)
        errors = list(signals.errors)
        recheck_at = judged_again_at(signals)
    except Exception as err:  # one bad run never hides the others
        logger.debug("could not diagnose run %r", group.name, exc_info=True)
        signals, findings, errors = RunSignals(group.name), [], [f"could not read run: {err}"]
    return Diagnosis(group, signals, findings, errors, fingerprint, recheck_at)
