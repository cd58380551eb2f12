"""The Health tab's answers as plain functions: a real data provider over real training logs,
no WSGI client (the routes' HTTP side is tests/test_plugin.py's)."""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pytest
from conftest import reads_held
from tensorboard import context as tb_context
from tensorboard import errors

from tb_trainhealth.advice.plan import build_plan
from tb_trainhealth.compare.curves import MIN_PARTED_POINTS, PARTED_SHARE
from tb_trainhealth.compare.noise import ACCURACY_NOISE
from tb_trainhealth.contract.vocab import RunStatus
from tb_trainhealth.findings import run_status
from tb_trainhealth.plugin import diagnosis_cache, route_answers
from tb_trainhealth.plugin.diagnosis_cache import DiagnosisCache
from tb_trainhealth.read import event_files
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.report import run_report

CTX = tb_context.RequestContext()


def cache_for(logdir: str) -> DiagnosisCache:
    return DiagnosisCache(SignalReader(open_logdir(logdir)))


@pytest.fixture(scope="module")
def cache(scenario_logdir) -> DiagnosisCache:
    return cache_for(scenario_logdir)


def test_runs_answer_lists_every_run_worst_first_with_the_engines_status_and_counts(
    cache, scenario_findings, monkeypatch
):
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 600.0)  # wait for every first look
    answer = route_answers.runs_answer(cache, CTX, None)
    runs = answer["runs"]
    assert [r["run"] for r in runs] != [] and {r["run"] for r in runs} == set(scenario_findings)
    statuses = [r["status"] for r in runs]  # the summary the tab shows: counted on the server, as diagnose does
    assert answer["summary"] == f"{len(runs)} run(s): " + ", ".join(
        f"{statuses.count(s)} {s}" for s in ("critical", "warning", "ok")
    )
    assert {r["run"]: r["status"] for r in runs} == {run: run_status(f) for run, f in scenario_findings.items()}
    keys = [(RunStatus(r["status"]).rank, r["run"]) for r in runs]  # as `diagnose` lists them
    assert keys == sorted(keys) and runs[0]["status"] == "critical" and runs[-1]["status"] == "ok"
    for r in runs:
        labels = [f.severity.label for f in scenario_findings[r["run"]]]
        assert r["counts"] == {s: labels.count(s) for s in ("critical", "warning", "info")}
        assert r["errors"] == [] and r["file_errors"] == []
    healthy = next(r for r in runs if r["run"] == "healthy_cnn")
    assert healthy["has_health_data"] and healthy["last_step"] > 0 and healthy["last_epoch"] is None


def test_runs_not_diagnosed_yet_come_last_as_pending(scenario_logdir, monkeypatch):
    """A first look that takes longer than the answer's time budget: the run already diagnosed
    is listed with its status, the rest as pending after it, with no counts."""
    fresh = cache_for(scenario_logdir)
    nan = route_answers.find_diagnosis(fresh, CTX, "nan_input")
    with reads_held(monkeypatch):
        answer = route_answers.runs_answer(fresh, CTX, None)
    runs = answer["runs"]
    assert answer["summary"].endswith(f", {len(runs) - 1} still being diagnosed")
    assert runs[0]["run"] == "nan_input" and runs[0]["status"] == nan.status == "critical"
    assert len(runs) > 2 and {r["status"] for r in runs[1:]} == {RunStatus.PENDING}
    assert all(r["counts"] == {"critical": 0, "warning": 0, "info": 0} for r in runs[1:])


def test_findings_answer_gives_the_engines_findings_and_the_runs_series(cache, scenario_findings):
    for run, findings in scenario_findings.items():
        answer = route_answers.findings_answer(cache, CTX, None, run)
        assert answer["run"] == run and answer["status"] == run_status(findings)
        shown = [{k: v for k, v in f.items() if k not in ("plan_steps", "trial_note")} for f in answer["findings"]]
        assert shown == [{k: v for k, v in f.to_dict().items() if k != "fixes"} for f in findings]
        signals = route_answers.find_diagnosis(cache, CTX, run).signals
        assert answer["plan"] == build_plan(signals, findings).to_dict()  # the plan, once, at the run's level
    nan = route_answers.findings_answer(cache, CTX, None, "nan_input")
    assert nan["findings"][0]["code"] == "nonfinite" and nan["lead"]["code"] == "nonfinite"
    assert any(e["kind"] == "nonfinite" for e in nan["events"])
    assert "grad_norm" in nan["series"] and "layer_grad_norm" in nan["series"] and nan["layers"]


