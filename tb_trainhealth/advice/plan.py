"""One plan per run: at most three actions, the root cause's first, none pointing against another.

The rules each know a usual fix for what they found (`Finding.fixes`); those are candidates, never
shown as lists of their own. The plan takes them in the engine's order (causes before their
symptoms, worst first), merges repeats (one action may answer several findings), and orders them by
what the callback's trials measured on the run's own data (`TrialsEvent`): a change that helped
comes first, best first; one that changed nothing measurable keeps its place; one that made things
worse is never advised, and neither is anything that points against a change that helped (a trial that raised the learning rate and won rules out
"lower it"). A trial that helped where no rule proposed its change becomes an action of its own.
Actions that do not apply to the run (a tf.data setting for a fit fed from arrays) are left out.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.trial_events import TrialResult, TrialsEvent, TrialVerdict
from tb_trainhealth.findings import TF_DATA, Direction, Finding, Fix, Intent, Severity
from tb_trainhealth.signals import RunSignals

MAX_ACTIONS = 3
# A trial whose held-out error is below this share of a constant prediction's made the model learn.
LEARNS = 0.5
# Findings a check established from the model and the data themselves (not rules of thumb about a curve).
FACTS = frozenset({Code.OUTPUT_LOSS_MISMATCH, Code.LABEL_PROBLEM, Code.UNNORMALIZED_INPUT, Code.UNNORMALIZED_TARGET})
# Input kinds whose pipeline a tf.data change can reach (contract.run_info.InputSource.type).
TF_DATA_INPUTS = ("tf.data", "?")


@dataclasses.dataclass(frozen=True)
class Action:
    """One step of the plan: what to do (text, code), what it changes (intents), which findings it
    answers (their codes), and what a trial measured of it (None: not tried)."""

    text: str
    code: str | None
    intents: tuple[Intent, ...]
    answers: tuple[str, ...]
    trial: TrialResult | None = None
    measured: str | None = None  # the trial in words

    @property
    def tried(self) -> bool:
        return self.trial is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "code": self.code,
            "intents": [intent.to_dict() for intent in self.intents],
            "answers": list(self.answers),
            "tried": self.tried,
            "trial": None
            if self.trial is None
            else {"verdict": self.trial.verdict.value, "label": self.trial.label, "error": self.trial.error},
            "measured": self.measured,
        }


@dataclasses.dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...] = ()
    trials: TrialsEvent | None = None
    # Per finding code: what a trial said against its usual fix ("the finding that loses says so").
    overruled: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> list[dict[str, Any]]:
        return [action.to_dict() for action in self.actions]

    @property
    def note(self) -> str | None:
        """Why the plan's changes were not tried on the run's data, where trials were wanted (skipped, or
        out of time before its first step was tried); None otherwise."""
        trials = self.trials
        if trials is None:
            return None
        if trials.skipped:
            return f"Not tried on your data: {trials.skipped}."
        if trials.untried and self.actions and not self.actions[0].tried:
            return f"Not tried in the time trials had ({trials.budget_seconds:.0f} s): {', '.join(trials.untried)}."
        return None

    def steps_answering(self, code: str) -> list[int]:
        """The plan's steps (from 1) that answer a finding of this code."""
        return [i for i, action in enumerate(self.actions, 1) if code in action.answers]


def latest_trials(run: RunSignals) -> TrialsEvent | None:
    trials = run.events_of(TrialsEvent)
    return trials[-1] if trials else None


