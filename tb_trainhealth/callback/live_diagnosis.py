"""The rules, run while training: when, how often, and what happens with a new finding.

Mid-run diagnoses take at most DIAGNOSIS_TIME_SHARE of each fit's wall time, its first one
included (on a long run's capped series the rules take ~13 ms, which every 200 steps of
1 ms would make 6%) and
run at most every `diagnose_every` steps; at once when an urgent event (NaN/Inf, a lint
finding, a crash) was just recorded; and always when training ends. Each finding at
warning or worse is reported once (again if it gets worse: `tracking.FindingTracker`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tb_trainhealth.callback import read_side
from tb_trainhealth.callback.probe_guard import notice_once
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.time_budget import TimeBudget
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import FindingEvent
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.tracking import FindingTracker, finding_line

DIAGNOSIS_TIME_SHARE = 0.005
# What a diagnosis is assumed to cost at least, the fit's first included: one waits for ~1 s of
# training at DIAGNOSIS_TIME_SHARE. A mid-run one took 4-9 ms on bench/overhead.py's tiny MLP
# (2 CPU cores); the urgent ones early in a fit (a lint finding) take ~0.7 ms on their short
# series, and budgeting the next by that brought one in 0.15 s later: ~1% of that fit.
# Urgent events are diagnosed at once all the same.
MIN_DIAGNOSIS_SECONDS = 0.005
# Findings about speed, not about what the model learns: reported like any other, but they never
# stop a run (`stop_on`). A user who asks to stop on warnings means a broken run, not a slow one,
# and a busy machine alone can make a healthy pipeline wait.
SPEED_ONLY = frozenset({Code.INPUT_BOUND, Code.INPUT_PIPELINE_CONFIG})
NOTICE_STOP_ON_MULTI_WORKER = (
    "tb-trainhealth: stop_on is not applied under a multi-worker strategy (all workers must stop at "
    "the same step); findings are still recorded."
)


class LiveDiagnosis:
    def __init__(
        self,
        run: str,
        diagnose_every: int,
        stop_on: Severity | None,
        on_finding: Callable[[Finding], Any] | None,
        verbose: bool,
    ):
        self.run = run
        self.diagnose_every = diagnose_every
        self.stop_on = stop_on
        self.on_finding = on_finding
        self.verbose = verbose
        self.findings: list[Finding] = []
        self._tracker = FindingTracker(Severity.WARNING)
        self._budget = TimeBudget(DIAGNOSIS_TIME_SHARE, MIN_DIAGNOSIS_SECONDS)
        self._last_step = 0

    def on_worker(self, chief: bool) -> None:
        """Under a multi-worker strategy (`multi_worker`): only the chief prints (the others would
        print the same findings), and no worker stops on a finding (all must stop at the same step)."""
        if not chief:
            self.verbose = False
        if self.stop_on is not None:
            self.stop_on = None
            notice_once(NOTICE_STOP_ON_MULTI_WORKER)

    def begin_fit(self) -> None:
        """A fit begins: its diagnoses share its own wall time, from its first on."""
        self._budget.restart()

    def due(self, recording: Recording, step: int) -> bool:
        """Whether a diagnosis is due at `step` (see the module docstring)."""
        if any(event.urgent for event in recording.pending):
            return True
        return step - self._last_step >= self.diagnose_every and self._budget.allows()

    def maybe(self, recording: Recording, step: int) -> bool:
        """Diagnose if due. True: `stop_on` asks to stop training."""
        return self.due(recording, step) and self.now(recording, step, final=False)

    def now(self, recording: Recording, step: int, final: bool) -> bool:
        """Diagnose what was recorded so far; report what is new. True: stop training.
        final: training has ended (mid-run, rules that judge only the end are left out)."""
        self._last_step = step
        with self._budget.spend():  # every diagnosis: the cost the next one is budgeted by
            self.findings = read_side.diagnose(recording.signals(), final=final)
        stop = False
        for finding, before in self._tracker.new(self.findings):
            recording.event(FindingEvent(step=step, finding=finding.to_dict()))
            if self.verbose:
                print(f"\ntb-trainhealth {finding_line(finding, self.run, before)}")
            self._notify(finding)
            if self.stop_on is not None and finding.severity >= self.stop_on and finding.code not in SPEED_ONLY:
                stop = True
        if stop and self.verbose and not final:
            print(f"tb-trainhealth: stopping training (stop_on={self.stop_on.label!r}).")
        return stop

    def _notify(self, finding: Finding) -> None:
        if self.on_finding is None:
            return
        try:
            self.on_finding(finding)
        except Exception as err:  # the user's hook must not end their training either
            print(f"tb-trainhealth: on_finding raised {err!r}; continuing.", file=sys.stderr)