def test_an_unknown_run_is_not_found(cache):
    with pytest.raises(errors.NotFoundError, match="no_such_run"):
        route_answers.findings_answer(cache, CTX, None, "no_such_run")
    with pytest.raises(errors.NotFoundError, match="no_such_run"):
        route_answers.find_diagnosis(cache, CTX, "no_such_run")


def test_a_run_with_only_unreadable_event_files_is_listed_with_its_file_error(tmp_path):
    """TensorBoard's loaders skip a garbage event file silently; the answers name it."""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "events.out.tfevents.1700000000.host").write_bytes(b"\x07not an event file" * 20)
    fresh, files = cache_for(str(tmp_path)), event_files.BackgroundChecker(str(tmp_path), ttl=5.0)
    (run,) = route_answers.runs_answer(fresh, CTX, files)["runs"]
    assert run["run"] == "broken" and run["status"] == RunStatus.UNREADABLE
    assert [e["kind"] for e in run["file_errors"]] == [event_files.UNREADABLE] and "broken/" in run["errors"][0]
    page = route_answers.findings_answer(fresh, CTX, files, "broken")
    assert page["findings"] == [] and page["file_errors"] == run["file_errors"] and page["status"] == run["status"]
    with pytest.raises(errors.NotFoundError):
        route_answers.findings_answer(fresh, CTX, None, "broken")  # not listed without the file check


def test_series_answer_downsamples_keeping_the_first_nan_as_none(cache):
    diagnosis = route_answers.find_diagnosis(cache, CTX, "nan_input")
    full = diagnosis.signals.series["grad_norm"]
    assert len(full) > 20
    answer = route_answers.series_answer(diagnosis, ["grad_norm", "layer_grad_norm"], points=20)
    grad = answer["series"]["grad_norm"]
    assert 2 <= len(grad["steps"]) <= 20 and grad["steps"] == sorted(grad["steps"])
    assert grad["steps"][0] == full.steps[0] and grad["steps"][-1] == full.steps[-1]
    first_bad = int(full.steps[np.argmax(~np.isfinite(full.values))])
    assert grad["values"][grad["steps"].index(first_bad)] is None
    by_step = dict(zip(full.steps.tolist(), full.values.tolist()))
    for step, value in zip(grad["steps"], grad["values"]):
        assert value == by_step[step] or (value is None and not math.isfinite(by_step[step]))
    layers = answer["layers"]["layer_grad_norm"]
    assert layers["names"] == [layer.name for layer in diagnosis.signals.layers]
    assert len(layers["steps"]) <= 20 and all(len(row) == len(layers["names"]) for row in layers["values"])


def test_series_answer_keeps_every_point_of_a_short_series(cache):
    diagnosis = route_answers.find_diagnosis(cache, CTX, "healthy_cnn")
    full = diagnosis.signals.series["grad_norm"]
    answer = route_answers.series_answer(diagnosis, ["grad_norm"], points=route_answers.MAX_POINTS_SENT)
    assert answer["series"]["grad_norm"]["steps"] == full.steps.tolist()
    assert answer["series"]["grad_norm"]["values"] == full.values.tolist() and answer["layers"] == {}


@pytest.mark.parametrize(
    ("names", "points", "message"),
    [
        (["grad_norm", "not_a_series"], 20, "not_a_series"),
        ([""], 20, "unknown series"),
        (["grad_norm"], 1, "points must be"),
        (["grad_norm"], route_answers.MAX_POINTS_SENT + 1, "points must be"),
    ],
)
def test_series_answer_rejects_bad_arguments(cache, names, points, message):
    diagnosis = route_answers.find_diagnosis(cache, CTX, "nan_input")
    with pytest.raises(errors.InvalidArgumentError, match=message):
        route_answers.series_answer(diagnosis, names, points)


def test_downsampling_keeps_a_lone_spike_and_the_first_nan():
    values = np.ones(10_000)
    values[4321], values[7000:] = 1e6, np.nan
    keep = route_answers.downsample_index(values, 30)
    assert len(keep) <= 30 and {0, 4321, 7000, 9999} <= set(keep.tolist())


