"""Plugin backend through TensorBoard's own WSGI app (werkzeug test client), on real training logs."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_process import wait_for
from werkzeug import test as werkzeug_test
from werkzeug import wrappers

from tb_trainhealth.plugin import health_plugin
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

PREFIX = "/data/plugin/trainhealth"


def client_for(logdir: str) -> werkzeug_test.Client:
    provider = open_logdir(logdir)
    context = base_plugin.TBContext(logdir=logdir, data_provider=provider)
    app = application.TensorBoardWSGI([health_plugin.HealthPlugin(context)], data_provider=provider)
    return werkzeug_test.Client(app, wrappers.Response)


def get_json(client, path: str, status: int = 200):
    response = client.get(PREFIX + path)
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    return json.loads(response.get_data(as_text=True))


@pytest.fixture(scope="module")
def client(scenario_logdir):
    return client_for(scenario_logdir)


def test_runs_route_lists_every_run_worst_first_with_the_engines_status(client, scenario_findings):
    runs = get_json(client, "/runs")["runs"]
    assert {r["run"] for r in runs} == set(scenario_findings)
    order = ["critical", "warning", "ok"]
    assert [r["status"] for r in runs] == sorted((r["status"] for r in runs), key=order.index)
    by_name = {r["run"]: r for r in runs}
    assert by_name["nan_input"]["status"] == "critical" and by_name["nan_input"]["counts"]["critical"] >= 1
    assert by_name["healthy_cnn"]["status"] == "ok" and by_name["healthy_cnn"]["has_health_data"]


def test_findings_route_gives_the_same_findings_as_the_cli_engine(client, scenario_findings):
    for run, findings in scenario_findings.items():
        payload = get_json(client, f"/findings?run={run}")
        assert [f["code"] for f in payload["findings"]] == [f.code for f in findings]
        shown = [{k: v for k, v in f.items() if k not in ("plan_steps", "trial_note")} for f in payload["findings"]]
        assert shown == [
            {k: v for k, v in f.to_dict().items() if k != "fixes"} for f in findings
        ]  # the plan says what to do
        assert len(payload["plan"]) <= 3 and bool(payload["plan"]) == any(f.severity.label != "info" for f in findings)
    nan = get_json(client, "/findings?run=nan_input")
    assert any(e["kind"] == "nonfinite" for e in nan["events"])
    assert "layer_grad_norm" in nan["series"] and nan["layers"]


def test_series_route_downsamples_and_turns_nan_into_null(client):
    payload = get_json(client, "/series?run=nan_input&names=grad_norm,layer_grad_norm&points=20")
    grad = payload["series"]["grad_norm"]
    assert 2 <= len(grad["steps"]) <= 20 and grad["steps"] == sorted(grad["steps"])
    assert None in grad["values"]  # the NaN steps
    layers = payload["layers"]["layer_grad_norm"]
    assert len(layers["names"]) == len(layers["values"][0])


def test_bundle_is_served_as_javascript(client):
    response = client.get(PREFIX + "/index.js")
    assert response.status_code == 200 and "javascript" in response.headers["Content-Type"]
    assert b"render" in response.get_data()


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/findings?run=no_such_run", 404),
        ("/findings?run=../../etc/passwd", 404),
        ("/findings", 400),
        ("/findings?run=", 400),
        ("/findings?run=nan_input&run=healthy_cnn", 400),
        ("/findings?run=nan_input&bogus=1", 400),
        ("/findings?run=" + "x" * 5000, 400),
        ("/findings?run=nan%00input", 400),
        ("/series?run=nan_input&names=loss&points=abc", 400),
        ("/series?run=nan_input&names=loss&points=-5", 400),
        ("/series?run=nan_input&names=loss&points=99999999999999999999", 400),
        ("/series?run=nan_input&names=loss&points=%C2%B2", 400),  # '²' passes str.isdigit()
        ("/series?run=nan_input&names=not_a_series", 400),
        ("/series?run=nan_input", 400),
        ("/runs?x=%FF%FE", 400),
        ("/findings?run=%E2%98%83%F0%9F%92%A5", 404),
    ],
)
def test_bad_queries_get_a_json_4xx_never_a_500(client, path, status):
    payload = get_json(client, path, status)
    assert payload["error"] and "Traceback" not in payload["error"]


def test_diagnoses_are_cached_until_a_run_has_new_data(scenario_logdir, monkeypatch):
    reads = []
    original = SignalReader.read

    def counting_read(self, group, *args):
        reads.append(group.name)
        return original(self, group, *args)

    monkeypatch.setattr(SignalReader, "read", counting_read)
    client = client_for(scenario_logdir)
    # The first look: on a busy machine the answer's time budget ends before every run is read and
    # the rest finish in the background (pending): count once none is left.
    assert wait_for(lambda: all(r["status"] != "pending" for r in get_json(client, "/runs")["runs"]), timeout=300)
    first = len(reads)
    assert sorted(reads) == sorted(set(reads))  # each run read once
    get_json(client, "/runs")
    get_json(client, "/findings?run=nan_input")
    assert len(reads) == first  # nothing new on disk: nothing re-read


def test_a_slow_first_look_answers_in_time_and_finishes_in_the_background(
    scenario_logdir, scenario_findings, monkeypatch
):
    """Runs not diagnosed within the time budget come back "pending", last; later polls
    fill them in with the engine's own statuses; a pending run's findings are served at once."""
    import time

    from tb_trainhealth.findings import run_status
    from tb_trainhealth.plugin import diagnosis_cache

    original = SignalReader.read

    def slow_read(self, group, *args):
        time.sleep(0.3)
        return original(self, group, *args)

    monkeypatch.setattr(SignalReader, "read", slow_read)
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 0.0)
    client = client_for(scenario_logdir)
    first = get_json(client, "/runs")["runs"]
    assert {r["status"] for r in first} == {"pending"}
    assert all(r["counts"] == {"critical": 0, "warning": 0, "info": 0} for r in first)
    assert get_json(client, "/findings?run=nan_input")["findings"][0]["code"] == "nonfinite"

    expected = {run: run_status(findings) for run, findings in scenario_findings.items()}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = get_json(client, "/runs")["runs"]
        statuses = [r["status"] for r in runs]
        if "pending" not in statuses:
            break
        assert statuses == sorted(statuses, key=["critical", "warning", "ok", "pending"].index)
        time.sleep(0.2)
    assert {r["run"]: r["status"] for r in runs} == expected


class RecordingProvider:
    """Wraps a data provider; records, per call, who asked (the request context's `who` flag)."""

    def __init__(self, inner, fail_with=None):
        self._inner, self._fail_with = inner, fail_with
        self.calls: list[tuple[str, object]] = []

    def __getattr__(self, name):
        method = getattr(self._inner, name)

        def recorded(ctx, **kwargs):
            self.calls.append((name, ctx.client_feature_flags.get("who")))
            if self._fail_with is not None:
                raise self._fail_with
            return method(ctx, **kwargs)

        return recorded


def recording_client(logdir: str, fail_with=None) -> tuple[werkzeug_test.Client, RecordingProvider]:
    provider = open_logdir(logdir)
    recording = RecordingProvider(provider, fail_with)
    plugin = health_plugin.HealthPlugin(base_plugin.TBContext(logdir=logdir, data_provider=recording))
    app = application.TensorBoardWSGI([plugin], data_provider=provider)
    return werkzeug_test.Client(app, wrappers.Response), recording


def get_as(client, path: str, who: str):
    response = client.get(PREFIX + path, headers={"X-TensorBoard-Feature-Flags": json.dumps({"who": who})})
    assert response.status_code == 200, response.get_data(as_text=True)
    return json.loads(response.get_data(as_text=True))


def test_every_request_reads_with_its_own_request_context(scenario_logdir, monkeypatch):
    """Like TensorBoard's own plugins: the data provider sees the context (auth, feature flags)
    of the request being served, not the first request's; background diagnoses that a request
    starts read with that request's context."""
    from tb_trainhealth.plugin import diagnosis_cache

    monkeypatch.setattr(health_plugin, "LISTING_TTL_SECONDS", 0.0)  # list on every request
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 600.0)  # /runs waits for its background reads
    client, recording = recording_client(scenario_logdir)

    get_as(client, "/findings?run=nan_input", "first")
    assert {who for _, who in recording.calls} == {"first"}
    assert any(name.startswith("read_") for name, _ in recording.calls)

    recording.calls.clear()
    get_as(client, "/findings?run=healthy_cnn", "second")  # a run not read yet: read now
    assert {name for name, _ in recording.calls} >= {"list_scalars", "read_scalars"}
    assert {who for _, who in recording.calls} == {"second"}

    recording.calls.clear()
    runs = get_as(client, "/runs", "third")["runs"]  # the other runs: read on the pool's threads
    assert "pending" not in {r["status"] for r in runs}
    assert any(name.startswith("read_") for name, _ in recording.calls)
    assert {who for _, who in recording.calls} == {"third"}


