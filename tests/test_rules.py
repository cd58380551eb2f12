"""Rule units on synthetic series (no TensorFlow): each fires on its shape, not on healthy ones."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from tb_trainhealth import engine
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import parse_event
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules import RULES
from tb_trainhealth.rules.gradients import check_exploding_gradients, check_vanishing_gradients
from tb_trainhealth.rules.loss_curve import check_loss_plateau
from tb_trainhealth.rules.loss_divergence import check_loss_divergence
from tb_trainhealth.rules.loss_oscillation import check_loss_oscillation
from tb_trainhealth.rules.numerics import check_nonfinite
from tb_trainhealth.rules.overfitting import check_overfitting
from tb_trainhealth.rules.weight_health import update_ratio_level
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

RNG = np.random.default_rng(0)


def healthy_loss(n: int = 2000, noise: float = 0.1) -> np.ndarray:
    """Exponential decay toward a floor with multiplicative minibatch noise."""
    t = np.arange(n)
    return (0.2 + 2.0 * np.exp(-t / (n / 6))) * np.exp(noise * RNG.normal(size=n))


def run_with(**series: np.ndarray) -> RunSignals:
    return RunSignals("r", series={k: Series.of(np.arange(1, len(v) + 1), v) for k, v in series.items()})


def codes(run: RunSignals) -> set[str]:
    return {f.code for f in engine.diagnose(run)}


def test_healthy_loss_curve_is_quiet():
    assert codes(run_with(loss=healthy_loss(), grad_norm=1 + 0.2 * RNG.random(2000))) == set()


def test_divergence_found_with_onset_at_the_turn():
    loss = healthy_loss(1000)
    loss[600:] = loss[600] * np.exp(np.linspace(0, 4, 400))
    (finding,) = check_loss_divergence(run_with(loss=loss))
    assert finding.code == "loss_divergence" and 570 <= finding.step <= 630


def test_a_spike_the_loss_shrugs_off_is_info_and_one_it_stays_up_after_is_a_warning():
    loss = healthy_loss(1000)
    loss[700] = 50.0  # 20x the starting loss, back at its level the next step
    (finding,) = check_loss_divergence(run_with(loss=loss))
    assert finding.step == 701 and "spiked" in finding.title and finding.severity == Severity.INFO
    loss[701:760] *= 30  # ...and now the loss stays up after it for a while
    (finding,) = check_loss_divergence(run_with(loss=loss))
    assert finding.step == 701 and finding.severity == Severity.WARNING and "stayed up" in finding.detail


def test_an_epoch_loss_thrown_up_is_instability_even_when_the_per_step_median_stays_low():
    """Adam at lr 0.1: most batches fit, some blow up; the epoch means show it (0.21 -> 1.33)."""
    epochs = np.array([0.78, 0.21, 1.33, 0.94, 0.05, 0.18])
    run = run_with(epoch_loss=epochs)
    (finding,) = check_loss_divergence(run)
    assert finding.step == 3 and finding.severity == Severity.WARNING and "from 0.21 to 1.33" in finding.title
    healthy = np.array([0.78, 0.21, 0.25, 0.15, 0.12, 0.11])  # noise of an epoch mean, not a jump
    assert check_loss_divergence(run_with(epoch_loss=healthy)) == []


def test_the_update_ratio_level_is_the_second_half_of_the_steps_not_of_the_samples():
    """Samples every 20th step up to 200, then every 100th (the callback's schedule): a learning
    rate cut 300x at step 650 shows in the level, though most samples came before it."""
    steps = np.array([*range(20, 201, 20), *range(300, 1001, 100)])
    ratio = np.where(steps < 650, 3e-2, 1e-4)
    run = RunSignals("r")
    run.layer_series[sig.LAYER_UPDATE_RATIO] = LayerSeries(steps, np.stack([ratio, ratio], axis=1))
    assert update_ratio_level(run) == pytest.approx(1e-4)


def test_an_epoch_bump_the_run_beat_afterwards_is_info_unless_it_threw_away_all_progress():
    """SGD with a step schedule (healthy_sweep's residual MLP): two epochs 21x above the best, then
    a better loss than ever: info. Above the first epoch's loss (all progress gone): a warning."""
    bump = np.array([0.81, 0.12, 0.05, 0.0126, 0.265, 0.22, 0.0255, 0.0128, 0.0076, 0.0052])
    (finding,) = check_loss_divergence(run_with(epoch_loss=bump))
    assert finding.severity == Severity.INFO and "It recovered" in finding.detail
    thrown = np.array([0.41, 0.57, 0.71, 0.135, 0.55, 0.097, 0.014, 0.006, 0.003])  # Adam at lr 0.1
    (finding,) = check_loss_divergence(run_with(epoch_loss=thrown))
    assert finding.severity == Severity.WARNING and "all the progress" in finding.detail
    stuck = np.array([0.87, 0.2, 0.054, 5.27, 5.97, 16.0, 5.6, 0.068])  # never back below 0.054
    (finding,) = check_loss_divergence(run_with(epoch_loss=stuck))
    assert finding.severity == Severity.WARNING and "never got back" in finding.detail


def test_a_spike_the_loss_shrugged_off_does_not_hide_epochs_that_stayed_unstable():
    """lr 0.3 Adam: losses of 0 between huge spikes keep the per-step median at 0 (a rare spike
    shrugged off: info) while the epoch means stay 100x up: the warning must win."""
    steps = np.arange(1, 401)
    loss = np.where(steps <= 150, 1.4 * np.exp(-steps / 30) + 0.03, 0.0)
    loss[156] = 60.0
    epochs = np.array([0.87, 0.2, 0.057, 14.1, 17.5, 5.9, 10.2, 2.4])
    run = RunSignals(
        "r", series={sig.LOSS: Series.of(steps, loss), sig.EPOCH_LOSS: Series.of(np.arange(50, 401, 50), epochs)}
    )
    (finding,) = check_loss_divergence(run)
    assert finding.severity == Severity.WARNING and "epoch loss jumped" in finding.title
    assert finding.step == 157  # where the per-step loss first rose 3x above the best epoch, in that epoch


def test_a_spike_tiny_on_the_losss_own_scale_is_not_a_finding():
    """Converged near 5e-4, one batch at 7e-3 (a 14x spike, far below where the loss started)."""
    loss = 5e-4 + 2e-3 * np.exp(-np.arange(1000) / 100) * np.exp(0.1 * RNG.normal(size=1000))
    loss[800] = 7e-3
    assert check_loss_divergence(run_with(loss=loss)) == []


def test_per_sample_loss_noise_is_not_a_spike():
    """batch_size=1: cross-entropy per sample swings over orders of magnitude around its median."""
    loss = 0.3 * np.exp(1.5 * RNG.normal(size=2000))
    assert check_loss_divergence(run_with(loss=loss)) == []


def test_noise_near_convergence_is_not_a_spike():
    loss = healthy_loss(1000)
    loss[700] = loss[699] * 8  # a bad batch, still below the starting loss
    assert check_loss_divergence(run_with(loss=loss)) == []


def test_plateau_found_on_flat_noisy_loss():
    loss = 1.386 * np.exp(0.05 * RNG.normal(size=500))
    (finding,) = check_loss_plateau(run_with(loss=loss))
    assert finding.code == "loss_plateau"


def test_converged_run_is_not_a_plateau():
    loss = np.concatenate([np.linspace(2.3, 0.3, 50), 0.3 * np.exp(0.05 * RNG.normal(size=950))])
    assert check_loss_plateau(run_with(loss=loss)) == []


def test_oscillation_found_on_wide_swings_without_progress():
    loss = np.abs(1.4 + 1.2 * np.sin(np.arange(600) * 1.3 + np.pi)) + 0.1
    (finding,) = check_loss_oscillation(run_with(loss=loss))
    assert finding.code == "loss_oscillation"
    assert check_loss_plateau(run_with(loss=loss)) == []


def test_overfitting_needs_rising_val_and_falling_train():
    train = np.linspace(1.0, 0.1, 12)
    val = np.array([1.0, 0.8, 0.6, 0.5, 0.45, 0.5, 0.55, 0.62, 0.7, 0.8, 0.9, 1.0])
    (finding,) = check_overfitting(run_with(epoch_loss=train, epoch_val_loss=val))
    assert finding.step == 5  # the epoch with the best validation loss
    flat_val = np.linspace(1.0, 0.5, 12) + 0.02 * RNG.normal(size=12)
    assert check_overfitting(run_with(epoch_loss=train, epoch_val_loss=flat_val)) == []


def test_validation_loss_thrown_up_by_unstable_training_is_not_overfitting():
    """Adam at a learning rate of 0.1: validation loss from 4.6e-06 to 2.17, the training loss
    thrown up too. That is instability (loss_divergence says so), not memorising."""
    train = np.array([0.5, 0.1, 0.01, 1e-4, 1e-5, 0.8, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01])
    val = np.array([0.5, 0.1, 0.01, 1e-4, 4.6e-6, 2.17, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8])
    assert check_overfitting(run_with(epoch_loss=train, epoch_val_loss=val)) == []
    steady_train = np.geomspace(0.5, 1e-7, 12)  # the same validation curve, training loss never jumped
    (finding,) = check_overfitting(run_with(epoch_loss=steady_train, epoch_val_loss=val))
    assert "from 4.6e-06 to 2.8" in finding.title  # a value, not "up 60869465%"


def test_exploding_gradients_onset_and_severity():
    norms = np.concatenate([np.full(300, 1.0), np.logspace(0, 8, 100)]) * np.exp(0.1 * RNG.normal(size=400))
    (finding,) = check_exploding_gradients(run_with(grad_norm=norms))
    assert 300 <= finding.step <= 330 and finding.severity.label == "critical"


def test_growing_but_healthy_gradient_norm_is_quiet():
    norms = np.linspace(0.5, 10, 1000) * np.exp(0.3 * RNG.normal(size=1000))  # 20x growth
    assert check_exploding_gradients(run_with(grad_norm=norms)) == []


def layered(first_rms: float, last_rms: float, n: int = 200) -> RunSignals:
    layers = [LayerInfo("dense", 100), LayerInfo("dense_1", 100), LayerInfo("dense_2", 400)]
    values = np.tile([first_rms * 10, 0.01, last_rms * 20], (n, 1))
    return RunSignals("r", layers=layers, layer_series={sig.LAYER_GRAD_NORM: LayerSeries(np.arange(1, n + 1), values)})


def test_vanishing_gradients_from_layer_ratio():
    (finding,) = check_vanishing_gradients(layered(1e-9, 1e-2))
    assert finding.evidence.layer == "dense"
    # AUTOTRAINER needs both: a tiny ratio (here 5e-4) AND a first-layer norm below 1e-4 (here 1e-3).
    assert check_vanishing_gradients(layered(1e-4, 1e-1)) == []
    assert check_vanishing_gradients(layered(1e-3, 1e-2)) == []


def test_nonfinite_from_events_and_from_plain_loss_series():
    run = RunSignals(
        "r", events=[parse_event({"kind": "nonfinite", "where": "gradients", "step": 42, "layers": ["conv"]})]
    )
    (finding,) = check_nonfinite(run)
    assert finding.step == 42 and finding.evidence.layer == "conv" and finding.severity.label == "critical"
    loss = healthy_loss(100)
    loss[70:] = np.nan
    (finding,) = check_nonfinite(run_with(epoch_loss=loss))
    assert finding.step == 71


@pytest.mark.parametrize("explodes", [True, False], ids=["exploded-then-nan", "nan-out-of-the-blue"])
def test_nonfinite_names_exploding_gradients_before_it_and_puts_clipping_first(explodes):
    grad = np.ones(60) * np.exp(0.1 * RNG.normal(size=60))
    if explodes:
        grad[50:53] = [30.0, 3e3, 4e5]  # an RNN's norms: orders of magnitude in a few steps
    grad[53:] = np.nan
    loss = healthy_loss(60)
    loss[53:] = np.nan
    (finding,) = check_nonfinite(run_with(loss=loss, grad_norm=grad))
    assert finding.step == 54
    assert ("after the gradients exploded" in finding.title) == explodes
    assert ("Exploding gradients first" in finding.detail) == explodes
    if explodes:
        assert finding.fixes[0].code and "clipnorm" in finding.fixes[0].code


def test_rules_after_nan_see_only_data_before_it():
    loss = healthy_loss(1000)
    loss[500:] = np.nan
    grad = np.ones(1000)
    grad[500:] = 1e12  # garbage after the weights died
    found = codes(run_with(loss=loss, grad_norm=grad))
    assert found == {"nonfinite"}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
@pytest.mark.parametrize(
    "values",
    [
        np.array([]),
        np.array([np.nan] * 50),
        np.array([np.inf, -np.inf] * 25),
        np.zeros(50),
        np.full(50, 1e300),
        np.full(50, 1e-300),
        np.array([1.0]),
    ],
    ids=["empty", "nan", "inf", "zeros", "huge", "tiny", "single"],
)
def test_rules_never_raise_on_degenerate_series(rule, values):
    run = run_with(loss=values, epoch_loss=values, epoch_val_loss=values, grad_norm=values)
    rule.check(run)  # must not raise
    engine.diagnose(run)
    assert run.errors == []


def test_rules_agree_on_downsampled_series():
    loss = healthy_loss(20000)
    loss[12000:] = loss[12000] * np.exp(np.linspace(0, 4, 8000))
    full = check_loss_divergence(run_with(loss=loss))
    steps = np.arange(1, 20001)
    keep = np.sort(RNG.choice(20000, 1000, replace=False))
    sampled = check_loss_divergence(RunSignals("r", series={sig.LOSS: Series.of(steps[keep], loss[keep])}))
    assert [f.code for f in full] == [f.code for f in sampled] == ["loss_divergence"]
    assert abs(full[0].step - sampled[0].step) <= 400


def test_steady_rise_is_divergence_not_oscillation():
    loss = healthy_loss(4000)
    loss[2000:] *= np.exp(np.linspace(0, 5, 2000))
    assert codes(run_with(loss=loss)) == {"loss_divergence"}


def test_learning_rate_warmup_is_not_divergence_or_plateau():
    """Warm-up raises (or holds) the loss on purpose; the rules judge what follows it."""
    n = 3000
    lr = np.minimum(np.arange(1, n + 1) / 500, 1.0) * 1e-3
    loss = healthy_loss(n)
    loss[:500] = (2.3 + np.linspace(0, 4.0, 500)) * np.exp(0.05 * RNG.normal(size=500))  # rises during warm-up
    assert codes(run_with(loss=loss, learning_rate=lr)) == set()
    # Online, mid-warm-up: the same rise is divergence unless the learning rate explains it.
    assert codes(run_with(loss=loss[:400], learning_rate=lr[:400])) == set()
    assert "loss_divergence" in codes(run_with(loss=loss[:400]))


def test_fine_tune_gradient_growth_from_tiny_norms_is_not_exploding():
    norms = np.concatenate([np.full(100, 1e-6), np.full(900, 1e-2)]) * np.exp(0.1 * RNG.normal(size=1000))
    assert check_exploding_gradients(run_with(grad_norm=norms)) == []


def test_flat_noisy_validation_loss_is_not_overfitting():
    train = np.linspace(1.0, 0.2, 20)
    for seed in range(20):
        val = 0.8 * np.exp(0.1 * np.random.default_rng(seed).normal(size=20))
        assert check_overfitting(run_with(epoch_loss=train, epoch_val_loss=val)) == [], seed


def test_loss_scale_skips_are_info_unless_they_persist():
    steps = np.arange(1, 1001)
    early = parse_event({"kind": "nonfinite", "where": "gradients", "step": 1, "layers": ["dense"]})

    def run_with_skips(skip_steps):
        return RunSignals(
            "r",
            series={
                sig.GRAD_NORM: Series.of(steps, np.ones(1000)),
                sig.NONFINITE_COUNT: Series.of(skip_steps, np.ones(len(skip_steps))),
            },
            events=[early],
            info=RunInfo(loss_scale=True),
        )

    (calibration,) = check_nonfinite(run_with_skips(np.arange(1, 16)))  # 15 skips while the scale settles
    assert calibration.severity == Severity.INFO
    collapsing_run = run_with_skips(np.arange(1, 1001, 10))  # 10% of steps, all run long
    collapsing_run.series[sig.LOSS_SCALE] = Series.of(np.arange(1, 1001, 10), 2.0 ** -np.arange(100) * 32768)
    (collapsing,) = check_nonfinite(collapsing_run)
    assert collapsing.severity == Severity.CRITICAL and "keeps collapsing" in collapsing.title
    assert "Loss scale at step 991" in collapsing.detail and 'dtype="float32"' in collapsing.fixes[0].code


@pytest.mark.parametrize(
    ("wait_ms", "compute_ms", "expected"),
    [
        (0.3, 10.0, None),  # fetch overhead only
        (0.8, 2.0, None),  # a large share, but under a millisecond per step: overhead, not a pipeline
        (1.0, 30.0, None),  # 3%: under XProf's 5% level
        (2.0, 18.0, Severity.INFO),  # 10%: moderately input-bound
        (8.0, 12.0, Severity.WARNING),  # 40%: highly input-bound
    ],
)
def test_input_bound_levels(wait_ms, compute_ms, expected):
    from tb_trainhealth.rules.input_pipeline import check_input_bound

    n = 300
    wait = wait_ms * np.exp(0.2 * RNG.normal(size=n))
    step = wait + compute_ms * np.exp(0.1 * RNG.normal(size=n))
    wait[::100] = 500.0  # each epoch's first fetch starts an iterator: left out of the share
    run = run_with(input_wait_ms=wait, step_time_ms=step)
    run.series[sig.EPOCH_LOSS] = Series.of([100, 200, 300], [1.0, 0.9, 0.8])
    found = check_input_bound(run)
    assert [f.severity for f in found] == ([expected] if expected is not None else [])
    if found:
        level = "highly" if expected == Severity.WARNING else "moderately"
        assert f"({level} input-bound)" in found[0].title
        assert f"waited {wait_ms:.0f}." in found[0].detail  # the steady-state wait, not the epoch starts


@pytest.mark.parametrize(
    ("wait_ms", "other_cpu_share", "expected"),
    [
        (2.0, None, Severity.WARNING),  # 40% of a 5 ms step, nothing known of the machine
        (2.0, 0.05, Severity.WARNING),  # ...on an idle machine
        (2.0, 0.5, Severity.INFO),  # ...while other processes held half the CPU: a wait for a core
        (8.0, 0.5, Severity.WARNING),  # a wait no busy machine explains
    ],
)
def test_a_short_wait_on_a_machine_other_processes_keep_busy_is_not_a_warning(wait_ms, other_cpu_share, expected):
    from tb_trainhealth.rules.input_pipeline import check_input_bound

    n = 300
    run = run_with(input_wait_ms=np.full(n, wait_ms), step_time_ms=np.full(n, wait_ms + 3.0))
    run.series[sig.EPOCH_LOSS] = Series.of([100, 200, 300], [1.0, 0.9, 0.8])
    if other_cpu_share is not None:
        run.series[sig.OTHER_CPU_SHARE] = Series.of([100, 200, 300], [other_cpu_share] * 3)
    (found,) = check_input_bound(run)
    assert found.severity == expected
    assert ("waiting for a free core" in found.detail) == (expected == Severity.INFO)


def test_input_bound_needs_both_series_and_enough_steps():
    from tb_trainhealth.rules.input_pipeline import check_input_bound

    assert check_input_bound(run_with(input_wait_ms=np.full(300, 50.0))) == []
    assert check_input_bound(run_with(input_wait_ms=np.full(10, 50.0), step_time_ms=np.full(10, 60.0))) == []


def epochs_run(train: np.ndarray, val: np.ndarray | None) -> RunSignals:
    steps = 100 * np.arange(1, len(train) + 1)
    series = {sig.EPOCH_LOSS: Series.of(steps, train)}
    if val is not None:
        series[sig.EPOCH_VAL_LOSS] = Series.of(steps, val)
    return RunSignals("r", series=series)


CREEPING = np.r_[1.0, 0.5, 0.3, 0.22, 0.2 * 0.93 ** np.arange(1, 6)]  # -7%/epoch at 15% of its start


@pytest.mark.parametrize(
    ("train", "val", "severity"),
    [
        (2.0 * 0.9 ** np.arange(8), 2.1 * 0.92 ** np.arange(8), Severity.INFO),  # cut short (-8%/epoch): a note
        (0.3 + 2.0 * np.exp(-np.arange(20)), 0.35 + 2.0 * np.exp(-np.arange(20)), None),  # converged
        (2.0 * 0.5 ** np.arange(20), 2.0 * 0.5 ** np.arange(20), None),  # fitted to ~0: nothing left to gain
        ([2.0, 0.3, 0.08, 0.04, 0.02, 0.01], [2.0, 0.3, 0.09, 0.05, 0.03, 0.02], None),  # halving near zero
        (CREEPING, CREEPING * 1.1, Severity.INFO),  # still creeping down: worth knowing, no action
        (2.0 * 0.9 ** np.arange(8), None, None),  # no validation: not judged
        (2.0 * 0.9 ** np.arange(8), [*(2.0 * 0.9 ** np.arange(4)), 1.5, 1.6, 1.55, 1.7], None),  # val turned
        (2.0 * 0.9 ** np.arange(3), 2.0 * 0.9 ** np.arange(3), None),  # three epochs, no per-step loss
    ],
    ids=[
        "cut-short", "converged", "fitted-to-zero", "halving-near-zero", "creeping", "no-validation",
        "val-turned", "three-epochs",
    ],
)  # fmt: skip
def test_undertrained(train, val, severity):
    from tb_trainhealth.rules.undertrained import check_undertrained

    val = None if val is None else np.asarray(val, dtype=np.float64)
    found = check_undertrained(epochs_run(np.asarray(train, dtype=np.float64), val))
    assert [f.severity for f in found] == ([severity] if severity is not None else [])
    if found:
        assert "per epoch" in found[0].title


def test_undertrained_saturated_accuracy_is_converged():
    from tb_trainhealth.rules.undertrained import check_undertrained

    run = epochs_run(2.0 * 0.9 ** np.arange(8), 2.1 * 0.92 ** np.arange(8))
    steps = run.series[sig.EPOCH_LOSS].steps
    run.series[sig.EPOCH_ACCURACY] = run.series[sig.EPOCH_VAL_ACCURACY] = Series.of(steps, np.ones(8))
    assert check_undertrained(run) == []


@pytest.mark.parametrize(("decay_steps", "fires"), [(300.0, True), (40.0, False)], ids=["cut-short", "converged"])
def test_undertrained_two_epochs_judged_from_the_per_step_loss(decay_steps, fires):
    from tb_trainhealth.rules.undertrained import check_undertrained

    steps = np.arange(1, 201)
    loss = (0.1 + 2.0 * np.exp(-steps / decay_steps)) * np.exp(0.02 * RNG.normal(size=200))
    run = run_with(loss=loss)
    run.series[sig.EPOCH_LOSS] = Series.of([100, 200], [loss[:100].mean(), loss[100:].mean()])
    run.series[sig.EPOCH_VAL_LOSS] = Series.of([100, 200], [loss[99] * 1.1, loss[199] * 1.1])
    found = check_undertrained(run)
    assert [(f.severity, "Stopped while still improving" in f.title) for f in found] == (
        [(Severity.INFO, True)] if fires else []
    )


@pytest.mark.parametrize(("level", "fires"), [(1.0986, True), (1.09, True), (0.9, False), (0.5, False)])
def test_loss_at_the_constant_baseline_is_a_plateau_naming_it(level, fires):
    loss = np.concatenate([np.linspace(1.5, level, 50), level * np.exp(0.05 * RNG.normal(size=450))])
    run = run_with(loss=loss)
    run.events.append(
        parse_event(
            {
                "kind": "lint",
                "step": 0,
                "check": "label_statistics",
                "loss": "sparse_categorical_crossentropy",
                "class_counts": [100, 100, 100],
            }
        )
    )
    found = [f for f in check_loss_plateau(run) if "baseline" in f.title]
    assert bool(found) == fires
    if fires:
        assert "1.099" in found[0].title and found[0].step == 251


@pytest.mark.parametrize(("epochs", "fires"), [(2, False), (4, True)])
def test_constant_baseline_must_hold_for_epochs_before_it_is_called(epochs, fires):
    """A healthy model may sit at the baseline for its first epoch; a run stopped then is not stuck."""
    steps_per_epoch = 500 // epochs
    loss = np.concatenate([np.linspace(1.5, 1.0986, 50), 1.0986 * np.exp(0.05 * RNG.normal(size=450))])
    run = run_with(loss=loss)
    ends = np.arange(1, epochs + 1) * steps_per_epoch
    run.series[sig.EPOCH_LOSS] = Series.of(ends, loss[ends - 1])
    run.events.append(parse_event({"kind": "lint", "step": 0, "check": "label_statistics",
                                   "loss": "sparse_categorical_crossentropy", "class_counts": [100, 100, 100]}))  # fmt: skip
    assert bool([f for f in check_loss_plateau(run) if "baseline" in f.title]) == fires


def test_negative_cross_entropy_is_a_label_problem():
    from tb_trainhealth.rules.training_data import check_label_problem

    run = run_with(loss=np.linspace(0.7, -0.4, 100))
    run.info = RunInfo(loss="binary_crossentropy")
    (finding,) = check_label_problem(run)
    assert finding.code == "label_problem" and finding.severity == Severity.CRITICAL and "negative" in finding.title
    run.info = RunInfo(loss="mean_squared_error")  # not a cross-entropy: a negative value is no claim here
    assert check_label_problem(run) == []


def with_update_ratio(run: RunSignals, ratio: float) -> RunSignals:
    steps = np.arange(20, 20 * 11, 20)
    run.layer_series[sig.LAYER_UPDATE_RATIO] = LayerSeries(steps, np.full((len(steps), 2), ratio))
    return run


def swinging_loss() -> np.ndarray:
    """No progress, swings of ~80% of the level; the same draw every time (the rule also needs
    the last quarter's median within 10% of the third's)."""
    return 2.3 * np.exp(0.6 * np.random.default_rng(5).normal(size=400))


@pytest.mark.parametrize(("ratio", "fires"), [(None, True), (0.3, True), (7e-4, False)])
def test_oscillation_needs_large_updates_where_they_are_measured(ratio, fires):
    run = run_with(loss=swinging_loss())
    if ratio is not None:
        with_update_ratio(run, ratio)
    found = check_loss_oscillation(run)
    assert bool(found) == fires
    if found and ratio is not None:
        assert "learning rate is too high" in found[0].detail


def test_plateau_with_tiny_updates_puts_the_learning_rate_first():
    run = with_update_ratio(run_with(loss=1.0 + 0.01 * RNG.normal(size=400)), 3e-7)
    (finding,) = check_loss_plateau(run)
    assert finding.fixes[0].text.startswith("Raise the learning rate: each step moves the weights by only 3.0e-07")


@pytest.mark.parametrize(
    ("host_memory_mb", "fires"),
    [
        (np.concatenate([np.full(200, 1000.0), np.full(200, 1400.0)]), False),  # one allocation, then flat
        (np.concatenate([np.full(100, 1000.0), np.full(300, 1400.0)]), False),  # the same, before warm-up ends
        (np.full(400, 1400.0), False),  # flat from the start
        (np.linspace(1000.0, 1400.0, 400), True),  # steady climb: a leak
        (np.round(np.linspace(1000.0, 1400.0, 400) / 16) * 16, True),  # the same in 16 MiB pages (ties)
    ],
    ids=["jump-then-flat", "jump-in-warm-up", "flat", "steady-climb", "steady-climb-in-pages"],
)
def test_memory_growth_needs_a_steady_climb_not_a_one_off_jump(host_memory_mb, fires):
    from tb_trainhealth.rules.memory import check_memory_growth

    found = check_memory_growth(run_with(host_memory_mb=host_memory_mb))
    assert [f.code for f in found] == (["memory_growth"] if fires else [])
    assert codes(run_with(host_memory_mb=host_memory_mb)) == ({"memory_growth"} if fires else set())


@pytest.mark.parametrize(
    ("planned_end_step", "limit_mb", "severity"),
    [
        (400, 24_000.0, Severity.INFO),  # finished, 1.4 GiB of 24 GiB: the run lost nothing
        (40_000, 24_000.0, Severity.WARNING),  # 1 MiB a step for 39,600 more steps: past 24 GiB
        (400, 1_500.0, Severity.WARNING),  # already at 93% of what the process may hold
        (400, None, Severity.WARNING),  # no limit known: as urgent as a leak always was
    ],
    ids=["finished-far-below", "planned-far-beyond", "at-the-limit", "limit-unknown"],
)
def test_a_leak_is_a_warning_only_where_it_reaches_the_limit_by_the_planned_end(planned_end_step, limit_mb, severity):
    from tb_trainhealth.rules.memory import check_memory_growth

    run = run_with(host_memory_mb=np.linspace(1000.0, 1400.0, 400))
    run.info = RunInfo(planned_end_step=planned_end_step, host_memory_limit_mb=limit_mb)
    (finding,) = check_memory_growth(run)
    assert finding.severity == severity
    if severity == Severity.INFO:
        assert "not at risk" in finding.detail


def _memory_run(values, step_ms=None, planned=None, limit=24_000.0, steps=None, **settings):
    from tb_trainhealth.contract.run_settings import RunSettings

    steps = np.arange(1, len(values) + 1) * 32 if steps is None else steps  # the callback reads every 32 steps
    series = {sig.HOST_MEMORY_MB: Series.of(steps, np.asarray(values, dtype=float))}
    if step_ms is not None:
        series[sig.STEP_TIME_MS] = Series.of(steps, np.full(len(steps), float(step_ms)))
    run = RunSignals("r", series=series)
    run.info = RunInfo(planned_end_step=planned, host_memory_limit_mb=limit)
    run.settings = RunSettings((), dict(settings))
    return run


@pytest.mark.parametrize(
    ("step_ms", "planned", "severity", "said"),
    [
        (5.0, 400 * 32, Severity.WARNING, "10x the 12800 planned steps"),  # reaches 21.6 GiB by step ~88,000
        (5.0, 100 * 32, Severity.INFO, "not at risk"),  # 10x a shorter plan ends first
        (2000.0, 400 * 32, Severity.INFO, "a day at this run's 2000 ms per step"),  # a day is 43,200 steps
    ],
    ids=["ten-plans", "short-plan", "slow-steps"],
)
def test_a_steady_leak_is_projected_onto_a_long_run_of_the_same_training(step_ms, planned, severity, said):
    """Issue 58: a leak is judged by whether its rate fills the machine within a day at the run's
    step time or 10x its planned steps, not by whether this run ended first."""
    from tb_trainhealth.rules.memory import check_memory_growth

    run = _memory_run(np.linspace(1000.0, 4000.0, 400), step_ms=step_ms, planned=planned)  # 0.235 MiB a step
    (finding,) = check_memory_growth(run)
    assert finding.severity == severity and said in finding.detail, finding.detail
    assert "grows steadily" in finding.title and "keeps climbing to the end" in finding.detail
    facts = {fact.label: fact.value for fact in finding.evidence.facts}
    assert facts["slope"].startswith("235 MiB per 1000 steps") and facts["levels off"].startswith("no")
    assert "R² 1.00" in facts["fit"]


def test_growth_that_levels_off_is_info_and_says_where_even_with_a_long_plan():
    from tb_trainhealth.rules.memory import check_memory_growth

    values = 1000.0 + 800.0 * (1 - np.exp(-np.arange(400) / 80.0))  # a cache or pool filling: +800 MiB, then flat
    run = _memory_run(values, step_ms=5.0, planned=10**6)
    (finding,) = check_memory_growth(run)
    assert finding.severity == Severity.INFO and "levelled off" in finding.title
    facts = {fact.label: fact.value for fact in finding.evidence.facts}
    assert facts["levels off"].startswith("from step ") and "MiB" in facts["levels off"]
    level_step = int(facts["levels off"].split()[2])
    assert 8000 < level_step < 9500  # 90% of the growth after warm-up (from reading 100): reading 271


def test_the_likely_source_of_a_leak_per_epoch_or_per_step():
    from tb_trainhealth.rules.memory import check_memory_growth

    steps = np.arange(1, 121) * 32  # 3840 steps, epochs of 320 steps (10 readings each)
    per_epoch = 1000.0 + 100.0 * ((steps - 1) // 320)
    (finding,) = check_memory_growth(_memory_run(per_epoch, steps=steps, planned=10**5, steps_per_epoch=320))
    assert "grows at epoch ends" in finding.detail
    per_step = 1000.0 + 0.3 * steps
    (finding,) = check_memory_growth(_memory_run(per_step, steps=steps, planned=10**5, steps_per_epoch=320))
    assert "grows with every step" in finding.detail
    coarse = _memory_run(per_step, steps=steps, planned=10**5, steps_per_epoch=40)  # epochs shorter than readings
    (finding,) = check_memory_growth(coarse)
    assert "every step" not in finding.detail and "epoch ends" not in finding.detail


def test_the_oom_finding_quotes_memory_its_chart_shows_and_the_batch_size_it_settled_on():
    """Issue 58: the finding said "636 MB in use" (read after the failed step freed its buffers)
    under a chart of 680-705 MB; and a run that grew its batch back settled on the grown size."""
    from tb_trainhealth.contract.events import BatchSizeEvent, OomEvent
    from tb_trainhealth.report.lead_chart import lead_chart
    from tb_trainhealth.rules.crashes import check_oom

    steps = np.arange(1, 41)
    memory = Series.of(steps, np.linspace(680.0, 705.0, 40))
    events = [
        OomEvent(1, batch_size=8192, next_batch_size=4096, memory_mb=636.0, epoch=0),
        OomEvent(11, batch_size=4096, next_batch_size=2048, memory_mb=640.0, epoch=1),
        BatchSizeEvent(21, batch_size=3072, previous_batch_size=2048, epoch=2),
    ]
    run = RunSignals("r", series={sig.HOST_MEMORY_MB: memory}, events=events)
    (finding,) = check_oom(run)
    assert lead_chart(run, [finding])["series"] == [sig.HOST_MEMORY_MB]
    shown = {f"{value:.0f}" for value in memory.values}
    said = finding.title + finding.detail + " ".join(fact.value for fact in finding.evidence.facts)
    quoted = re.findall(r"(\d+) MB in use", said)
    assert quoted and set(quoted) <= shown, quoted
    assert "680 MB in use at step 1 (the first reading after it)" in said
    assert "MB in use at step 10 (the last reading before it)" in said
    assert "settled on batch size 3072" in finding.detail and "training continued at 3072" in finding.title
    assert any(fact.label == "grown back at step 21" for fact in finding.evidence.facts)


def test_fixes_are_fitted_to_what_the_run_already_does():
    from tb_trainhealth.contract.run_info import CallbackInfo
    from tb_trainhealth.findings import ADD_CLIPPING, ADD_EARLY_STOPPING, LOWER_RATE, Evidence, Finding, Fix
    from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER, RESTORE_BEST_FIX, fit_to_run

    stop = Fix("Stop early.", "keras.callbacks.EarlyStopping(monitor='val_loss', patience=3)", (ADD_EARLY_STOPPING,))
    finding = Finding("x", Severity.WARNING, 1, "t", "d", Evidence(("loss",)), (CLIP_FIX, LR_FIX_LOWER, stop))
    run = run_with(learning_rate=np.full(10, 1e-5))
    run.info = RunInfo(optimizer="SGD", clips_gradients=True, callbacks=(CallbackInfo("EarlyStopping", False),))
    fixes = fit_to_run(run, finding).fixes
    assert fixes[0] == RESTORE_BEST_FIX  # it stops early already, but keeps the last weights
    assert "already clipped" in fixes[1].text and "clipnorm" not in fixes[1].code
    assert "keras.optimizers.SGD(learning_rate=1e-06)" in fixes[1].code and "# was 1e-05" in fixes[1].code
    assert not any("EarlyStopping(monitor='val_loss', patience=3)" in (f.code or "") for f in fixes)
    assert len(fixes) == len(set(fixes))  # the clip fix became the lower-rate one: listed once
    assert fit_to_run(run_with(loss=np.ones(5)), finding) == finding  # nothing known: unchanged
    own_clip = Fix(
        "Clip and lower.", "keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)", (LOWER_RATE, ADD_CLIPPING)
    )
    (fixed,) = fit_to_run(run, dataclasses.replace(finding, fixes=(own_clip,))).fixes
    assert "already clipped" in fixed.text  # any fix whose intent adds clipping, not only CLIP_FIX
    worded = Fix("Lower the learning rate and clip.", "keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)")
    assert fit_to_run(run, dataclasses.replace(finding, fixes=(worded,))).fixes == (worded,)  # words are not intent


def test_a_relative_change_that_rounds_to_nothing_reads_0_percent_never_minus_0():
    from tb_trainhealth.rules.fact_text import signed_percent

    assert [signed_percent(v) for v in (-0.00004, 0.0, 0.00004)] == ["0.0%"] * 3
    assert signed_percent(-0.0123) == "-1.2%" and signed_percent(0.5) == "+50.0%"


def test_a_higher_learning_rate_is_never_the_one_in_use():
    from tb_trainhealth.findings import Evidence, Finding
    from tb_trainhealth.rules.common_fixes import fit_to_run
    from tb_trainhealth.rules.loss_curve import PLATEAU_FIXES

    run = run_with(learning_rate=np.full(10, 1e-3))
    run.info = RunInfo(optimizer="RMSprop")
    plateau = Finding("loss_plateau", Severity.WARNING, 1, "t", "d", Evidence(("loss",)), PLATEAU_FIXES)
    raised = fit_to_run(run, plateau).fixes[0]
    assert "keras.optimizers.RMSprop(learning_rate=0.01)" in raised.code and "# was 0.001" in raised.code


def test_two_findings_of_one_code_naming_the_same_layer_are_one():
    """Issue 36: "Two findings of one code that name the same layers are one finding"."""
    from tb_trainhealth.engine import one_per_layer
    from tb_trainhealth.findings import Evidence, Finding, Fix

    def dead(layer, severity=Severity.WARNING, title="dead", fix="a"):
        return Finding("dead_relu", severity, 5, title, "d.", Evidence((), layer=layer), (Fix(fix),))

    merged = one_per_layer([dead("dense"), dead("dense", Severity.CRITICAL, "worse", "b"), dead("dense_1")])
    assert [(f.severity, f.evidence.layer) for f in merged] == [
        (Severity.CRITICAL, "dense"),
        (Severity.WARNING, "dense_1"),
    ]
    assert (
        merged[0].title == "worse"
        and merged[0].detail == "d. Also: dead."
        and [f.text for f in merged[0].fixes] == ["b", "a"]
    )
    unnamed = [dead(None, title="one"), dead(None, title="two")]  # no layer named: not the same problem
    assert one_per_layer(unnamed) == unnamed


def test_a_regression_that_cannot_fit_its_batch_is_never_told_to_use_a_classification_loss():
    from tb_trainhealth.contract.events import LintEvent, PreflightEvent
    from tb_trainhealth.contract.vocab import LintCheck, LossKind
    from tb_trainhealth.rules.preflight_fit import _likely_cause

    lint = LintEvent(step=0, check=LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE, layer="out", activation="sigmoid")
    for loss, expected, absent in (
        (LossKind.MEAN_SQUARED_ERROR, "MeanSquaredError", "SparseCategoricalCrossentropy"),
        (LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, "SparseCategoricalCrossentropy", "MeanSquaredError"),
    ):
        _, fix = _likely_cause(RunSignals("r", events=[lint]), PreflightEvent(step=0, loss=loss))
        assert expected in fix.code and absent not in fix.code


def test_a_cause_is_listed_before_the_symptoms_it_explains_whatever_their_severity():
    from tb_trainhealth.engine import causes_first
    from tb_trainhealth.findings import Evidence, Finding

    def finding(code: str, severity: Severity) -> Finding:
        return Finding(code, severity, 1, code, "", Evidence(()))

    ordered = causes_first(
        [
            finding("nonfinite", Severity.CRITICAL),
            finding("loss_plateau", Severity.WARNING),
            finding("exploding_gradients", Severity.WARNING),
            finding("unnormalized_input", Severity.WARNING),
            finding("input_bound", Severity.WARNING),
            finding("output_loss_mismatch", Severity.INFO),  # info explains nothing: it stays put
        ]
    )
    assert [f.code for f in ordered] == [
        "unnormalized_input",
        "exploding_gradients",
        "nonfinite",
        "loss_plateau",
        "input_bound",
        "output_loss_mismatch",
    ]