@pytest.fixture(scope="module")
def compare_logdir(tmp_path_factory) -> str:
    """compare_training's runs, trained one after another: wider (another model), slow_lr, base, tiny_lr, small_lr."""
    from compare_training import write_runs

    root = tmp_path_factory.mktemp("compare_routes")
    write_runs(str(root))
    return str(root)


@pytest.fixture(scope="module")
def compare_cache(compare_logdir) -> DiagnosisCache:
    return cache_for(compare_logdir)


def test_compare_answer_names_the_learning_rate_and_overlays_both_runs(compare_cache):
    answer = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", "base", points=40)
    json.dumps(answer, allow_nan=False)  # what the route sends
    assert (answer["run"], answer["baseline"], answer["picked"]) == ("tiny_lr", "base", False)
    assert answer["verdict"] == "worse" and answer["changes"][0]["setting"] == "learning_rate"
    assert "EarlyStopping.patience" in [c["setting"] for c in answer["changes"][1:]]
    assert answer["findings"][0]["code"] == "worse_than_baseline"
    curves = answer["curves"]
    assert (curves["x"], curves["loss"]) == ("step", "loss")
    assert isinstance(answer["parted_at_step"], int) and curves["parted_at"] == answer["parted_at_step"]
    for side in ("run", "baseline"):
        assert set(curves[side]) == {"loss", "epoch_val_loss", "epoch_val_accuracy"}
        loss = curves[side]["loss"]
        assert 2 <= len(loss["steps"]) <= 40 and loss["steps"] == sorted(loss["steps"])
        assert len(curves[side]["epoch_val_accuracy"]["values"]) == 6  # one point per epoch
    diagnoses = {name: route_answers.find_diagnosis(compare_cache, CTX, name) for name in ("tiny_lr", "base")}
    full = diagnoses["base"].signals.series["loss"]
    assert curves["baseline"]["loss"]["steps"][-1] == full.steps[-1]
    ratios = answer["layer_grad_ratio"]
    # Keras numbered the layers per model built: matched by position, not by name.
    assert [r["layer"] for r in ratios] == [layer.name for layer in diagnoses["tiny_lr"].signals.layers]
    assert [r["baseline_layer"] for r in ratios] == [layer.name for layer in diagnoses["base"].signals.layers]
    for r in ratios:
        assert r["run"] > 0 and r["baseline"] > 0 and r["ratio"] == pytest.approx(r["run"] / r["baseline"])


def test_the_run_parts_where_its_drawn_line_leaves_the_baselines_drawn_band(compare_cache):
    """The parting line is where the run's training loss, as drawn, first stays beyond the noise band
    drawn around the baseline's (on the chart's x); the 1000x-too-slow run's curve splits from the
    baseline's within the first epoch and a half (29 steps each), not at step 60 (the verdict's 1.6x)."""
    curves = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", "base", points=2000)["curves"]
    run, band = curves["run"]["loss"], curves["bands"]["loss"]
    assert run["steps"] == band["steps"] == curves["baseline"]["loss"]["steps"]  # one step each, all kept
    beyond = [value > high for value, high in zip(run["values"], band["high"])]
    needed = max(MIN_PARTED_POINTS, int(PARTED_SHARE * len(beyond)))
    first = next(i for i in range(len(beyond)) if all(beyond[i : i + needed]))
    assert curves["parted_at"] == run["steps"][first] <= 1.5 * 29
    base = curves["baseline"]["loss"]["values"]
    assert all(low < value < high for low, value, high in zip(band["low"], base, band["high"]))
    # The card draws the training loss and the metric that decided, each with the baseline's band.
    assert (curves["deciding"], curves["evidence"]) == ("epoch_val_accuracy", ["loss", "epoch_val_accuracy"])
    assert curves["panels"] == ["loss", "epoch_val_accuracy", "epoch_val_loss"]
    accuracy = curves["bands"]["epoch_val_accuracy"]
    (width,) = re.findall(r"within ([\d.]+) of the baseline's", accuracy["what"])  # this pair's own band (pair_noise)
    expected = [value - float(width) for value in curves["baseline"]["epoch_val_accuracy"]["values"]]
    assert accuracy["low"] == pytest.approx(expected, abs=1e-6) and 0 < float(width) <= ACCURACY_NOISE


