"""Every run of a logdir against a baseline: one the user named, or each run's best earlier run of
its own model (`baseline_pick.pick_baseline`). What `tb-trainhealth compare LOGDIR --baseline RUN|best`
prints: one `Pair` per run, the most clearly worse first (`worst_first`). The runs come diagnosed
(each once, by the caller); nothing here reads a file but the markers of runs marked as good.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tb_trainhealth.compare import fix_text
from tb_trainhealth.compare.baseline_pick import Choice, named_choice, pick_baseline
from tb_trainhealth.compare.comparison import Comparison, compare
from tb_trainhealth.compare.noise import SEEDS
from tb_trainhealth.contract.events import Verdict

if TYPE_CHECKING:
    from tb_trainhealth.diagnosis import Diagnosis

# Worst first: a run worse than its baseline, then one that could not be judged, then the same, then better.
VERDICT_ORDER = {Verdict.WORSE: 0, Verdict.UNKNOWN: 1, Verdict.SAME: 2, Verdict.BETTER: 3}


@dataclasses.dataclass(frozen=True)
class Pair:
    """One run judged against its baseline, and how that baseline was chosen."""

    comparison: Comparison
    choice: Choice

    def to_json(self) -> dict[str, Any]:
        """`Comparison.to_json()` with "baseline_choice" (`Choice.to_json`) and "likely_cause" added."""
        return {
            **self.comparison.to_json(),
            "baseline_choice": self.choice.to_json(),
            "likely_cause": self.likely_cause,
        }

    @property
    def likely_cause(self) -> str | None:
        """The likely culprit as the pair's title names it ("learning_rate 0.003 -> 3e-06", "train_labels
        other training labels (...)"), where the run is worse and a change is named; else None (a run
        that broke with no setting that explains it). One spelling for the CLI, the tab and the pair."""
        comparison = self.comparison
        if comparison.verdict is not Verdict.WORSE or not comparison.named:
            return None
        return fix_text.cause_text(comparison.changes[0])

    @property
    def deficit(self) -> float | None:
        """How far the run fell short of its baseline on the metric that decided the verdict, in
        bands of two seeds' noise (an accuracy's points / 0.06, a loss's log ratio / log 1.6;
        negative: ahead of it); None where no metric decided."""
        comparison = self.comparison
        pair = next((m for m in comparison.metrics if m.name == comparison.deciding), None)
        if pair is None:
            return None
        run, baseline = pair.run_final, pair.baseline_final
        if not math.isfinite(run) or not math.isfinite(baseline):  # a NaN loss is the worst there is
            return (
                None if math.isfinite(run) == math.isfinite(baseline) else -math.inf if math.isfinite(run) else math.inf
            )
        if pair.higher_is_better:
            return (baseline - run) / SEEDS.accuracy
        return math.log(max(run, 1e-12) / max(baseline, 1e-12)) / SEEDS.loss


def against_one(diagnoses: Sequence[Diagnosis], baseline: Diagnosis) -> list[Pair]:
    """Every run but the baseline itself against the baseline the user named, worst first."""
    pairs = [
        Pair(_compared(d, baseline), named_choice(d.signals, baseline.signals)) for d in diagnoses if d is not baseline
    ]
    return worst_first(pairs)


def against_best(diagnoses: Sequence[Diagnosis], marked: Iterable[str] = ()) -> list[Pair]:
    """Every run against its own best earlier run of the same model (`pick_baseline`; `marked`: the
    names of runs marked as good), worst first; a run with none gets a comparison without a baseline
    that says why."""
    by_name = {d.signals.run: d for d in diagnoses}
    candidates = [d.signals for d in diagnoses]
    findings = {d.signals.run: d.findings for d in diagnoses}
    marked = set(marked)
    pairs = []
    for d in diagnoses:
        choice = pick_baseline(d.signals, candidates, findings, marked)
        if choice.baseline is None:
            comparison = Comparison.without_baseline(d.signals.run, choice.why)
        else:
            comparison = _compared(d, by_name[choice.baseline])
        pairs.append(Pair(comparison, choice))
    return worst_first(pairs)


def _compared(run: Diagnosis, baseline: Diagnosis) -> Comparison:
    """One pair compared; an error in it (a run of a shape nothing foresaw) is that pair's unknown
    verdict, with the error, and never hides the other runs' lines."""
    try:
        return compare(run.signals, baseline.signals, run.findings, baseline.findings)
    except Exception as err:  # (any error: the other pairs still count)
        why = f"could not be compared (an internal error, please report it): {type(err).__name__}: {err}"[:300]
        return Comparison(run.signals.run, baseline.signals.run, Verdict.UNKNOWN, why, [], None, [], run.findings)


def worst_first(pairs: Iterable[Pair]) -> list[Pair]:
    """Worse, unknown, same, better; within each, the largest deficit on the deciding metric first
    (those without one after), then by run name."""

    def key(pair: Pair) -> tuple[int, bool, float, str]:
        deficit = pair.deficit
        return (VERDICT_ORDER[pair.comparison.verdict], deficit is None, -(deficit or 0.0), pair.comparison.run)

    return sorted(pairs, key=key)
