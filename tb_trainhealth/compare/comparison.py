"""A run against a known-good baseline, as one result: the verdict, the changed settings (culprit
first), where the curves parted, the metrics, and the findings (the run's own diagnosis, with a
`worse_than_baseline` finding first when it is worse); or, where no baseline was found to judge
against (the tab's "best earlier run"), why not. `to_json` is the contract of `tb-trainhealth
compare --json`, and what the tab's compare route sends, with what it draws beside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from tb_trainhealth.compare import culprit, fix_text
from tb_trainhealth.compare.curves import MetricPair, accuracy_differs, parting_step, shared_metrics
from tb_trainhealth.compare.noise import (
    CURVE_NOISE,
    DRAWS,
    SEEDS,
    Judgement,
    Noise,
    Verdict,
    deciding_metric,
    judge,
    judge_gains,
)
from tb_trainhealth.compare.pair_noise import pair_noise
from tb_trainhealth.compare.resample import resampled, targets_rescaled
from tb_trainhealth.compare.settings_diff import Change, changed_settings
from tb_trainhealth.compare.signal_changes import SignalChange, signal_changes
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import CrashEvent, FitEndEvent
from tb_trainhealth.findings import Evidence, Fact, Finding, Severity
from tb_trainhealth.series_math import head_level
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import gain_over_constant

CODE = Code.WORSE_THAN_BASELINE
# The run parted "early" when its training loss left the band within this share of the run: a learning
# rate 1000x too small leaves a fast-falling baseline after a third of the run, not at step 1.
EARLY_SHARE = 0.5
# A run whose event file changed this recently, with no end of fit recorded, is still being written.
STILL_WRITING_SECONDS = 120.0
# Findings that mean the run broke: a run with one where the baseline has none is worse.
BROKEN = (Code.NONFINITE, Code.TRAINING_CRASH, Code.OOM, Code.TRAINING_STALLED)
BROKE = "the run broke where the baseline did not"
# Findings that say the set-up does not fit the task: where no metric compares the runs (their
# losses differ), a run with one the baseline lacks is worse.
SET_UP_WRONG = (
    Code.LABEL_PROBLEM,
    Code.OUTPUT_LOSS_MISMATCH,
    Code.WORSE_THAN_CONSTANT,
    Code.LOSS_METRIC_MISMATCH,
    Code.UNNORMALIZED_TARGET,
    Code.BAD_INITIALIZATION,
)
# A gain over the constant prediction above 1 is a loss below what a perfect prediction scores:
# labels the loss is not defined for, not a better model.
GAIN_SLACK = 0.01
# Culprits named in the finding's title and fixes.
NAMED_CULPRITS = 2


@dataclasses.dataclass
class Comparison:
    run: str
    baseline: str | None  # None: no baseline was found (`why` says why)
    verdict: Verdict
    why: str
    changes: list[Change]
    parted_at_step: int | None
    metrics: list[MetricPair]
    findings: list[Finding]
    deciding: str | None = None  # the metric the verdict was judged on ("val_accuracy"), where one was
    noise: Noise = SEEDS  # what it was judged against: the band the tab draws around the baseline
    # What the health signals say changed beyond what seeds change (largest first): names a change
    # the settings cannot see.
    signal_changes: list[SignalChange] = dataclasses.field(default_factory=list)
    named: int = 0  # how many of `changes` (the first) are named as the likely cause

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "baseline": self.baseline,
            "verdict": self.verdict.value,
            "why": self.why,
            "changes": [change.to_dict() for change in self.changes],
            "parted_at_step": self.parted_at_step,
            "metrics": [entry for pair in self.metrics for entry in pair.to_dicts()],
            "findings": [finding.to_dict() for finding in self.findings],
            "deciding_metric": self.deciding,
            "signal_changes": [change.to_dict() for change in self.signal_changes],
        }

    @classmethod
    def without_baseline(cls, run: str, why: str) -> Comparison:
        """Nothing to compare the run with: nothing judged, and why."""
        return cls(run, None, Verdict.UNKNOWN, why, [], None, [], [])


def compare(
    run: RunSignals,
    baseline: RunSignals,
    run_findings: list[Finding],
    baseline_findings: list[Finding],
    baseline_damage: Sequence[str] = (),
) -> Comparison:
    """Compare two read and diagnosed runs (names as the user gave them: `run.run`, `baseline.run`).
    `baseline_damage`: what is wrong with the baseline's event files, where known: it is judged on
    what was read, and the verdict says so."""
    changes = changed_settings(run.settings, baseline.settings, run.info, baseline.info)
    signals = signal_changes(run, baseline)
    metrics = shared_metrics(run, baseline)
    # The callback's own comparison at the end of fit: this one decides, and says so where they differ.
    recorded = next((f for f in run_findings if f.code == CODE), None)
    run_findings = [f for f in run_findings if f.code != CODE]
    damaged = _damage_text(baseline, baseline_damage)
    unusable = _unusable(run, baseline, metrics, bool(baseline_damage))
    if unusable is not None:
        why = unusable + damaged + _earlier_verdict(recorded, Verdict.UNKNOWN)
        return Comparison(
            run.run, baseline.run, Verdict.UNKNOWN, why, changes, None, metrics, run_findings, signal_changes=signals
        )
    judgement = _judged(run, baseline, metrics, changes, run_findings, baseline_findings)
    differs = accuracy_differs(run, baseline)
    judgement = dataclasses.replace(
        judgement,
        why=judgement.why
        + (f" ({differs})" if differs else "")
        + damaged
        + _earlier_verdict(recorded, judgement.verdict),
    )
    parted = None
    if judgement.verdict in (Verdict.WORSE, Verdict.BETTER):
        parted = parting_step(run, baseline, CURVE_NOISE, worse=judgement.verdict is Verdict.WORSE)
    evidence = _evidence(run, baseline, parted, judgement)
    ranked = culprit.ranked(changes, evidence)
    named = culprit.likely_culprits(ranked, evidence, NAMED_CULPRITS) if judgement.verdict is Verdict.WORSE else 0
    findings = list(run_findings)
    if judgement.verdict is Verdict.WORSE:
        findings.insert(0, _worse_finding(run, baseline, judgement, ranked, parted, evidence, signals, named=named))
    deciding = judgement.metric.name if judgement.metric is not None else None
    return Comparison(
        run.run, baseline.run, judgement.verdict, judgement.why, ranked, parted, metrics, findings, deciding,
        judgement.noise, signals, named,
    )  # fmt: skip


def _signals_text(signals: Sequence[SignalChange], lead: bool) -> str:
    """The health signals that moved, as a sentence: where no setting changed, the only name the
    change has."""
    if not signals:
        return ""
    said = "; ".join(change.text() for change in signals[:NAMED_CULPRITS])
    more = f" (+{len(signals) - NAMED_CULPRITS} more)" if len(signals) > NAMED_CULPRITS else ""
    if lead:
        return f" The health signals show where: {said}{more}."
    return f" The health signals moved beyond what seeds move them: {said}{more}."


def behind_finding(run: RunSignals, baseline: RunSignals, judgement: Judgement, since: int) -> Finding:
    """During a fit: the `worse_than_baseline` finding of a run clearly behind the baseline at
    `since` (both runs cut there), with the changed settings, likely culprit first."""
    changes = changed_settings(run.settings, baseline.settings, run.info, baseline.info)
    parted = parting_step(run, baseline, CURVE_NOISE, worse=True)
    evidence = _evidence(run, baseline, parted, judgement)
    ranked = culprit.ranked(changes, evidence)
    return _worse_finding(run, baseline, judgement, ranked, parted, evidence, since=since)


def _earlier_verdict(recorded: Finding | None, verdict: Verdict) -> str:
    """Where the callback recorded 'worse' (at the end of fit, or during a fit) and this comparison says otherwise:
    which is current, and why they may differ."""
    if recorded is None or verdict is Verdict.WORSE:
        return ""
    return (
        f' (The callback recorded "{recorded.title}"; this verdict, from the runs as they'
        " are now, replaces it: the baseline or the code may have changed since.)"
    )


def _damage_text(baseline: RunSignals, damage: Sequence[str]) -> str:
    if not damage:
        return ""
    read = f", up to {baseline.at(baseline.last_position)}" if baseline.last_position is not None else ""
    return (
        f" (The baseline is damaged: {'; '.join(damage[:2])}. It is judged on what was read{read}: its curve "
        "after the damage, and the end of fit it recorded, are missing.)"
    )


def _unusable(run: RunSignals, baseline: RunSignals, metrics: list[MetricPair], damaged: bool = False) -> str | None:
    """Why the two runs cannot be judged against each other, or None. A damaged baseline that lost
    its end of fit is not one still being written."""
    if baseline.last_position is None:
        return f"the baseline {baseline.run!r} holds no training data"
    if run.last_position is None:
        return f"the run {run.run!r} holds no training data"
    if not damaged and _still_writing(baseline):
        return (
            f"the baseline {baseline.run!r} is still being written (no end of fit recorded yet): compare once it ends"
        )
    return None


def _different_tasks(run: RunSignals, baseline: RunSignals) -> str | None:
    classifiers = (run.get(sig.EPOCH_ACCURACY) is not None, baseline.get(sig.EPOCH_ACCURACY) is not None)
    if classifiers[0] != classifiers[1] and run.info.loss != baseline.info.loss:
        which = "run" if classifiers[0] else "baseline"
        return f"the runs look like different tasks: only the {which} logs an accuracy, and their losses differ"
    return None


def _still_writing(signals: RunSignals) -> bool:
    if not signals.has_health_data or signals.events_of(FitEndEvent) or signals.events_of(CrashEvent):
        return False
    if signals.last_write is None or signals.now is None:
        return False
    return signals.now - signals.last_write < STILL_WRITING_SECONDS


def _judged(
    run: RunSignals,
    baseline: RunSignals,
    metrics: list[MetricPair],
    changes: list[Change],
    run_findings: list[Finding],
    baseline_findings: list[Finding],
) -> Judgement:
    broke = _broken(run_findings) - _broken(baseline_findings)
    if broke:
        finding = next(f for f in run_findings if f.code in broke)
        return Judgement(Verdict.WORSE, None, f"{BROKE}: {finding.title}")
    losses_comparable, noise = yardstick(run, baseline, changes)
    deciding = deciding_metric(metrics, losses_comparable)
    if deciding is not None:  # the band of this pair, from what the two runs show
        noise = pair_noise(run, baseline, deciding, resampled(changes, baseline.settings.settings))
    judgement = judge(metrics, loss_start(baseline), losses_comparable, noise)
    critical = next((f for f in run_findings if f.severity >= Severity.CRITICAL), None)
    if judgement.verdict is Verdict.BETTER and critical is not None:  # (its numbers mean something else)
        return Judgement(
            Verdict.UNKNOWN,
            judgement.metric,
            f"{judgement.why}, but the run itself is critical ({critical.code}: {critical.title}): not a better run",
        )
    if judgement.verdict is not Verdict.UNKNOWN:
        return judgement
    found = _set_up_wrong(run_findings) - _set_up_wrong(baseline_findings)
    if found:
        finding = next(f for f in run_findings if f.code in found)
        return Judgement(
            Verdict.WORSE, None, f"{judgement.why}, and the run has what the baseline does not: {finding.title}"
        )
    tasks = _different_tasks(run, baseline)
    if tasks:
        return Judgement(Verdict.UNKNOWN, None, tasks)
    gains = gain_over_constant(run), gain_over_constant(baseline)
    if all(gain is not None and gain <= 1 + GAIN_SLACK for gain in gains):
        return judge_gains(*gains)
    return judgement


def yardstick(run: RunSignals, baseline: RunSignals, changes: list[Change]) -> tuple[bool, Noise]:
    """Whether the runs' losses compare (not another loss, nor targets of another scale), and the
    noise between them: seeds, or draws of the data too."""
    loss_changed = (
        any(culprit.key_of(c.setting) in ("loss", "label_smoothing", "from_logits") for c in changes)
        or (None not in (run.info.loss, baseline.info.loss) and run.info.loss != baseline.info.loss)
        or targets_rescaled(changes)  # (the same loss on targets of another scale: another yardstick)
    )
    return not loss_changed, DRAWS if resampled(changes, baseline.settings.settings) else SEEDS


def loss_start(baseline: RunSignals) -> float | None:
    """Where the baseline's loss started: the scale against which a tiny loss counts as converged."""
    loss = baseline.get(sig.LOSS) or baseline.get(sig.EPOCH_LOSS)
    return head_level(loss.values) if loss is not None else None