def test_the_findings_answer_names_the_baseline_run_the_callback_compared_with(compare_cache):
    """tiny_lr was trained with HealthCallback(baseline=<path of base>): its worse card draws both runs."""
    answer = route_answers.findings_answer(compare_cache, CTX, None, "tiny_lr")
    assert "worse_than_baseline" in [f["code"] for f in answer["findings"]] and answer["baseline_run"] == "base"
    assert route_answers.findings_answer(compare_cache, CTX, None, "base")["baseline_run"] is None


def test_a_worse_lead_chart_names_the_baseline_its_comparison_is_drawn_against(compare_cache):
    """small_lr's lead is its worse_than_baseline finding: the top chart draws that comparison (the
    card's panels) and says so; tiny_lr's plateau leads it, and base has no baseline: their own series."""
    small = route_answers.findings_answer(compare_cache, CTX, None, "small_lr")
    assert small["findings"][0]["code"] == "worse_than_baseline"
    assert (
        small["lead"]["code"] == "worse_than_baseline" and small["lead"]["baseline"] == small["baseline_run"] == "base"
    )
    assert small["lead"]["title"] == "This run against its baseline base"
    tiny = route_answers.findings_answer(compare_cache, CTX, None, "tiny_lr")
    assert tiny["lead"]["code"] != "worse_than_baseline" and tiny["lead"]["baseline"] is None
    assert route_answers.findings_answer(compare_cache, CTX, None, "base")["lead"]["baseline"] is None


def test_compare_answer_with_best_picks_the_best_earlier_run_of_the_same_model(compare_cache, monkeypatch):
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 600.0)  # every run diagnosed: all candidates
    best = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", route_answers.BEST)
    assert (best["baseline"], best["picked"], best["verdict"]) == ("base", True, "worse")  # not slow_lr, not wider
    named = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", "base")
    assert {**best, "picked": False, "baseline_choice": named["baseline_choice"]} == named
    assert best["baseline_choice"]["rule"] in ("no_warnings", "best") and named["baseline_choice"]["rule"] == "named"
    assert best["baseline_choice"]["model"]["output_units"] == 3 and named["baseline_choice"]["differs"] == []
    # slow_lr was trained first of its model (wider, before it, is another model): nothing to compare with.
    first = route_answers.compare_answer(compare_cache, CTX, "slow_lr", route_answers.BEST)
    assert (first["baseline"], first["verdict"], first["curves"]) == (None, "unknown", None)
    assert set(first) == set(named)  # one form, with or without a baseline
    assert "no earlier run of the same model" in first["why"]
    assert first["baseline_choice"]["closest"][0]["run"] == "wider"  # the Dropout layer more: what differs
    assert "3 layers vs this run's 2" in first["baseline_choice"]["closest"][0]["differs"][0]


def test_compare_answer_with_best_prefers_a_run_marked_good(compare_cache, compare_logdir, monkeypatch):
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 600.0)
    marker = os.path.join(compare_logdir, "slow_lr", ".tb-trainhealth-good")
    open(marker, "w").close()  # slow_lr is of tiny_lr's model and earlier, but not its best: base is
    try:
        marked = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", route_answers.BEST, logdir=compare_logdir)
        unmarked = route_answers.compare_answer(compare_cache, CTX, "tiny_lr", route_answers.BEST)  # no logdir
    finally:
        os.remove(marker)
    assert (marked["baseline"], marked["baseline_choice"]["rule"]) == ("slow_lr", "marked_good")
    assert unmarked["baseline"] == "base"


def test_compare_answer_rejects_itself_unknown_runs_and_bad_points(compare_cache):
    with pytest.raises(errors.InvalidArgumentError, match="same run"):
        route_answers.compare_answer(compare_cache, CTX, "base", "base")
    with pytest.raises(errors.NotFoundError, match="no run named 'nope'"):
        route_answers.compare_answer(compare_cache, CTX, "nope", "base")
    with pytest.raises(errors.NotFoundError, match="no baseline run named 'nope'"):
        route_answers.compare_answer(compare_cache, CTX, "base", "nope")
    with pytest.raises(errors.InvalidArgumentError, match="points must be"):
        route_answers.compare_answer(compare_cache, CTX, "tiny_lr", "base", points=1)


