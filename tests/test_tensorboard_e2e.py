"""A real `tensorboard` process, both data paths: the Health tab's routes answer like the CLI."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from tensorboard_process import get_json, running_tensorboard, wait_for

from bench.synthetic_logs import EVENT_KINDS, write_run
from tb_trainhealth.findings import run_status

STEPS, EVENTS = 100_000, 1000
PLUGIN = "/data/plugin/trainhealth"
LIVE_TRAINING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_training.py")


@pytest.fixture(scope="module")
def e2e_logdir(scenario_logdir, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("e2e")
    shutil.copytree(scenario_logdir, root, dirs_exist_ok=True)
    write_run(str(root / "long_run"), steps=STEPS, layers=4, events=EVENTS, layer_every=10, event_kinds=EVENT_KINDS)
    return str(root)


@pytest.fixture(scope="module", params=[False, True], ids=["python-ingester", "rust-data-server"])
def tensorboard_url(request, e2e_logdir):
    with running_tensorboard(e2e_logdir, load_fast=request.param) as url:
        yield url


def test_plugin_is_listed_and_enabled(tensorboard_url):
    listing = get_json(tensorboard_url + "/data/plugins_listing")["trainhealth"]
    assert listing["enabled"] and listing["tab_name"] == "Health"
    assert listing["loading_mechanism"]["module_path"].endswith("/data/plugin/trainhealth/index.js")


def test_routes_return_the_same_diagnoses_as_the_cli(tensorboard_url, scenario_findings):
    expected = {run: run_status(findings) for run, findings in scenario_findings.items()}

    seen: dict[str, str] = {}

    def all_loaded():
        # The Rust data server commits a run's data every few seconds while it still reads
        # it, so "nothing pending" can be a diagnosis of half a run: poll until the last
        # commit is in (statuses settle) or the timeout, then compare.
        seen.clear()
        seen.update((r["run"], r["status"]) for r in get_json(tensorboard_url + PLUGIN + "/runs")["runs"])
        loaded = set(expected) | {"long_run"} <= set(seen) and "pending" not in seen.values()
        return loaded and {run: seen[run] for run in expected} == expected

    wait_for(all_loaded, timeout=180)
    assert {run: seen.get(run) for run in expected} == expected
    for run, findings in scenario_findings.items():
        payload = get_json(f"{tensorboard_url}{PLUGIN}/findings?run={run}")
        assert [f["code"] for f in payload["findings"]] == [f.code for f in findings], run


def test_every_event_of_a_long_run_survives_default_sampling(tensorboard_url, e2e_logdir):
    """100,000 steps, 1,000 events of three kinds: the tab and the CLI show every one."""

    def loaded():
        payload = get_json(f"{tensorboard_url}{PLUGIN}/findings?run=long_run")
        return payload if len(payload["events"]) >= EVENTS and payload["layers"] else None

    payload = wait_for(loaded, timeout=120)
    assert payload is not None, "events were lost"
    steps = sorted(e["step"] for e in payload["events"])
    assert len(steps) == len(set(steps)) == EVENTS and steps[0] == 1 and steps[-1] == STEPS
    counts = collections.Counter(e["kind"] for e in payload["events"])
    assert counts == {kind: len(range(i, EVENTS, len(EVENT_KINDS))) for i, kind in enumerate(EVENT_KINDS)}
    assert "loss_divergence" not in [f["code"] for f in payload["findings"]]  # run 0 of the generator is healthy

    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", e2e_logdir, "--json"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    runs = {r["run"]: r for r in json.loads(proc.stdout)["runs"]}
    assert runs["long_run"]["event_counts"] == dict(counts)
    assert [f["code"] for f in runs["long_run"]["findings"]] == [f["code"] for f in payload["findings"]]


def test_a_run_still_training_shows_new_findings_as_they_appear(tensorboard_url, e2e_logdir, tmp_path):
    """A real training process writes while TensorBoard reads: the tab sees the run as it
    trains, then its NaN while it is still running; half-written records never break a read."""
    run = f"live_{tensorboard_url.rsplit(':', 1)[1]}"
    go = tmp_path / "go"
    training = subprocess.Popen(
        [sys.executable, LIVE_TRAINING, os.path.join(e2e_logdir, run), str(go)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:

        def status():
            runs = {r["run"]: r["status"] for r in get_json(tensorboard_url + PLUGIN + "/runs")["runs"]}
            return runs.get(run)

        assert wait_for(lambda: status() == "ok", timeout=120), "the live run never showed up"
        assert training.poll() is None  # seen while it trains
        go.touch()
        assert wait_for(lambda: status() == "critical", timeout=120), "the NaN never showed up"
        assert training.poll() is None  # and its NaN too
        findings = get_json(f"{tensorboard_url}{PLUGIN}/findings?run={run}")["findings"]
        assert findings[0]["code"] == "nonfinite"
    finally:
        training.kill()
        _, stderr = training.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr[-3000:]
