"""What the callback's trials measured (callback/trials/): each candidate change tried on a clone of
the model, from the run's initial weights, on a sample of its own data; the run's plan
(advice/plan.py) orders its actions by these results and never advises one that made things worse."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tb_trainhealth.contract.event_base import Event, EventKind
from tb_trainhealth.contract.vocab import Name


class TrialVerdict(Name):
    HELPED = "helped"  # clearly better than the same steps with the run's own settings
    SAME = "same"  # within the trial's noise
    WORSE = "worse"  # clearly worse (or non-finite)
    FAILED = "failed"  # the change could not be applied or trained (`failure` says why)


@dataclasses.dataclass(frozen=True)
class TrialResult:
    """One change, tried. `error` is the held-out task error over a constant prediction's (1 = no
    better than predicting the label prior or the targets' mean, 0 = perfect): one yardstick for
    every change, those that change the loss too. `loss`: the run's own loss after the trial (None
    where the trial changed the loss or the targets' scale)."""

    setting: str  # findings.Intent.setting
    direction: str  # findings.Direction value
    label: str  # "learning rate 0.001 -> 0.01"
    verdict: TrialVerdict = TrialVerdict.FAILED
    code: str | None = None  # the change as code to paste
    error: float | None = None
    loss: float | None = None
    failure: str | None = None
    # A change tried on top of the one that helped most alone (that one's label): "several things
    # wrong" needs both. Judged against that change alone; `label` names the pair.
    on_top_of: str | None = None


@dataclasses.dataclass(frozen=True)
class TrialsEvent(Event):
    """The trials at the end of a fit judged failing: `unchanged` is the same training with the run's
    own settings (what each trial is judged against), on `samples` rows for `steps` steps each;
    `skipped` says why none ran (trials off, no sample, a model that cannot be cloned)."""

    kind: ClassVar[EventKind] = EventKind.TRIALS

    trials: tuple[TrialResult, ...] = ()
    findings: tuple[str, ...] = ()  # the codes that asked for trials
    samples: int = 0  # rows trained on (the held-out rows are `held_out`)
    held_out: int = 0
    steps: int = 0
    unchanged_error: float | None = None
    unchanged_loss: float | None = None
    constant_loss: float | None = None  # the run's loss of a constant prediction, on the held-out rows
    seconds: float = 0.0
    budget_seconds: float = 0.0
    fit_seconds: float | None = None  # the fit's own wall time, train begin to end (what the trials cost beside)
    skipped: str | None = None
    untried: tuple[str, ...] = ()  # candidates left when the budget ran out (their labels)
