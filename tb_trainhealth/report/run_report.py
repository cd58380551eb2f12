"""One run's story, told once: `RunReport`, built from the run's diagnosis and its event-file problems.

Both surfaces show what is decided here and decide nothing of it themselves: the status
(`unreadable` where nothing of the run was read and an error says why, `pending` while the tab's
first look is still diagnosing it), the findings in the order shown (the engine's, worst first:
the first is the lead, whose series `lead` charts), the errors and notes about its files, how far
it got, and its timeline. `to_json` is its one JSON form: `diagnose --json` writes the keys its
contract promises, the tab's runs route a summary's, its findings route all of them
(plugin/http_api.md). A report holds no series: the CLI keeps one per run until it prints.

A file cut after the fact (a truncated copy) is part of the story too: the end record it lost is
no evidence that the process was killed, so a run with one is not called `ended_abruptly`.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tb_trainhealth.advice.plan import Plan, build_plan
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.vocab import RunStatus
from tb_trainhealth.findings import Finding, Severity, run_status
from tb_trainhealth.read.event_files import CORRUPT, TRUNCATED_COPY, FileProblem, by_group
from tb_trainhealth.report.lead_chart import lead_chart
from tb_trainhealth.report.timeline import Entry, timeline
from tb_trainhealth.signals import RunSignals

if TYPE_CHECKING:
    from tb_trainhealth.diagnosis import Diagnosis

# The finding whose evidence is a missing end record (rules/stalls.py): a truncated copy lost it, and
# a corrupt record hides every record after it (TensorBoard reads a file only up to there): the end of
# fit may be written and unreadable. The file's own error says so; the run is not called killed.
KILLED = Code.ENDED_ABRUPTLY
HIDES_THE_END = (TRUNCATED_COPY, CORRUPT)
SEVERITIES = tuple(severity.label for severity in sorted(Severity, reverse=True))  # critical, warning, info


@dataclasses.dataclass(frozen=True)
class RunReport:
    run: str
    findings: list[Finding]  # in the order shown: the lead first
    read_errors: list[str]  # why the run, or part of it, could not be read (its event files' errors aside)
    file_problems: list[FileProblem]  # its event files not read in full: errors and notes
    diagnosed: bool  # False: nothing of it was listed to diagnose (or not yet: pending)
    pending: bool
    axis: str  # what its positions count: batch steps, or epochs where it has per-epoch data only
    has_health_data: bool  # written by HealthCallback, not only loss curves
    last_position: int | None  # how far it got, on its axis
    event_counts: dict[str, int]  # its recorded events by kind
    lead: dict[str, Any] | None  # the chart of its worst problem (lead_chart.py)
    timeline: list[Entry]
    plan: Plan = dataclasses.field(default_factory=Plan)  # what to do, one plan (advice/plan.py)

    @classmethod
    def told(
        cls,
        run: str,
        signals: RunSignals | None,
        findings: Iterable[Finding],
        errors: Iterable[str],
        problems: Iterable[FileProblem],
        pending: bool = False,
        baseline_run: str | None = None,
    ) -> RunReport:
        """The story of a run read into `signals` (None: not read) and diagnosed into `findings`,
        with the reader's `errors` and its event files' `problems`; `baseline_run`: the run of the
        same logdir its worse_than_baseline finding was judged against, for the lead chart."""
        problems = list(problems)
        cut = any(problem.kind in HIDES_THE_END for problem in problems)
        shown = [finding for finding in findings if not (cut and finding.code == KILLED)]
        read = signals if signals is not None else RunSignals(run)
        kinds = collections.Counter(event.kind.value for event in read.events)
        return cls(
            run=run,
            findings=shown,
            read_errors=list(errors),
            file_problems=problems,
            diagnosed=signals is not None,
            pending=pending,
            axis=read.axis,
            has_health_data=read.has_health_data,
            last_position=read.last_position,
            event_counts=dict(sorted(kinds.items())),
            lead=lead_chart(read, shown, baseline_run),
            timeline=timeline(read),
            plan=build_plan(read, shown),
        )

    @classmethod
    def of(cls, diagnosis: Diagnosis, problems: Iterable[FileProblem], baseline_run: str | None = None) -> RunReport:
        name, signals = diagnosis.group.name, diagnosis.signals
        return cls.told(name, signals, diagnosis.findings, diagnosis.errors, problems, baseline_run=baseline_run)

    @property
    def errors(self) -> list[str]:
        """Every error in plain words: the reader's, then each broken event file's."""
        return [*self.read_errors, *(problem.text() for problem in self.file_problems if problem.is_error)]

    @property
    def notes(self) -> list[str]:
        """What a reader may want to know of its files, none of it an error (a truncated copy, a file still written)."""
        return [problem.text() for problem in self.file_problems if not problem.is_error]

    @property
    def unreadable(self) -> bool:
        """Nothing of the run was read and an error says why (garbage files, a log from a newer
        tb-trainhealth): no finding means nothing was looked at, not a healthy run."""
        nothing_read = not self.has_health_data and self.last_position is None
        return not self.pending and nothing_read and bool(self.errors) and not self.findings

    @property
    def status(self) -> RunStatus:
        """critical, warning, ok (the worst finding's severity), unreadable or pending."""
        if self.pending:
            return RunStatus.PENDING
        return RunStatus.UNREADABLE if self.unreadable else run_status(self.findings)

    @property
    def counts(self) -> dict[str, int]:
        """Its findings by severity."""
        counts = dict.fromkeys(SEVERITIES, 0)
        for finding in self.findings:
            counts[finding.severity.label] += 1
        return counts

    def to_json(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """The run's one JSON form: every key below means the same wherever it is sent; `keys`:
        only those (each surface sends the keys it documents: plugin/http_api.md, `diagnose --help`)."""
        epochs = self.axis == sig.EPOCH_AXIS
        form = {
            "run": self.run,
            "status": self.status,
            "plan": self.plan.to_dict(),
            "plan_note": self.plan.note,
            "findings": [self._finding_json(finding) for finding in self.findings],
            "errors": self.errors,
            "notes": self.notes,
            "file_errors": [problem.to_dict() for problem in self.file_problems],
            "event_counts": dict(self.event_counts),
            "counts": self.counts,
            "axis": self.axis,
            "has_health_data": self.has_health_data,
            "last_step": None if epochs else self.last_position,
            "last_epoch": self.last_position if epochs else None,
            "lead": dict(self.lead) if self.lead is not None else None,
            "timeline": [entry.to_dict() for entry in self.timeline],
        }
        return form if keys is None else {key: form[key] for key in keys}

    def _finding_json(self, finding: Finding) -> dict[str, Any]:
        """A finding as the surfaces show it: its evidence and the plan's steps that answer it (its
        own candidate fixes are the plan's to tell), and what a trial said against its usual fix."""
        form = finding.to_dict()
        del form["fixes"]
        form["plan_steps"] = self.plan.steps_answering(finding.code)
        form["trial_note"] = self.plan.overruled.get(finding.code)
        return form


@dataclasses.dataclass(frozen=True)
class ToldRun:
    """A diagnosed run's report told where it was diagnosed, before its event files are checked,
    so its series need not travel: told both ways a file problem can change it (one that hides
    the run's end drops `ended_abruptly`, and with it maybe the lead); `with_problems` picks."""

    run: str
    whole: RunReport
    cut: RunReport

    @classmethod
    def of(cls, diagnosis: Diagnosis) -> ToldRun:
        whole = RunReport.of(diagnosis, [])
        cut = whole
        if any(finding.code == KILLED for finding in diagnosis.findings):
            cut = RunReport.of(diagnosis, [FileProblem("", HIDES_THE_END[0], "")])
        return cls(diagnosis.group.name, whole, cut)

    def with_problems(self, problems: Iterable[FileProblem]) -> RunReport:
        """`RunReport.of(diagnosis, problems)`."""
        problems = list(problems)
        hidden = any(problem.kind in HIDES_THE_END for problem in problems)
        return dataclasses.replace(self.cut if hidden else self.whole, file_problems=problems)


def logdir_reports(
    diagnoses: Iterable[Diagnosis],
    problems: Mapping[str, list[FileProblem]],
    pending: Iterable[str] = (),
    unread: Mapping[str, list[str]] | None = None,
    told: Iterable[ToldRun] = (),
) -> list[RunReport]:
    """Every run of a logdir: each diagnosis (or run `told` already), each run still `pending`, each
    run `unread` (its directory could not be listed: its errors), each with its event files'
    problems (`problems`: by TensorBoard run, as `event_files` finds them), and each run TensorBoard
    does not list at all that has an unreadable event file (one only still being written has
    nothing to show yet)."""
    diagnoses, pending, unread, told = list(diagnoses), list(pending), dict(unread or {}), list(told)
    names = {d.group.name for d in diagnoses} | {t.run for t in told} | set(pending) | set(unread)
    found = by_group(dict(problems), names)
    reports = [RunReport.of(diagnosis, found.pop(diagnosis.group.name, [])) for diagnosis in diagnoses]
    reports += [one.with_problems(found.pop(one.run, [])) for one in told]
    reports += [RunReport.told(name, None, [], errors, found.pop(name, [])) for name, errors in unread.items()]
    reports += [RunReport.told(name, None, [], [], found.pop(name, []), pending=True) for name in pending]
    for name, listed in found.items():
        if any(problem.is_error for problem in listed):
            reports.append(RunReport.told(name, None, [], [], listed))
    return reports


def worst_first(reports: Iterable[RunReport]) -> list[RunReport]:
    """As both surfaces list runs: worst status first, then by name."""
    return sorted(reports, key=lambda report: (report.status.rank, report.run))