def test_compare_route_answers_json_and_clear_4xx_errors(compare_logdir):
    """Through TensorBoard's WSGI app: the parameters are checked like the other routes'."""
    from test_plugin import client_for, get_json

    client = client_for(compare_logdir)
    answer = get_json(client, "/compare?run=tiny_lr&baseline=base&points=30")
    assert answer["verdict"] == "worse" and answer["changes"][0]["setting"] == "learning_rate"
    for path, status, message in [
        ("/compare?run=base&baseline=base", 400, "same run"),
        ("/compare?run=base", 400, "missing query parameter 'baseline'"),
        ("/compare?run=base&baseline=tiny_lr&extra=1", 400, "unknown query parameter"),
        ("/compare?run=base&baseline=tiny_lr&points=x", 400, "points must be"),
        ("/compare?run=nope&baseline=base", 404, "no run named"),
        ("/compare?run=base&baseline=nope", 404, "no baseline run named"),
    ]:
        assert message in get_json(client, path, status)["error"], path


def test_fuzzed_compare_queries_never_get_a_500(compare_logdir):
    from urllib.parse import urlencode

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from test_plugin import PREFIX, client_for

    client = client_for(compare_logdir)
    names = st.sampled_from(["base", "tiny_lr", "wider", "best", "", "\x00", "%FF", "9" * 40]) | st.text(max_size=50)

    @settings(max_examples=60, deadline=None)
    @given(params=st.dictionaries(st.sampled_from(["run", "baseline", "points", "x"]), names, max_size=4))
    def fuzz(params):
        response = client.get(f"{PREFIX}/compare?{urlencode(params)}")
        assert response.status_code < 500, (params, response.get_data(as_text=True)[:300])

    fuzz()


def test_a_truncated_copy_is_not_called_killed_in_the_tab_either():
    """The tab tells the story `diagnose` tells (tests/test_bad_logdirs.py), from the same report: a
    file cut after the fact explains its missing end record; a file its writer left mid-record does not."""
    from tb_trainhealth.findings import Evidence, Finding, Severity

    killed = Finding("ended_abruptly", Severity.CRITICAL, 9, "Ended abruptly", "", Evidence(series=()))
    plateau = Finding("loss_plateau", Severity.WARNING, 1, "Plateau", "", Evidence(series=()))
    copy = event_files.FileProblem("run/events", event_files.TRUNCATED_COPY, "cut")
    died = event_files.FileProblem("run/events", event_files.TRUNCATED, "cut")
    cut_copy = run_report.RunReport.told("run", None, [killed, plateau], [], [copy])
    assert (cut_copy.findings, cut_copy.status) == ([plateau], "warning")
    killed_run = run_report.RunReport.told("run", None, [killed, plateau], [], [died])
    assert (killed_run.findings, killed_run.status) == ([killed, plateau], "critical")


def _problem(cache, logdir: str) -> tuple[str | None, str | None]:
    answer = route_answers.runs_answer(cache, CTX, None, logdir)
    return answer["logdir_problem_kind"], answer["logdir_problem"]


def test_the_runs_answer_says_when_a_local_logdir_does_not_exist(cache, tmp_path):
    assert _problem(cache, str(tmp_path)) == (None, None)
    missing = str(tmp_path / "typo")
    assert _problem(cache, missing) == (
        route_answers.MISSING,
        f"The logdir {missing} does not exist: TensorBoard was started with --logdir pointing at it.",
    )
    (tmp_path / "a_file").write_text("")
    kind, said = _problem(cache, str(tmp_path / "a_file"))
    assert kind == route_answers.NOT_A_FOLDER and "is a file, not a folder" in said
    assert _problem(cache, "gs://bucket/logs") == (None, None)  # a scheme something here reads


def test_the_runs_answer_says_which_problem_a_bucket_nothing_here_reads_is(cache):
    """Not "the logdir does not exist": the tab heads a bucket's problem by its kind (issue 47)."""
    kind, said = _problem(cache, "az://container/logs")
    assert kind == route_answers.BUCKET_UNREADABLE and "cannot reach az://container/logs" in said
    assert "does not exist" not in said
