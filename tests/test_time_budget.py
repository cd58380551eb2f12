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
