"""The time budget that keeps the occasional probes and diagnoses under a share of the wall time."""

from __future__ import annotations

import time

from tb_trainhealth.callback import time_budget
from tb_trainhealth.callback.time_budget import TimeBudget


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def test_a_job_waits_its_cost_over_the_share_after_it_ends(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time_budget, "time", clock)
    budget = TimeBudget(share=0.01)
    assert budget.allows()  # never run: free to go
    with budget.spend():
        clock.now += 0.02  # the job takes 20 ms
    assert not budget.allows()
    clock.now += 1.9
    assert not budget.allows()
    clock.now += 0.1  # 2 s after it ended: 20 ms is 1% of that
    assert budget.allows()


def test_a_job_that_raises_still_counts(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time_budget, "time", clock)
    budget = TimeBudget(share=0.5)
    try:
        with budget.spend():
            clock.now += 1.0
            raise ValueError("the job failed")
    except ValueError:
        pass
    clock.now += 1.5
    assert not budget.allows()
    clock.now += 0.5
    assert budget.allows()


def test_the_real_clock_is_used_by_default():
    budget = TimeBudget(share=1e-6)
    with budget.spend():
        time.sleep(0.001)
    assert not budget.allows()  # 1 ms over a millionth: ~17 minutes


def test_a_restart_budgets_the_next_run_from_now_at_its_least_or_last_cost(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time_budget, "time", clock)
    budget = TimeBudget(share=0.01, min_seconds=0.005)
    budget.restart()  # nothing ran yet: 5 ms assumed
    assert not budget.allows()
    clock.now += 0.5
    assert budget.allows()  # 5 ms is 1% of 0.5 s
    with budget.spend():
        clock.now += 0.02
    clock.now += 100
    budget.restart()  # the last run's 20 ms is more than the least assumed
    clock.now += 1.9
    assert not budget.allows()
    clock.now += 0.1
    assert budget.allows()


def test_a_run_cheaper_than_the_least_cost_is_budgeted_at_the_least(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time_budget, "time", clock)
    budget = TimeBudget(share=0.01, min_seconds=0.005)
    with budget.spend():
        clock.now += 0.0005  # an early, cheap run: the next would come 50 ms later without the floor
    clock.now += 0.1
    assert not budget.allows()
    clock.now += 0.4
    assert budget.allows()


def test_a_fits_first_mid_run_diagnosis_waits_for_its_share_of_the_fit(tmp_path, monkeypatch):
    from tb_trainhealth.callback import live_diagnosis
    from tb_trainhealth.callback.record.recording import Recording

    clock = FakeClock()
    monkeypatch.setattr(time_budget, "time", clock)
    recording = Recording(str(tmp_path / "run"), on_disk=False)
    live = live_diagnosis.LiveDiagnosis("run", diagnose_every=200, stop_on=None, on_finding=None, verbose=False)
    live.begin_fit()
    clock.now += 0.2  # 200 steps of 1 ms: due by steps, not by time (5 ms is 2.5% of 0.2 s)
    assert not live.maybe(recording, 200) and live._last_step == 0
    clock.now += live_diagnosis.MIN_DIAGNOSIS_SECONDS / live_diagnosis.DIAGNOSIS_TIME_SHARE
    live.maybe(recording, 1200)
    assert live._last_step == 1200  # diagnosed
