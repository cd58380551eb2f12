"""The verdict: is the run worse or better than the baseline by more than two seeds of one set-up
differ? The noise model is measured, not assumed: `bench/compare_zoo.py` trains several set-ups
over seeds and prints the largest seed-to-seed gaps these thresholds must clear.
"""

from __future__ import annotations

import dataclasses
import enum
import math

from tb_trainhealth.compare.curves import MetricPair


class Verdict(str, enum.Enum):
    WORSE = "worse"
    SAME = "same"
    BETTER = "better"
    UNKNOWN = "unknown"


# Accuracy-like metrics (0..1): more than this apart, final and best, is more than seeds do.
# `python bench/compare_zoo.py`: the largest seed-to-seed gap of 4 seeds (6 pairs) of each of its
# set-ups was 0.013 (MLP), 0.000 (CNN), 0.025 (GRU); the benign changes moved it by up to 0.025.
# Set before the zoo's harmful pairs were run, not tuned on them; the harm it must see is 10 points.
ACCURACY_NOISE = 0.06
# Losses: more than this factor apart (a log ratio), final and best. Seeds of the zoo's regression
# differed by up to 1.07x in validation loss, its benign changes by up to 1.09x; harm is 2x.
LOSS_NOISE = math.log(1.6)
# ...unless both are this small against where the loss started: two runs that both drove the
# loss to 1e-4 of its start have converged alike, whatever their ratio.
CONVERGED_SHARE = 0.01


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    metric: MetricPair | None  # the metric that decided
    why: str  # one line, with the numbers


def judge(metrics: list[MetricPair], loss_start: float | None, losses_comparable: bool = True) -> Judgement:
    """The verdict on the one metric that decides, the first of `metrics` (most telling first)
    that is an accuracy, else the first loss: worse or better only where final AND best both
    moved past the noise the same way. Losses of different loss functions (label smoothing, a new
    loss) are not comparable: then only an accuracy decides.

    loss_start: the baseline's first loss, the scale against which a tiny loss counts as converged."""
    accuracies = [pair for pair in metrics if pair.higher_is_better]
    deciding = accuracies[0] if accuracies else (metrics[0] if metrics and losses_comparable else None)
    if deciding is None:
        why = "the runs share no metric" if not metrics else "the runs use different losses and log no accuracy"
        return Judgement(Verdict.UNKNOWN, None, why)
    final = _gap(deciding, deciding.baseline_final, deciding.run_final, loss_start)
    best = _gap(deciding, deciding.baseline_best, deciding.run_best, loss_start)
    if final > 0 and best > 0:
        return Judgement(Verdict.WORSE, deciding, _describe(deciding, "worse than"))
    if final < 0 and best < 0:
        return Judgement(Verdict.BETTER, deciding, _describe(deciding, "better than"))
    return Judgement(Verdict.SAME, deciding, _describe(deciding, "within run-to-run noise of"))


def _gap(pair: MetricPair, baseline: float, run: float, loss_start: float | None) -> int:
    """+1: the run is worse beyond the noise; -1: better beyond it; 0: within it."""
    if not math.isfinite(run) and not math.isfinite(baseline):
        return 0
    if not math.isfinite(run):
        return 1
    if not math.isfinite(baseline):
        return -1
    if pair.higher_is_better:
        difference = baseline - run
        return 1 if difference > ACCURACY_NOISE else -1 if difference < -ACCURACY_NOISE else 0
    if loss_start is not None and loss_start > 0 and max(run, baseline) < CONVERGED_SHARE * loss_start:
        return 0
    ratio = math.log(max(run, 1e-12) / max(baseline, 1e-12))
    return 1 if ratio > LOSS_NOISE else -1 if ratio < -LOSS_NOISE else 0


def _describe(pair: MetricPair, how: str) -> str:
    return (
        f"{pair.name} {_number(pair.run_final)} (best {_number(pair.run_best)}) is {how} the baseline's "
        f"{_number(pair.baseline_final)} (best {_number(pair.baseline_best)})"
    )


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "NaN"
