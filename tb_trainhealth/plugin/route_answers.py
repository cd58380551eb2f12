"""What each route of the Health tab answers, apart from the HTTP request that asks.

The routes in health_plugin.py only parse and check a request's query parameters; the
answers are computed here, from a run's diagnoses, the logdir's event-file problems and
plain arguments, and come back as plain dicts and lists (or a `tensorboard.errors`
exception for a bad argument), as TensorBoard's scalars plugin keeps `scalars_impl`
beside its routes. So they can be tested, and reused, without a WSGI client.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
import time
from typing import Any

import numpy as np
from tensorboard import context as tb_context
from tensorboard import errors
from tensorboard.compat import tf as tb_tf

from tb_trainhealth.compare import many
from tb_trainhealth.compare.baseline_pick import NAMED, Choice, marked_good, named_choice, pick_baseline
from tb_trainhealth.compare.comparison import CODE as WORSE
from tb_trainhealth.compare.comparison import Comparison, compare
from tb_trainhealth.contract.events import ComparisonEvent
from tb_trainhealth.diagnosis import Diagnosis
from tb_trainhealth.plugin import compare_curves, diagnosis_cache
from tb_trainhealth.plugin.diagnosis_cache import ANSWER_WITHIN_SECONDS, DiagnosisCache
from tb_trainhealth.read import event_files
from tb_trainhealth.report.logdir_summary import summary_line
from tb_trainhealth.report.run_report import RunReport, logdir_reports, worst_first
from tb_trainhealth.run_paths import is_local
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.storage import probe_listing, reader_problem

MIN_POINTS = 2
MAX_POINTS_SENT = 2000
DEFAULT_POINTS = 500
# A run's summary in the runs route: these keys of its report's JSON form.
LIST_KEYS = ("run", "status", "counts", "has_health_data", "last_step", "last_epoch", "errors", "notes", "file_errors")
# The compare route's baseline meaning "the best earlier run of the same model" (baseline_pick.py).
BEST = "best"
# Run names the compare_all route's error for an unknown baseline lists.
NAMES_SHOWN = 5
# The runs route's logdir_problem_kind: which problem logdir_problem says, so the tab heads it right.
MISSING, NOT_A_FOLDER, BUCKET_UNREADABLE = "missing", "not_a_folder", "bucket_unreadable"
# The bucket lists no more while the tab shows the runs TensorBoard read before (its reloader thread
# stops at a storage error and never lists again): said above the runs, which stay shown.
LISTING_FAILING = "listing_failing"

Problems = dict[str, list[event_files.FileProblem]]


def file_problems(files: event_files.BackgroundChecker | None, names: set[str]) -> Problems:
    """The logdir's event-file problems by run group (a first look waits for them briefly);
    none where the logdir is not checked (`files` None: a URL, or --logdir_spec)."""
    if files is None:
        return {}
    return event_files.by_group(files.latest(wait=ANSWER_WITHIN_SECONDS), names)


def runs_answer(
    cache: DiagnosisCache,
    ctx: tb_context.RequestContext,
    files: event_files.BackgroundChecker | None,
    logdir: str = "",
) -> dict[str, Any]:
    """Every run's summary (LIST_KEYS of its report), worst first; runs still being diagnosed come
    last as "pending", and runs TensorBoard does not list at all (nothing in them readable) come
    with their file errors. `summary`: the runs counted by status, as the CLI's last line says it.
    `logdir_problem`: why the --logdir shows nothing (a local one does not
    exist or is not a folder; TensorBoard has nothing here that reads a bucket's scheme), else
    null: "no runs" would send the user looking for a bug in training; `logdir_problem_kind` says
    which of these it is (MISSING, NOT_A_FOLDER, BUCKET_UNREADABLE), or null; with runs shown,
    LISTING_FAILING where the bucket no longer lists (the runs stay, as last read)."""
    started = time.monotonic()
    if files is not None:
        files.latest(wait=0)  # a first look starts checking the files while the runs are diagnosed
    diagnoses, pending = cache.all(ctx)
    # One time budget for both: a first look answers within ANSWER_WITHIN_SECONDS, not twice that.
    remaining = max(0.0, diagnosis_cache.ANSWER_WITHIN_SECONDS - (time.monotonic() - started))
    problems = files.latest(wait=remaining) if files is not None else {}
    reports = logdir_reports(diagnoses, problems, pending=[group.name for group in pending])
    kind, problem = logdir_problem(logdir)
    if problem is None and not reports and logdir and not is_local(logdir):
        refused = refused_listing(logdir, time.monotonic() // REFUSAL_ASKED_EVERY_S)
        kind, problem = (BUCKET_UNREADABLE, refused) if refused else (None, None)
    elif problem is None and logdir and not is_local(logdir):  # runs shown: are they still listed?
        refused = listing_check(logdir).latest()
        if refused:
            kind, problem = LISTING_FAILING, f"{refused}. {STALE_RUNS}"
    return {
        "runs": [report.to_json(LIST_KEYS) for report in worst_first(reports)],
        "summary": summary_line(reports) if reports else "",
        "logdir_problem": problem,
        "logdir_problem_kind": kind,
    }


def logdir_problem(logdir: str) -> tuple[str | None, str | None]:
    """(kind, sentence) of what keeps TensorBoard from reading `logdir`, or (None, None)."""
    if logdir and not is_local(logdir):
        problem = bucket_unreadable(logdir)
        return (BUCKET_UNREADABLE, problem) if problem else (None, None)
    if not logdir or os.path.isdir(logdir):
        return None, None
    kind, what = (NOT_A_FOLDER, "is a file, not a folder") if os.path.exists(logdir) else (MISSING, "does not exist")
    return kind, f"The logdir {logdir} {what}: TensorBoard was started with --logdir pointing at it."


# A bucket that lists no run is asked why at most this often (one request; it may come back).
REFUSAL_ASKED_EVERY_S = 30


@functools.lru_cache(maxsize=8)
def refused_listing(logdir: str, period: float) -> str | None:
    """Why the store refuses to list the bucket `logdir` (a typo in its name, credentials, an
    endpoint that does not answer), with what to check; None where it lists. Asked again each
    `period` (REFUSAL_ASKED_EVERY_S): a refused listing is not "no training runs yet"."""
    why = probe_listing(logdir)
    return f"TensorBoard cannot list {logdir}: {why}" if why else None


STALE_RUNS = (
    "The runs below are as TensorBoard last read them: its reloader stops at the first storage error, "
    "so restart tensorboard once the store answers"
)


class ListingCheck:
    """Whether the bucket still lists, asked off the request path (one request; the store may take its
    timeout to answer) at most every REFUSAL_ASKED_EVERY_S: `latest()` returns the last answer (None:
    it listed, or not asked yet) and asks again in the background when that answer is old."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._refused: str | None = None
        self._asked_at = -math.inf
        self._lock = threading.Lock()

    def latest(self) -> str | None:
        with self._lock:
            due = time.monotonic() - self._asked_at >= REFUSAL_ASKED_EVERY_S
            if due:
                self._asked_at = time.monotonic()
        if due:
            threading.Thread(target=self._ask, name="tb-trainhealth-listing", daemon=True).start()
        return self._refused

    def _ask(self) -> None:
        why = probe_listing(self.logdir)
        self._refused = f"TensorBoard cannot list {self.logdir} any more: {why}" if why else None


@functools.lru_cache(maxsize=8)
def listing_check(logdir: str) -> ListingCheck:
    return ListingCheck(logdir)


@functools.lru_cache(maxsize=8)
def bucket_unreadable(logdir: str) -> str | None:
    """Asked once per process (one request to the bucket): what is installed does not change."""
    return reader_problem(logdir, tb_tf)


def findings_answer(
    cache: DiagnosisCache, ctx: tb_context.RequestContext, files: event_files.BackgroundChecker | None, run: str
) -> dict[str, Any]:
    """One run's page: its report in full, and what can be drawn of it (its layers, the names of
    its series, its events).

    Raises NotFoundError for a run that is neither listed nor has unreadable event files."""
    diagnosis = cache.one(run, ctx)
    if diagnosis is None:
        report = RunReport.told(run, None, [], [], file_problems(files, set()).get(run, []))
        if not report.errors:
            raise errors.NotFoundError(f"no run named {run[:200]!r}")
        return {**report.to_json(), **_drawable(RunSignals(run)), "baseline_run": None}
    name = diagnosis.group.name
    worse = any(f.code == WORSE for f in diagnosis.findings)
    baseline = _recorded_baseline(diagnosis, cache.names(ctx)) if worse else None
    report = RunReport.of(diagnosis, file_problems(files, {name}).get(name, []), baseline)
    return {**report.to_json(), **_drawable(diagnosis.signals), "baseline_run": baseline}


def _recorded_baseline(diagnosis: Diagnosis, runs: list[str]) -> str | None:
    """The run of this logdir that `HealthCallback(baseline=PATH)` compared the run with: the one
    PATH ends with (the callback records the path it was given, relative to where training ran)."""
    comparisons = diagnosis.signals.events_of(ComparisonEvent)
    if not comparisons:
        return None
    path = comparisons[-1].baseline.replace("\\", "/").rstrip("/")
    found = [run for run in runs if run != diagnosis.group.name and (path == run or path.endswith("/" + run))]
    return max(found, key=len) if found else None


def _drawable(signals: RunSignals) -> dict[str, Any]:
    return {
        "layers": [layer.name for layer in signals.layers],
        "series": sorted(signals.series) + sorted(signals.layer_series),
        "events": [event.to_json() for event in signals.events],
    }


def find_diagnosis(cache: DiagnosisCache, ctx: tb_context.RequestContext, run: str) -> Diagnosis:
    """The run's fresh diagnosis; NotFoundError for a run TensorBoard does not list."""
    diagnosis = cache.one(run, ctx)
    if diagnosis is None:
        raise errors.NotFoundError(f"no run named {run[:200]!r}")
    return diagnosis


def series_answer(diagnosis: Diagnosis, names: list[str], points: int = DEFAULT_POINTS) -> dict[str, Any]:
    """The named series of a run, each downsampled to about `points` points (spikes and the
    first NaN/Inf kept), non-finite values as None (JSON has no NaN).

    Raises InvalidArgumentError for a name the run has no series of, or `points` out of range."""
    if not MIN_POINTS <= points <= MAX_POINTS_SENT:
        raise errors.InvalidArgumentError(f"points must be an integer from {MIN_POINTS} to {MAX_POINTS_SENT}")
    signals = diagnosis.signals
    unknown = [n for n in names if n not in signals.series and n not in signals.layer_series]
    if unknown:
        raise errors.InvalidArgumentError(f"unknown series for this run: {', '.join(unknown)[:200]}")
    out: dict[str, Any] = {"run": diagnosis.group.name, "series": {}, "layers": {}}
    for name in names:
        if name in signals.series:
            out["series"][name] = _scalar_points(signals, name, points)
        else:
            out["layers"][name] = _layer_points(signals, name, points)
    return out


def compare_answer(
    cache: DiagnosisCache,
    ctx: tb_context.RequestContext,
    run: str,
    baseline: str,
    points: int = DEFAULT_POINTS,
    logdir: str = "",
) -> dict[str, Any]:
    """The run against a baseline: `Comparison.to_json()` (the contract of `tb-trainhealth compare
    --json`), `axis` (the run's: what parted_at_step counts), `picked` (the baseline was chosen as
    BEST), `baseline_choice` (how: `baseline_pick.Choice.to_json`), `curves` (both runs' loss and
    validation curves on one x, points as series_answer gives them) and `layer_grad_ratio`
    (compare_curves.py).

    `baseline` BEST picks the best earlier run of the same model among the runs diagnosed so far
    (`baseline_pick.pick_baseline`: runs marked as good under a local `logdir` first, then runs
    without a warning); with none, the answer says so (baseline None, verdict "unknown"). Raises
    NotFoundError for an unknown run or baseline, InvalidArgumentError for a run compared with
    itself or bad `points`."""
    if not MIN_POINTS <= points <= MAX_POINTS_SENT:
        raise errors.InvalidArgumentError(f"points must be an integer from {MIN_POINTS} to {MAX_POINTS_SENT}")
    if baseline == run:
        raise errors.InvalidArgumentError(f"run and baseline are the same run ({run[:200]!r}): pick another baseline")
    ours = find_diagnosis(cache, ctx, run)
    if baseline == BEST:
        diagnoses, _pending = cache.all(ctx)  # runs still being diagnosed are not candidates yet
        findings = {d.signals.run: d.findings for d in diagnoses}
        marked = marked_good(logdir, [d.group.name for d in diagnoses])
        choice = pick_baseline(ours.signals, [d.signals for d in diagnoses], findings, marked)
        if choice.baseline is None:
            nothing = Comparison.without_baseline(ours.signals.run, choice.why)
            return _compare_json(nothing, ours.signals, None, choice, points)
        theirs = next(d for d in diagnoses if d.signals.run == choice.baseline)
    else:
        found = cache.one(baseline, ctx)
        if found is None:
            raise errors.NotFoundError(f"no baseline run named {baseline[:200]!r}")
        theirs = found
        choice = named_choice(ours.signals, theirs.signals)
    comparison = compare(ours.signals, theirs.signals, ours.findings, theirs.findings)
    return _compare_json(comparison, ours.signals, theirs.signals, choice, points)


def _compare_json(
    comparison: Comparison, run: RunSignals, baseline: RunSignals | None, choice: Choice, points: int
) -> dict[str, Any]:
    """The comparison's JSON and what the tab draws beside it (nothing without a baseline)."""
    curves, ratios = None, []
    if baseline is not None:
        overlay = compare_curves.overlay(run, baseline, comparison)
        curves = {
            "x": overlay.x,
            "loss": overlay.loss,
            "parted_at": overlay.parted_at,
            "run": {name: _points(series, points) for name, series in overlay.run.items()},
            "baseline": {name: _points(series, points) for name, series in overlay.baseline.items()},
            "bands": {name: _band_points(band, points) for name, band in overlay.bands.items()},
            "deciding": overlay.deciding,
            "panels": overlay.panels,
            "evidence": overlay.evidence,
        }
        ratios = compare_curves.layer_grad_ratio(run, baseline)
    return {
        **comparison.to_json(),
        "axis": run.axis,
        "picked": choice.rule != NAMED,
        "baseline_choice": choice.to_json(),
        "curves": curves,
        "layer_grad_ratio": ratios,
    }


def compare_all_answer(
    cache: DiagnosisCache, ctx: tb_context.RequestContext, baseline: str, logdir: str = ""
) -> dict[str, Any]:
    """Every run against one baseline, worst first: "comparisons", the list `tb-trainhealth compare
    LOGDIR --baseline RUN|best --json` prints (`many.against_one`, `many.against_best`: the baseline
    itself is not compared with itself), from the cache's diagnoses, nothing read again; "pending", the
    runs still being diagnosed (in the list at a later request). `baseline` BEST: each run against
    the best earlier run of its own model (runs marked as good under a local `logdir` first), as the
    compare route picks it. Raises NotFoundError for a baseline no run here is named."""
    diagnoses, pending = cache.all(ctx)
    if baseline == BEST:
        marked = marked_good(logdir, [d.group.name for d in diagnoses])
        pairs = many.against_best(diagnoses, {d.signals.run for d in diagnoses if d.group.name in marked})
    else:
        theirs = next((d for d in diagnoses if d.group.name == baseline), None) or cache.one(baseline, ctx)
        if theirs is None:
            names = sorted(d.group.name for d in diagnoses) + sorted(g.name for g in pending)
            shown = ", ".join(repr(n[:100]) for n in names[:NAMES_SHOWN]) + (
                f", ... ({len(names)} in all)" if len(names) > NAMES_SHOWN else ""
            )
            raise errors.NotFoundError(
                f"no baseline run named {baseline[:200]!r}: give one of the runs ({shown or 'none yet'}) or {BEST!r}"
            )
        pairs = many.against_one(diagnoses, theirs)
        pending = [g for g in pending if g.name != baseline]  # diagnosed just now, to compare with
    return {"comparisons": [pair.to_json() for pair in pairs], "pending": [g.name for g in pending]}


def _scalar_points(signals: RunSignals, name: str, points: int) -> dict[str, Any]:
    return _points(signals.series[name], points)


def _points(series: Series, points: int) -> dict[str, Any]:
    keep = downsample_index(series.values, points)
    return {"steps": series.steps[keep].tolist(), "values": _finite_or_none(series.values[keep])}


def _band_points(band: compare_curves.Band, points: int) -> dict[str, Any]:
    """A band evenly thinned to about `points` (it is smooth: no spike to keep)."""
    keep = np.unique(np.linspace(0, len(band.steps) - 1, min(len(band.steps), points)).round().astype(int))
    return {
        "steps": band.steps[keep].tolist(),
        "low": _finite_or_none(band.low[keep]),
        "high": _finite_or_none(band.high[keep]),
        "what": band.what,
    }


def _layer_points(signals: RunSignals, name: str, points: int) -> dict[str, Any]:
    layered = signals.layer_series[name]
    keep = downsample_index(layered.values, points)
    return {
        "names": [layer.name for layer in signals.layers],
        "steps": layered.steps[keep].tolist(),
        "values": [_finite_or_none(row) for row in layered.values[keep]],
    }


def downsample_index(values: np.ndarray, points: int) -> np.ndarray:
    """Indices of at most ~points points that keep each bucket's min, max and first NaN/Inf,
    so spikes and the first non-finite step survive on the chart (per-layer rows: by row max)."""
    n = len(values)
    if n <= points:
        return np.arange(n)
    magnitude = (
        values if values.ndim == 1 else np.where(np.isfinite(values).all(axis=1), np.nanmax(values, axis=1), np.nan)
    )
    keep = {0, n - 1}
    edges = np.linspace(0, n, max(1, points // 3) + 1).astype(int)
    for start, end in itertools.pairwise(edges):
        segment = magnitude[start:end]
        finite = np.isfinite(segment)
        if not finite.all():
            keep.add(start + int(np.argmax(~finite)))
        if finite.any():
            masked = np.where(finite, segment, np.nan)
            keep.update((start + int(np.nanargmin(masked)), start + int(np.nanargmax(masked))))
    return np.array(sorted(keep))


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values.tolist()]
