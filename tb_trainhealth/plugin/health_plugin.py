"""The "Health" tab: TensorBoard plugin backend.

Reads only through `context.data_provider` (works with the Python ingester and the
Rust data server), with each request's own request context, as TensorBoard's scalars
plugin does. Every route answers JSON; bad parameters (`tensorboard.errors.InvalidArgumentError`)
get a 400 JSON error, unknown runs (`NotFoundError`) a 404, never a 500 with a traceback.
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
import logging
import math
import re
from typing import Any

import numpy as np
from tensorboard import errors
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_trainhealth.contract import series, tags
from tb_trainhealth.findings import STATUS_ORDER
from tb_trainhealth.plugin.diagnosis_cache import ANSWER_WITHIN_SECONDS, DiagnosisCache
from tb_trainhealth.plugin.lead_chart import lead_chart
from tb_trainhealth.read import event_files
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.run_paths import is_local
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.timeline import timeline

logger = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 1000
MAX_POINTS = 2000
DEFAULT_POINTS = 500
# Listing every run's tags costs ~0.7 s on 50 runs x 20k steps (Python data path): the
# routes of one page refresh share a listing for this long (TensorBoard reloads every 5 s).
LISTING_TTL_SECONDS = 5.0
MAX_EXPERIMENTS = 16


def _json_response(request, payload: Any, code: int = 200, headers=None):
    return http_util.Respond(
        request, json.dumps(payload, allow_nan=False), "application/json", code=code, headers=headers
    )


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values.tolist()]


def _last_position(signals: RunSignals) -> dict[str, int | None]:
    """How far a run got, on its own axis: batch steps, or epochs where that is all it has."""
    last, epochs = signals.last_position, signals.axis == series.EPOCH_AXIS
    return {"last_step": None if epochs else last, "last_epoch": last if epochs else None}


def _downsample_index(values: np.ndarray, points: int) -> np.ndarray:
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


# Status of a run whose first diagnosis is still running (the tab polls again soon).
PENDING = "pending"


class HealthPlugin(base_plugin.TBPlugin):
    plugin_name = tags.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._provider = context.data_provider
        self._caches: dict[str, DiagnosisCache] = {}
        # Event files TensorBoard cannot read in full (garbage, truncated, bad checksums): its
        # loaders skip them silently. A local --logdir only (URLs such as gs://: not checked;
        # --logdir_spec leaves context.logdir empty).
        logdir = getattr(context, "logdir", None) or ""
        self._files = (
            event_files.BackgroundChecker(logdir, ttl=LISTING_TTL_SECONDS) if logdir and is_local(logdir) else None
        )
        if self._files is not None:
            self._files.latest(wait=0)  # under way before the first request, beside TensorBoard's loading

    def _file_problems(self, names: set[str]) -> dict[str, list[event_files.FileProblem]]:
        """The logdir's event-file problems by run group (a first look waits for them briefly)."""
        if self._files is None:
            return {}
        return event_files.by_group(self._files.latest(wait=ANSWER_WITHIN_SECONDS), names)

    def _cache(self, request) -> DiagnosisCache:
        """The experiment's diagnoses. It keeps no request context: every call into it takes
        the current request's (`_ctx`), so the data provider always sees who is asking."""
        from tensorboard import plugin_util

        experiment = plugin_util.experiment_id(request.environ)
        if experiment not in self._caches:
            if len(self._caches) >= MAX_EXPERIMENTS:  # the id comes from the URL: bound what it can allocate
                self._caches.pop(next(iter(self._caches)))
            reader = SignalReader(
                self._provider, experiment, listing_ttl=LISTING_TTL_SECONDS, relist_in_background=True
            )
            self._caches[experiment] = DiagnosisCache(reader)
        return self._caches[experiment]

    # -- TBPlugin -------------------------------------------------------------------------
    def get_plugin_apps(self):
        return {
            "/index.js": self._serve_bundle,
            "/runs": self._guard(self._runs),
            "/findings": self._guard(self._findings),
            "/series": self._guard(self._series),
        }

    def data_plugin_names(self):
        return (tags.PLUGIN_NAME, tags.RECORDS_PLUGIN_NAME, "scalars")  # Keras-only runs too

    def is_active(self) -> bool:
        return True  # even an empty logdir gets the tab, with the snippet to start

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Health")

    # -- routes ---------------------------------------------------------------------------
    @wrappers.Request.application
    def _serve_bundle(self, request):
        bundle = importlib.resources.files("tb_trainhealth.plugin").joinpath("static/index.js").read_bytes()
        return http_util.Respond(request, bundle, "text/javascript")

    def _guard(self, handler):
        @wrappers.Request.application
        def route(request):
            try:
                return _json_response(request, handler(request))
            except errors.PublicError as err:  # InvalidArgumentError 400, NotFoundError 404, provider errors
                return _json_response(request, {"error": str(err)}, err.http_code, err.headers)
            except Exception:  # the plugin never takes TensorBoard down
                logger.exception("tb-trainhealth: %s failed", request.path)
                return _json_response(request, {"error": "internal error; see the TensorBoard log"}, 500)

        return route

    def _runs(self, request) -> dict[str, Any]:
        """Every run, worst first; runs still being diagnosed come last as "pending"."""
        _check_params(request, allowed=())
        diagnoses, pending = self._cache(request).all(_ctx(request))
        problems = self._file_problems({d.group.name for d in diagnoses} | {g.name for g in pending})
        runs = []
        for d in diagnoses:
            counts = {label: 0 for label in ("critical", "warning", "info")}
            for finding in d.findings:
                counts[finding.severity.label] += 1
            runs.append(
                {
                    "run": d.group.name,
                    "status": d.status,
                    "counts": counts,
                    "has_health_data": d.signals.has_health_data,
                    **_last_position(d.signals),
                    **_file_errors(d.errors, problems.pop(d.group.name, [])),
                }
            )
        for group in pending:
            runs.append(_unread_run(group.name, PENDING, problems.pop(group.name, [])))
        for name, found in problems.items():  # runs TensorBoard lists not at all: nothing in them is readable
            if any(p.is_error for p in found):
                runs.append(_unread_run(name, "ok", found))
        order = {**STATUS_ORDER, PENDING: len(STATUS_ORDER)}
        runs.sort(key=lambda r: (order[r["status"]], -r["counts"]["critical"], -r["counts"]["warning"], r["run"]))
        return {"runs": runs}

    def _findings(self, request) -> dict[str, Any]:
        _check_params(request, allowed=("run",))
        run = _param(request, "run")
        diagnosis = self._cache(request).one(run, _ctx(request))
        if diagnosis is None:
            found = self._file_problems(set()).get(run, [])
            if not any(p.is_error for p in found):
                raise errors.NotFoundError(f"no run named {run[:200]!r}")
            return {  # listed by the runs route for its unreadable event files only
                "run": run,
                "status": "ok",
                "has_health_data": False,
                "axis": series.STEP_AXIS,
                "layers": [],
                "series": [],
                "findings": [],
                "events": [],
                **_file_errors([], found),
            }
        return {
            "run": diagnosis.group.name,
            "status": diagnosis.status,
            "has_health_data": diagnosis.signals.has_health_data,
            "axis": diagnosis.signals.axis,
            "layers": [layer.name for layer in diagnosis.signals.layers],
            "series": sorted(diagnosis.signals.series) + sorted(diagnosis.signals.layer_series),
            "findings": [f.to_dict() for f in diagnosis.findings],
            "lead": lead_chart(diagnosis.signals, diagnosis.findings),
            "timeline": [entry.to_dict() for entry in timeline(diagnosis.signals)],
            "events": [event.to_json() for event in diagnosis.signals.events],
            **_file_errors(diagnosis.errors, self._file_problems({diagnosis.group.name}).get(diagnosis.group.name, [])),
        }

    def _series(self, request) -> dict[str, Any]:
        _check_params(request, allowed=("run", "names", "points"))
        diagnosis = self._diagnosis(request)
        names = _param(request, "names").split(",")
        points = _int_param(request, "points", DEFAULT_POINTS, 2, MAX_POINTS)
        signals = diagnosis.signals
        unknown = [n for n in names if n not in signals.series and n not in signals.layer_series]
        if unknown:
            raise errors.InvalidArgumentError(f"unknown series for this run: {', '.join(unknown)[:200]}")
        out: dict[str, Any] = {"run": diagnosis.group.name, "series": {}, "layers": {}}
        for name in names:
            if name in signals.series:
                series = signals.series[name]
                keep = _downsample_index(series.values, points)
                out["series"][name] = {
                    "steps": series.steps[keep].tolist(),
                    "values": _finite_or_none(series.values[keep]),
                }
            else:
                layered = signals.layer_series[name]
                keep = _downsample_index(layered.values, points)
                out["layers"][name] = {
                    "names": [layer.name for layer in signals.layers],
                    "steps": layered.steps[keep].tolist(),
                    "values": [_finite_or_none(row) for row in layered.values[keep]],
                }
        return out

    def _diagnosis(self, request):
        run = _param(request, "run")
        diagnosis = self._cache(request).one(run, _ctx(request))
        if diagnosis is None:
            raise errors.NotFoundError(f"no run named {run[:200]!r}")
        return diagnosis