def build_plan(run: RunSignals, findings: list[Finding]) -> Plan:
    """The run's plan from its findings (in the engine's order) and its latest trials."""
    trials = latest_trials(run)
    everything = list(trials.trials) if trials is not None else []
    results = [t for t in everything if t.on_top_of is None]  # each change alone
    candidates = _candidates(findings, _applies(run))
    overruled: dict[str, str] = {}
    ranked: list[Action] = []
    for action in candidates:
        trial = _matching(action, results)
        if trial is not None and trial.verdict is TrialVerdict.WORSE:
            for code in action.answers:  # tried and made things worse: never advised
                overruled.setdefault(code, _against(trial, trials))
            continue
        ranked.append(_with_trial(action, trial, trials) if trial is not None else action)
    known = {intent for action in candidates for intent in action.intents}
    answered = tuple(trials.findings) if trials is not None else ()
    born: list[Action] = []
    for trial in results:  # a change that helped and no rule proposed
        if trial.verdict is TrialVerdict.HELPED and _intent(trial) not in known:
            action = _with_trial(
                Action(_trial_text(trial), trial.code, (_intent(trial),), answered or ("trial",)), trial, trials
            )
            born.append(action)
            ranked.append(action)
    ranked, born = _both_where_both_helped(ranked, born, everything, trials)
    helped = sorted(
        (a for a in ranked if a.trial is not None and a.trial.verdict is TrialVerdict.HELPED),
        key=lambda a: a.trial.error if a.trial and a.trial.error is not None else 1e9,
    )
    # Not tried, or tried without a clear change in the trial's few steps (weak evidence either way):
    # in the findings' order, causes first.
    untried = [a for a in ranked if a.trial is None or a.trial.verdict is not TrialVerdict.HELPED]
    against = [_intent(t) for t in results if t.verdict is TrialVerdict.WORSE]
    # Per setting, the direction of the change that did best (both ways may "help" a short trial).
    won = list({intent.setting: intent for a in reversed(helped) for intent in a.intents}.values())
    # A fact a check established (an output layer that cannot fit the loss, labels outside its range,
    # unscaled data) names the root cause: its fix leads unless a trial showed it made things worse;
    # trials order what follows (a short trial may not show a fix's gain where several things are wrong).
    # Among facts, those whose trial helped lead, best first (dm_cars_sigmoid_output_unscaled_target: a
    # linear output alone made no clear change, the targets scaled to the sigmoid's range did).
    # (A change no rule proposed is no fact's fix, whatever findings asked for the trials:
    # dm_masked_lstm_relu_output_cce's inputs, standardised, barely beat a constant.)
    facts = sorted(
        (a for a in ranked if set(a.answers) & FACTS and a not in born),
        key=lambda a: (a not in helped, helped.index(a) if a in helped else 0),
    )
    # ...but a change whose trial made the model learn (held-out error below LEARNS of a constant's)
    # goes before a fact whose own trial did not (tpb_so43636736: inputs and targets standardised
    # together, 0.003, before the inputs alone, 3.5).
    learned = [a for a in helped if a.trial is not None and a.trial.error is not None and a.trial.error < LEARNS]
    yielding = [a for a in facts if a.tried and a not in learned] if learned else []
    order = [*(a for a in facts if a not in yielding), *(a for a in learned if a not in facts), *yielding]
    kept: list[Action] = []
    for action in [*order, *(a for a in [*helped, *untried] if a not in order)]:
        taken = [intent for other in kept for intent in other.intents]
        if any(mine.opposes(other) for mine in action.intents for other in [*taken, *won]):
            continue  # never two ways on one setting; never against a change that helped
        if any(mine in against and mine not in won for mine in action.intents):
            continue  # (a change that made things worse in every form it was tried)
        kept.append(action)
    return Plan(tuple(kept[:MAX_ACTIONS]), trials, overruled)


def _both_where_both_helped(
    ranked: list[Action], born: list[Action], everything: list[TrialResult], trials: TrialsEvent | None
) -> tuple[list[Action], list[Action]]:
    """The change that helped most alone becomes one action with the change that, on top of it, helped
    most again (tried as a pair: several things wrong need both); the second's own action goes."""
    pairs = [t for t in everything if t.on_top_of is not None and t.verdict is TrialVerdict.HELPED]
    pair = min(pairs, key=lambda t: t.error if t.error is not None else 1e9, default=None)
    base = next(
        (a for a in ranked if pair is not None and a.trial is not None and a.trial.label == pair.on_top_of), None
    )
    if pair is None or base is None:
        return ranked, born
    second = next((a for a in ranked if a is not base and _intent(pair) in a.intents), None)
    answers = tuple(dict.fromkeys([*base.answers, *(second.answers if second is not None else ())]))
    intents = tuple(dict.fromkeys([*base.intents, _intent(pair)]))
    both = _with_trial(Action(_trial_text(pair), pair.code, intents, answers), pair, trials)
    ranked = [both if a is base else a for a in ranked if a is not second]
    return ranked, [both if a is base else a for a in born if a is not second]


def _applies(run: RunSignals):
    kind = run.info.input.type if run.info.input is not None else "?"

    def applies(fix: Fix) -> bool:
        if any(intent.setting == TF_DATA for intent in fix.intents):
            return kind in TF_DATA_INPUTS
        return True

    return applies