@pytest.mark.parametrize("path", ["/runs", "/findings?run=nan_input"])
def test_a_data_provider_error_is_answered_with_its_code_as_json(scenario_logdir, path):
    from tensorboard import errors

    client, _ = recording_client(scenario_logdir, fail_with=errors.PermissionDeniedError("not yours"))
    payload = get_json(client, path, 403)
    assert "not yours" in payload["error"]


def test_loader_keeps_every_record_unless_the_user_says_otherwise():
    class Flags:
        samples_per_plugin: dict

    flags = Flags()
    flags.samples_per_plugin = {}
    health_plugin.HealthLoader().fix_flags(flags)
    assert flags.samples_per_plugin["trainhealth_records"] == 0
    flags.samples_per_plugin = {"trainhealth_records": 7}
    health_plugin.HealthLoader().fix_flags(flags)
    assert flags.samples_per_plugin["trainhealth_records"] == 7


def test_plugin_module_does_not_import_tensorflow():
    import subprocess
    import sys

    code = "import sys, tb_trainhealth.plugin.health_plugin; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "False"


from hypothesis import given, settings
from hypothesis import strategies as st

hostile_text = st.text(max_size=300) | st.sampled_from(
    ["../../etc/passwd", "\x00", "%00", "%FF", "nan_input\x00", "9" * 40]
)


