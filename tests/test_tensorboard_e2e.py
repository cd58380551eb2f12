"""A real `tensorboard` process, both data paths: the Health tab's routes answer like the CLI."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from tensorboard_process import get_json, running_tensorboard, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from synthetic_logs import write_run

from tb_trainhealth.findings import run_status

EVENTS = 200
PLUGIN = "/data/plugin/trainhealth"


@pytest.fixture(scope="module")
def e2e_logdir(scenario_logdir, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("e2e")
    shutil.copytree(scenario_logdir, root, dirs_exist_ok=True)
    write_run(str(root / "long_run"), steps=20_000, layers=4, events=EVENTS, layer_every=10)
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

    def all_loaded():
        runs = {r["run"]: r["status"] for r in get_json(tensorboard_url + PLUGIN + "/runs")["runs"]}
        return runs if set(expected) | {"long_run"} <= set(runs) else None

    runs = wait_for(all_loaded)
    assert runs is not None
    assert {run: runs[run] for run in expected} == expected
    for run, findings in scenario_findings.items():
        payload = get_json(f"{tensorboard_url}{PLUGIN}/findings?run={run}")
        assert [f["code"] for f in payload["findings"]] == [f.code for f in findings], run


def test_every_event_of_a_long_run_survives_default_sampling(tensorboard_url):
    def loaded():
        payload = get_json(f"{tensorboard_url}{PLUGIN}/findings?run=long_run")
        return payload if len(payload["events"]) >= EVENTS and payload["layers"] else None

    payload = wait_for(loaded, timeout=90)
    assert payload is not None, "events were lost"
    steps = sorted(e["step"] for e in payload["events"])
    assert len(steps) == EVENTS and steps[0] == 1 and steps[-1] == 20_000
    assert "loss_divergence" not in [f["code"] for f in payload["findings"]]  # run 0 of the generator is healthy