def _file_errors(errors: list[str], problems: list[event_files.FileProblem]) -> dict[str, Any]:
    """`errors`: every error in plain words (the unreadable files' too); `file_errors`: one
    {"file", "error", "kind"} per event file not read in full, kind one of event_files'
    UNREADABLE, CORRUPT, TRUNCATED (errors) or PARTIAL_LIVE (a note: still being written)."""
    return {
        "errors": [*errors, *(p.text() for p in problems if p.is_error)],
        "file_errors": [p.to_dict() for p in problems],
    }


def _unread_run(name: str, status: str, problems: list[event_files.FileProblem]) -> dict[str, Any]:
    """A run not diagnosed (yet): pending, or listed only for its unreadable event files."""
    return {
        "run": name,
        "status": status,
        "counts": {"critical": 0, "warning": 0, "info": 0},
        "has_health_data": False,
        "last_step": None,
        "last_epoch": None,
        **_file_errors([], problems),
    }


def _ctx(request):
    """This request's context (auth, client feature flags, ...) for the data provider."""
    from tensorboard import plugin_util

    return plugin_util.context(request.environ)


def _check_params(request, allowed: tuple[str, ...]) -> None:
    for key in request.args:
        if key not in allowed and key != "experiment":
            raise errors.InvalidArgumentError(f"unknown query parameter {key[:100]!r}")
        if len(request.args.getlist(key)) > 1:
            raise errors.InvalidArgumentError(f"query parameter {key[:100]!r} given more than once")


def _param(request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    if len(value) > MAX_PARAM_LENGTH or "\x00" in value:
        raise errors.InvalidArgumentError(f"invalid query parameter {name!r}")
    return value


def _int_param(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not low <= int(raw) <= high:
        raise errors.InvalidArgumentError(f"{name} must be an integer from {low} to {high}")
    return int(raw)


class HealthLoader(base_plugin.TBLoader):
    """Keeps every tb-trainhealth record under default flags; the user's --samples_per_plugin wins."""

    def fix_flags(self, flags) -> None:
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            samples.setdefault(tags.RECORDS_PLUGIN_NAME, 0)
            samples.setdefault(tags.PLUGIN_NAME, series.MAX_POINTS)  # what the rules see; records in full

    def load(self, context):
        return HealthPlugin(context)