@settings(max_examples=150, deadline=None)
@given(
    route=st.sampled_from(["runs", "findings", "series", "index.js", "nope"]),
    params=st.dictionaries(st.sampled_from(["run", "names", "points", "x", ""]), hostile_text, max_size=4),
)
def test_fuzzed_queries_never_get_a_500(client, route, params):
    from urllib.parse import urlencode

    response = client.get(f"{PREFIX}/{route}?{urlencode(params)}")
    assert response.status_code < 500, (route, params, response.get_data(as_text=True)[:300])


class BlockingListings:
    """Wraps a data provider; once `block()` is called, listing calls wait until `release()`."""

    def __init__(self, inner):
        import threading

        self._inner, self._gate, self.listings = inner, threading.Event(), 0
        self._gate.set()

    def block(self):
        self._gate.clear()

    def release(self):
        self._gate.set()

    def __getattr__(self, name):
        method = getattr(self._inner, name)
        if not name.startswith("list_"):
            return method

        def listing(ctx, **kwargs):
            assert self._gate.wait(timeout=60), "never released"
            self.listings += 1
            return method(ctx, **kwargs)

        return listing


def test_the_runs_route_never_waits_for_a_new_listing(scenario_logdir, scenario_findings, monkeypatch):
    """TensorBoard's Python loader lists a big logdir in seconds: an expired listing is served
    while the new one is made on another thread."""
    monkeypatch.setattr(health_plugin, "LISTING_TTL_SECONDS", 0.0)
    provider = BlockingListings(open_logdir(scenario_logdir))
    plugin = health_plugin.HealthPlugin(base_plugin.TBContext(logdir=scenario_logdir, data_provider=provider))
    client = werkzeug_test.Client(application.TensorBoardWSGI([plugin], data_provider=provider), wrappers.Response)
    first = {r["run"] for r in get_json(client, "/runs")["runs"]}
    assert first == set(scenario_findings)

    provider.block()  # every listing from now on hangs until released
    listed = provider.listings
    again = {r["run"] for r in get_json(client, "/runs")["runs"]}  # would hang here if it waited
    assert again == first and provider.listings == listed
    assert get_json(client, "/findings?run=nan_input")["findings"][0]["code"] == "nonfinite"

    provider.release()
    (reader,) = [cache._reader for cache in plugin._caches.values()]
    reader._relisting.result(timeout=60)
    assert provider.listings == listed + 4  # the new listing was made, in the background
