"""The Health tab's "Compare all runs": every run against one baseline, or each against the best
earlier run of its own model, worst first, as `tb-trainhealth compare LOGDIR --baseline RUN|best
--json` prints it; over real runs trained with HealthCallback (compare_training.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import reads_held
from tensorboard import context as tb_context
from tensorboard import errors

from tb_trainhealth.compare.many import VERDICT_ORDER
from tb_trainhealth.contract.events import Verdict
from tb_trainhealth.plugin import diagnosis_cache, route_answers
from tb_trainhealth.plugin.diagnosis_cache import DiagnosisCache
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

CTX = tb_context.RequestContext()
BEST = route_answers.BEST


@pytest.fixture(scope="module")
def compare_logdir(tmp_path_factory) -> str:
    """wider (another model), slow_lr, base, tiny_lr, small_lr: trained in that order."""
    from compare_training import write_runs

    root = tmp_path_factory.mktemp("compare_all")
    write_runs(str(root))
    return str(root)


def cache_for(logdir: str) -> DiagnosisCache:
    return DiagnosisCache(SignalReader(open_logdir(logdir)))


@pytest.fixture
def every_run_diagnosed(monkeypatch):
    monkeypatch.setattr(diagnosis_cache, "ANSWER_WITHIN_SECONDS", 600.0)  # every first look waited for


def cli_json(logdir: str, baseline: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "compare", logdir, "--baseline", baseline, "--json"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def order_keys(comparisons: list[dict]) -> list[int]:
    return [VERDICT_ORDER[Verdict(c["verdict"])] for c in comparisons]


def test_every_run_against_a_named_baseline_worst_first_as_the_cli_lists_them(compare_logdir, every_run_diagnosed):
    answer = route_answers.compare_all_answer(cache_for(compare_logdir), CTX, "base", compare_logdir)
    rows = answer["comparisons"]
    assert rows == cli_json(compare_logdir, "base") and answer["pending"] == []
    assert {row["run"] for row in rows} == {"wider", "slow_lr", "tiny_lr", "small_lr"}  # not base against itself
    assert order_keys(rows) == sorted(order_keys(rows)) and rows[0]["verdict"] == "worse"
    # The 1000x too small rate first: the largest shortfall in validation accuracy, then 30x, then 10x.
    assert [row["run"] for row in rows if row["verdict"] == "worse"] == ["tiny_lr", "small_lr", "slow_lr"]
    assert rows[0]["likely_cause"] == "learning_rate 0.003 -> 3e-06"
    assert {row["baseline_choice"]["rule"] for row in rows} == {"named"}
    assert {row["baseline"] for row in rows} == {"base"}
    wider = next(row for row in rows if row["run"] == "wider")
    assert wider["likely_cause"] is None and wider["baseline_choice"]["differs"]  # another model, said so


def test_each_run_against_the_best_earlier_run_of_its_model_as_the_cli_picks_it(compare_logdir, every_run_diagnosed):
    answer = route_answers.compare_all_answer(cache_for(compare_logdir), CTX, BEST, compare_logdir)
    rows = {row["run"]: row for row in answer["comparisons"]}
    assert answer["comparisons"] == cli_json(compare_logdir, BEST)
    assert set(rows) == {"wider", "slow_lr", "base", "tiny_lr", "small_lr"}
    assert list(rows)[:2] == ["tiny_lr", "small_lr"] and list(rows)[-1] == "base"  # worse first, better last
    assert rows["tiny_lr"]["baseline"] == rows["small_lr"]["baseline"] == "base"
    assert rows["tiny_lr"]["baseline_choice"]["rule"] in ("no_warnings", "best")
    assert (rows["base"]["verdict"], rows["base"]["baseline"]) == ("better", "slow_lr")
    for first in ("wider", "slow_lr"):  # the first run of its model: listed, with why there is no baseline
        assert (rows[first]["baseline"], rows[first]["baseline_choice"]["rule"]) == (None, "none")
        assert "no earlier run of the same model" in rows[first]["why"]


def test_a_second_request_reads_no_run_again(compare_logdir, every_run_diagnosed, monkeypatch):
    cache = cache_for(compare_logdir)
    first = route_answers.compare_all_answer(cache, CTX, BEST, compare_logdir)
    reads, original = [], SignalReader.read

    def counted(self, group, *args):
        reads.append(group.name)
        return original(self, group, *args)

    monkeypatch.setattr(SignalReader, "read", counted)
    assert route_answers.compare_all_answer(cache, CTX, BEST, compare_logdir) == first
    route_answers.compare_all_answer(cache, CTX, "tiny_lr", compare_logdir)
    assert reads == []


def test_an_unreadable_run_is_listed_and_hides_none_of_the_others(compare_logdir, every_run_diagnosed, monkeypatch):
    """small_lr's read fails (a disk error): it is a row that says so; every other row is as before."""
    whole = {
        baseline: route_answers.compare_all_answer(cache_for(compare_logdir), CTX, baseline)["comparisons"]
        for baseline in (BEST, "base")
    }
    original = SignalReader.read

    def failing(self, group, *args):
        if group.name == "small_lr":
            raise OSError("Input/output error")
        return original(self, group, *args)

    monkeypatch.setattr(SignalReader, "read", failing)
    for baseline, rows in whole.items():
        broken = route_answers.compare_all_answer(cache_for(compare_logdir), CTX, baseline)["comparisons"]
        (small,) = [row for row in broken if row["run"] == "small_lr"]
        assert small["verdict"] == "unknown" and small["why"]
        assert [row for row in broken if row["run"] != "small_lr"] == [row for row in rows if row["run"] != "small_lr"]


