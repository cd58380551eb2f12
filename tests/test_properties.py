"""Property-based tests: the engine never raises on any series, and routes never 500 on any query."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_trainhealth import engine
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.run_info import LayerInfo
from tb_trainhealth.findings import Severity
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

values = st.floats(allow_nan=True, allow_infinity=True, width=32) | st.sampled_from([0.0, 1e-30, 1e30, -1.0])
series_values = st.lists(values, min_size=0, max_size=300)


def as_series(xs: list[float], gap: int) -> Series:
    steps = np.arange(1, len(xs) + 1) * gap
    return Series.of(steps, xs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loss=series_values,
    grad=series_values,
    train=st.lists(values, max_size=40),
    val=st.lists(values, max_size=40),
    layer_rows=st.lists(st.lists(values, min_size=3, max_size=3), max_size=60),
    gap=st.integers(1, 1000),
)
def test_engine_never_raises_and_findings_are_well_formed(loss, grad, train, val, layer_rows, gap):
    run = RunSignals(
        "r",
        series={
            sig.LOSS: as_series(loss, gap),
            sig.GRAD_NORM: as_series(grad, gap),
            sig.EPOCH_LOSS: as_series(train, gap),
            sig.EPOCH_VAL_LOSS: as_series(val, gap),
        },
        layers=[LayerInfo("a", 10), LayerInfo("b", 10), LayerInfo("c", 100)],
        layer_series={sig.LAYER_GRAD_NORM: LayerSeries.of(np.arange(len(layer_rows)), layer_rows, 3)}
        if layer_rows
        else {},
    )
    findings = engine.diagnose(run)
    assert run.errors == []
    for f in findings:
        json.dumps(f.to_dict(), allow_nan=False)  # strict JSON: no NaN leaks into a finding
        assert f.severity in Severity and f.title and f.detail


@settings(max_examples=100, deadline=None)
@given(level=st.floats(1e-6, 1e6), noise=st.floats(0.0, 0.05), n=st.integers(20, 2000))
def test_a_flat_quiet_loss_is_never_called_diverging_oscillating_or_exploding(level, noise, n):
    rng = np.random.default_rng(0)
    loss = level * np.exp(noise * rng.normal(size=n))
    codes = {f.code for f in engine.diagnose(RunSignals("r", series={sig.LOSS: as_series(list(loss), 1)}))}
    assert codes <= {"loss_plateau"}


@settings(max_examples=100, deadline=None)
@given(start=st.floats(0.1, 100), factor=st.floats(3.0, 1e6), n=st.integers(40, 2000))
def test_a_loss_that_ends_far_above_its_best_is_divergence(start, factor, n):
    half = n // 2
    loss = np.concatenate([np.linspace(start, start / 2, half), np.geomspace(start / 2, start / 2 * factor, n - half)])
    codes = {f.code for f in engine.diagnose(RunSignals("r", series={sig.LOSS: as_series(list(loss), 1)}))}
    assert "loss_divergence" in codes


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 3000),
    where=st.floats(0.0, 1.0, exclude_max=True),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
    gap=st.integers(1, 50),
)
def test_the_first_nonfinite_loss_is_found_at_its_step_and_only_then(n, where, bad, gap):
    loss = 2.0 * np.exp(-np.arange(n) / max(n / 5, 1)) + 0.1
    healthy = {f.code for f in engine.diagnose(RunSignals("r", series={sig.LOSS: as_series(list(loss), gap)}))}
    assert "nonfinite" not in healthy
    at = int(where * n)
    loss[at:] = bad
    findings = engine.diagnose(RunSignals("r", series={sig.LOSS: as_series(list(loss), gap)}))
    nonfinite = [f for f in findings if f.code == "nonfinite"]
    assert len(nonfinite) == 1 and nonfinite[0].step == (at + 1) * gap
    assert nonfinite[0].severity == Severity.CRITICAL


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(50, 3000),
    level=st.floats(1e-3, 1e3),
    noise=st.floats(0.0, 0.3),
    decay=st.floats(0.5, 20.0),
    seed=st.integers(0, 2**16),
)
def test_a_decaying_loss_with_steady_gradients_raises_no_alarm(n, level, noise, decay, seed):
    """Whatever its scale, length and minibatch noise, a falling loss with gradients of
    steady size is healthy: none of the numerics, divergence or gradient rules may fire."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    loss = level * (0.1 + np.exp(-decay * t / n)) * np.exp(noise * rng.normal(size=n))
    grad = level * np.exp(0.2 * rng.normal(size=n))
    run = RunSignals("r", series={sig.LOSS: as_series(list(loss), 1), sig.GRAD_NORM: as_series(list(grad), 1)})
    codes = {f.code for f in engine.diagnose(run) if f.severity >= Severity.WARNING}
    assert not codes & {"nonfinite", "loss_divergence", "exploding_gradients", "vanishing_gradients"}