def _candidates(findings: list[Finding], applies) -> list[Action]:
    """Every loud finding's fixes in order, repeats merged: the same words or code, or a change
    already among an earlier action's (the one that does more keeps its words: "lower the rate and
    clip" over "lower the rate")."""
    out: list[Action] = []
    for finding in findings:
        if finding.severity < Severity.WARNING:
            continue
        for fix in finding.fixes:
            if not applies(fix):
                continue
            same = next((a for a in out if _same(a, fix)), None)
            if same is None:
                out.append(Action(fix.text, fix.code, fix.intents, (finding.code,)))
                continue
            merged = same
            if set(fix.intents) > set(same.intents):
                merged = dataclasses.replace(same, text=fix.text, code=fix.code, intents=fix.intents)
            if finding.code not in merged.answers:
                merged = dataclasses.replace(merged, answers=(*merged.answers, finding.code))
            out[out.index(same)] = merged
    return out


def _same(action: Action, fix: Fix) -> bool:
    if (action.text, action.code) == (fix.text, fix.code):
        return True
    if action.code is not None and action.code == fix.code:
        return True
    return bool(set(fix.intents) & set(action.intents))


def _intent(trial: TrialResult) -> Intent:
    try:
        return Intent(trial.setting, Direction(trial.direction))
    except ValueError:
        return Intent(trial.setting, Direction.CHANGE)


def _matching(action: Action, results: list[TrialResult]) -> TrialResult | None:
    """The best trial of one of the action's intents (helped before same before worse)."""
    order = {TrialVerdict.HELPED: 0, TrialVerdict.SAME: 1, TrialVerdict.WORSE: 2}
    found = [t for t in results if t.verdict in order and _intent(t) in action.intents]
    return min(found, key=lambda t: (order[t.verdict], t.error if t.error is not None else 1e9), default=None)


def _with_trial(action: Action, trial: TrialResult, trials: TrialsEvent | None) -> Action:
    """The action as tried: where the trial helped, its words and code are what was measured (the
    rule's words may say more, "lower the rate *and* clip", or another change of the same setting:
    "tell the loss it gets logits" and a sigmoid output both change output_activation)."""
    if trial.verdict is not TrialVerdict.HELPED or not trial.code:
        return dataclasses.replace(action, trial=trial, measured=measured_text(trial, trials))
    text = _trial_text(trial)
    return dataclasses.replace(action, text=text, code=trial.code, trial=trial, measured=measured_text(trial, trials))


def _trial_text(trial: TrialResult) -> str:
    return f"Train with {trial.label}: a trial on your own data did clearly better with it."


def measured_text(trial: TrialResult, trials: TrialsEvent | None) -> str:
    """What the trial measured, in one sentence a user can check."""
    where = (
        f"Tried on {trials.samples} of your samples for {trials.steps} steps from the run's starting weights"
        if trials is not None
        else "Tried on a sample of your data"
    )
    held = f"{trials.held_out} held-out samples" if trials is not None and trials.held_out else "held-out samples"
    parts = []
    if trial.loss is not None and trials is not None and trials.unchanged_loss is not None:
        constant = f"; a constant: {trials.constant_loss:.3g}" if trials.constant_loss is not None else ""
        parts.append(f"loss {trial.loss:.3g} (unchanged: {trials.unchanged_loss:.3g}{constant})")
    if trial.error is not None and trials is not None and trials.unchanged_error is not None:
        parts.append(
            f"error on {held} {trial.error:.2f} of a constant prediction's (unchanged: {trials.unchanged_error:.2f})"
        )
    verdict = {
        TrialVerdict.HELPED: "better",
        TrialVerdict.SAME: "no clear change",
        TrialVerdict.WORSE: "worse",
    }.get(trial.verdict, trial.verdict.value)
    return f"{where}: {trial.label}: {verdict}" + (f", {'; '.join(parts)}" if parts else "") + "."


def _against(trial: TrialResult, trials: TrialsEvent | None) -> str:
    return f"Its usual fix was tried and made things worse, so it is not advised. {measured_text(trial, trials)}"


def plan_lines(plan: Plan, indent: str = "  ") -> list[str]:
    """The plan for a terminal: each step's sentence, its code, and what its trial measured."""
    lines = []
    for number, action in enumerate(plan.actions, 1):
        tried = "  (not tried)" if plan.trials is not None and not action.tried else ""  # (said where trials ran)
        lines.append(f"{indent}plan {number}. {action.text}{tried}")
        if action.code:
            lines.append(textwrap.indent(action.code, indent + " " * 9))
        if action.measured:
            pad = indent + " " * 7
            lines.extend(textwrap.wrap(action.measured, 100, initial_indent=pad, subsequent_indent=pad))
    if plan.actions and plan.note:
        lines.extend(textwrap.wrap(plan.note, 100, initial_indent=indent + "  ", subsequent_indent=indent + "  "))
    return lines