def _broken(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings if f.code in BROKEN and f.severity >= Severity.WARNING}


def _set_up_wrong(findings: list[Finding]) -> set[str]:
    """Codes of warnings and criticals that say the set-up does not fit the task."""
    return {f.code for f in findings if f.severity >= Severity.WARNING and f.code in SET_UP_WRONG}


def _evidence(run: RunSignals, baseline: RunSignals, parted: int | None, judgement: Judgement) -> culprit.Evidence:
    end = run.last_position or 0
    deciding = judgement.metric
    validation_only = (
        judgement.verdict is Verdict.WORSE
        and parted is None
        and deciding is not None
        and deciding.name.startswith("val_")
    )
    return culprit.Evidence(
        parted_early=parted is not None and parted <= EARLY_SHARE * end,
        validation_only=validation_only,
        stopped_earlier=_epochs_run(run) < _epochs_run(baseline),
        fewer_steps_per_epoch=_steps_per_epoch(run) < 0.9 * _steps_per_epoch(baseline),
        broke=judgement.why.startswith(BROKE) or _fell_back(judgement),
    )


def _fell_back(judgement: Judgement) -> bool:
    """The run ended far worse than its own best on the deciding metric (a loss that diverged): it lost
    ground by itself, so fewer epochs than the baseline's is not why it ended worse."""
    metric, noise = judgement.metric, judgement.noise
    if metric is None or not (math.isfinite(metric.run_best) and math.isfinite(metric.run_final)):
        return metric is not None and math.isfinite(metric.run_best)  # (ended at NaN after a finite best)
    if metric.higher_is_better:
        return metric.run_best - metric.run_final > noise.accuracy
    return metric.run_best > 0 and math.log(max(metric.run_final, 1e-12) / metric.run_best) > noise.loss