def test_runs_still_being_diagnosed_are_named_pending(compare_logdir, monkeypatch):
    with reads_held(monkeypatch):
        answer = route_answers.compare_all_answer(cache_for(compare_logdir), CTX, BEST)
    assert answer["comparisons"] == []
    assert sorted(answer["pending"]) == ["base", "slow_lr", "small_lr", "tiny_lr", "wider"]


def test_an_unknown_baseline_names_the_runs_to_pick_from(compare_logdir, every_run_diagnosed):
    with pytest.raises(errors.NotFoundError, match=r"no baseline run named 'nope': give one of the runs \('base'"):
        route_answers.compare_all_answer(cache_for(compare_logdir), CTX, "nope")


def test_the_route_checks_its_parameter_and_answers_json(compare_logdir):
    """Through TensorBoard's WSGI app, as the other routes are checked (tests/test_plugin.py)."""
    from urllib.parse import urlencode

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from test_plugin import PREFIX, client_for, get_json

    client = client_for(compare_logdir)
    answer = get_json(client, "/compare_all?baseline=base")
    assert answer["comparisons"][0]["run"] == "tiny_lr" and answer["comparisons"][0]["verdict"] == "worse"
    for path, status, message in [
        ("/compare_all?baseline=nope", 404, "no baseline run named 'nope'"),
        ("/compare_all", 400, "missing query parameter 'baseline'"),
        ("/compare_all?baseline=", 400, "missing query parameter 'baseline'"),
        ("/compare_all?baseline=base&baseline=best", 400, "given more than once"),
        ("/compare_all?baseline=best&run=base", 400, "unknown query parameter"),
        ("/compare_all?baseline=%00", 400, "invalid query parameter"),
    ]:
        assert message in get_json(client, path, status)["error"], path
    names = st.sampled_from(["base", "tiny_lr", "best", "", "\x00", "%FF", "9" * 2000]) | st.text(max_size=50)

    @settings(max_examples=40, deadline=None)
    @given(params=st.dictionaries(st.sampled_from(["baseline", "run", "x"]), names, max_size=3))
    def fuzz(params):
        response = client.get(f"{PREFIX}/compare_all?{urlencode(params)}")
        assert response.status_code < 500, (params, response.get_data(as_text=True)[:300])

    fuzz()
