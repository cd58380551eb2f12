"""The "Health" tab: TensorBoard plugin backend.

Reads only through `context.data_provider` (works with the Python ingester and the
Rust data server), with each request's own request context, as TensorBoard's scalars
plugin does. Every route answers JSON; bad parameters (`tensorboard.errors.InvalidArgumentError`)
get a 400 JSON error, unknown runs (`NotFoundError`) a 404, never a 500 with a traceback.
A route only parses and checks its query parameters: what it answers is computed in
route_answers.py, from plain arguments; http_api.md documents each route, its parameters and its JSON.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import re
import sys
from typing import Any

from tensorboard import errors
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_trainhealth.contract import series, tags
from tb_trainhealth.plugin import route_answers
from tb_trainhealth.plugin.diagnosis_cache import DiagnosisCache
from tb_trainhealth.plugin.route_answers import DEFAULT_POINTS, MAX_POINTS_SENT, MIN_POINTS
from tb_trainhealth.read import event_files
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.run_paths import is_local

logger = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 1000
# Listing every run's tags costs ~0.7 s on 50 runs x 20k steps (Python data path): the
# routes of one page refresh share a listing for this long (TensorBoard reloads every 5 s).
LISTING_TTL_SECONDS = 5.0
MAX_EXPERIMENTS = 16


def _json_response(request, payload: Any, code: int = 200, headers=None):
    return http_util.Respond(
        request, json.dumps(payload, allow_nan=False), "application/json", code=code, headers=headers
    )


class HealthPlugin(base_plugin.TBPlugin):
    plugin_name = tags.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._provider = context.data_provider
        self._caches: dict[str, DiagnosisCache] = {}
        # Event files TensorBoard cannot read in full (garbage, truncated, bad checksums): its
        # loaders skip them silently. A local --logdir only (URLs such as gs://: not checked;
        # --logdir_spec leaves context.logdir empty).
        logdir = getattr(context, "logdir", None) or ""
        self._logdir = logdir  # where runs marked as good are looked for (compare?baseline=best)
        self._files = (
            event_files.BackgroundChecker(logdir, ttl=LISTING_TTL_SECONDS) if logdir and is_local(logdir) else None
        )
        if self._files is not None:
            self._files.latest(wait=0)  # under way before the first request, beside TensorBoard's loading

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
            "/compare": self._guard(self._compare),
            "/compare_all": self._guard(self._compare_all),
        }

    def data_plugin_names(self):
        return (tags.PLUGIN_NAME, tags.RECORDS_PLUGIN_NAME, tags.SCALARS_PLUGIN_NAME)  # Keras-only runs too

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
        """/runs: no parameters; every run of the experiment, worst first."""
        _check_params(request, allowed=())
        return route_answers.runs_answer(self._cache(request), _ctx(request), self._files, self._logdir)

    def _findings(self, request) -> dict[str, Any]:
        """/findings?run=: one run's page."""
        _check_params(request, allowed=("run",))
        run = _param(request, "run")
        return route_answers.findings_answer(self._cache(request), _ctx(request), self._files, run)

    def _series(self, request) -> dict[str, Any]:
        """/series?run=&names=a,b[&points=]: the run is looked up first, so an unknown run
        is a 404 even when its other parameters are bad too."""
        _check_params(request, allowed=("run", "names", "points"))
        run = _param(request, "run")
        diagnosis = route_answers.find_diagnosis(self._cache(request), _ctx(request), run)
        names = _param(request, "names").split(",")
        points = _int_param(request, "points", DEFAULT_POINTS, MIN_POINTS, MAX_POINTS_SENT)
        return route_answers.series_answer(diagnosis, names, points)

    def _compare(self, request) -> dict[str, Any]:
        """/compare?run=&baseline=[&points=]: baseline a run's name, or "best" (the best earlier
        run of the same model)."""
        _check_params(request, allowed=("run", "baseline", "points"))
        run, baseline = _param(request, "run"), _param(request, "baseline")
        points = _int_param(request, "points", DEFAULT_POINTS, MIN_POINTS, MAX_POINTS_SENT)
        cache, ctx = self._cache(request), _ctx(request)
        return route_answers.compare_answer(cache, ctx, run, baseline, points, logdir=self._logdir)

    def _compare_all(self, request) -> dict[str, Any]:
        """/compare_all?baseline=: every run against a run's name, or each against its "best"
        earlier run of the same model; worst first."""
        _check_params(request, allowed=("baseline",))
        baseline = _param(request, "baseline")
        return route_answers.compare_all_answer(self._cache(request), _ctx(request), baseline, logdir=self._logdir)


def _ctx(request):
    """This request's context (auth, client feature flags, ...) for the data provider."""
    from tensorboard import plugin_util

    return plugin_util.context(request.environ)


def _check_params(request, allowed: tuple[str, ...]) -> None:
    """Unknown or repeated parameters are a 400, not silently ignored ("experiment": TensorBoard's)."""
    for key in request.args:
        if key not in allowed and key != "experiment":
            raise errors.InvalidArgumentError(f"unknown query parameter {key[:100]!r}")
        if len(request.args.getlist(key)) > 1:
            raise errors.InvalidArgumentError(f"query parameter {key[:100]!r} given more than once")


def _param(request, name: str) -> str:
    """A required parameter, bounded: it ends up in error messages and dictionary lookups."""
    value = request.args.get(name)
    if value is None or value == "":
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    if len(value) > MAX_PARAM_LENGTH or "\x00" in value:
        raise errors.InvalidArgumentError(f"invalid query parameter {name!r}")
    return value


def _int_param(request, name: str, default: int, low: int, high: int) -> int:
    """An optional integer in [low, high]; plain ASCII digits only (str.isdigit() takes '²')."""
    raw = request.args.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not low <= int(raw) <= high:
        raise errors.InvalidArgumentError(f"{name} must be an integer from {low} to {high}")
    return int(raw)


def _say_if_the_bucket_is_unreadable(logdir: str) -> None:
    """TensorBoard with TensorFlow refuses an s3:// logdir before any tab loads (TensorFlow 2.21
    has none; its message points at tensorflow-io, not released for it): say what does work, first."""
    if logdir and not is_local(logdir):
        problem = route_answers.bucket_unreadable(logdir)
        if problem:
            print(f"tb-trainhealth: {problem}", file=sys.stderr)


class HealthLoader(base_plugin.TBLoader):
    """Keeps every tb-trainhealth record under default flags; the user's --samples_per_plugin wins."""

    def fix_flags(self, flags) -> None:
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            samples.setdefault(tags.RECORDS_PLUGIN_NAME, 0)
            samples.setdefault(tags.PLUGIN_NAME, series.MAX_POINTS)  # what the rules see; records in full
        _say_if_the_bucket_is_unreadable(getattr(flags, "logdir", "") or "")

    def load(self, context):
        return HealthPlugin(context)