def _epochs_run(signals: RunSignals) -> float:
    ends = signals.events_of(FitEndEvent)
    if ends and ends[-1].epochs_run is not None:
        return float(ends[-1].epochs_run)
    epochs = signals.get(sig.EPOCH_LOSS)
    return float(len(epochs)) if epochs is not None else float("inf")


def _steps_per_epoch(signals: RunSignals) -> float:
    recorded = signals.settings.number("steps_per_epoch")
    if recorded is not None and recorded > 0:
        return recorded
    epochs = signals.get(sig.EPOCH_LOSS)
    if epochs is not None and signals.axis == sig.STEP_AXIS and epochs.steps[0] > 0:
        return float(epochs.steps[0])
    return float("nan")


def _worse_finding(
    run: RunSignals,
    baseline: RunSignals,
    judgement: Judgement,
    ranked: list[Change],
    parted: int | None,
    evidence: culprit.Evidence,
    signals: Sequence[SignalChange] = (),
    since: int | None = None,
    named: int = NAMED_CULPRITS,
) -> Finding:
    """since: during a fit, the step from which the run is clearly behind (the finding's step); named:
    how many of `ranked` lead as likely causes."""
    named = ranked[:named]
    title = f"Worse than baseline {baseline.run}"
    if since is not None:
        title = f"Behind baseline {baseline.run} since {run.at(since)}"
    if named:
        title += f": likely cause {fix_text.cause_text(named[0])}"
    where = f" The training loss left the baseline's band at {run.at(parted)}." if parted is not None else ""
    reasons = " ".join(f"{c.setting}: {culprit.why(c, evidence)}." for c in named)
    others = f" {len(ranked) - len(named)} other setting(s) changed too." if len(ranked) > len(named) else ""
    nothing = (
        " No recorded setting differs: look at what the logs cannot see (the data files, code changes, seeds)."
        if not ranked
        else ""
    )
    moved = _signals_text(signals, lead=not ranked)
    detail = f"{judgement.why}.{where} {reasons}{others}{nothing}{moved}".replace("  ", " ").strip()
    facts = tuple(Fact(c.setting, fix_text.change_text(c).partition(": ")[2]) for c in ranked[:8])
    series = (sig.LOSS,) if run.get(sig.LOSS) is not None else (sig.EPOCH_LOSS,)
    return Finding(
        code=CODE,
        severity=Severity.WARNING,
        step=parted if since is None else since,
        title=title,
        detail=detail,
        evidence=Evidence(series=series, start_step=parted, facts=facts),
        fixes=tuple(fix_text.set_back(change, run.settings) for change in named),
    )
