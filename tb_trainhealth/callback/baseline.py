"""`HealthCallback(baseline=...)`: this run, as recorded so far, against a known-good run on disk.

The comparison itself is the read side's (`tb_trainhealth.compare`); this module only turns it
into the event the run keeps, so `diagnose`, `watch` and the Health tab see the same verdict.
A baseline that cannot be read is an `unknown` verdict with the reason, never an error.
"""

from __future__ import annotations

from tb_trainhealth import engine
from tb_trainhealth.contract.events import ComparisonEvent
from tb_trainhealth.signals import RunSignals


def compare_with_baseline(run: RunSignals, baseline_dir: str, step: int) -> ComparisonEvent:
    # Here, not at import: a callback without a baseline never loads the read side's loaders.
    from tb_trainhealth.compare.comparison import CODE, compare
    from tb_trainhealth.compare.noise import Verdict
    from tb_trainhealth.compare.runs import RunNotComparable, diagnosed_directory

    try:
        baseline = diagnosed_directory(baseline_dir, "baseline")
    except RunNotComparable as err:
        return ComparisonEvent(step=step, baseline=baseline_dir, verdict=Verdict.UNKNOWN.value, why=str(err))
    comparison = compare(run, baseline.signals, engine.diagnose(run, final=True), baseline.findings)
    finding = next((f for f in comparison.findings if f.code == CODE), None)
    return ComparisonEvent(
        step=step,
        baseline=comparison.baseline,
        verdict=comparison.verdict.value,
        why=comparison.why,
        finding=finding.to_dict() if finding is not None else None,
    )
