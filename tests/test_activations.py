"""Dead ReLU and saturated sigmoid/tanh units, from the per-epoch probe batch, on real runs
(and their healthy twins), plus the rule on synthetic measurements."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from conftest import alarms, diagnose_logdir, read_logdir

from tb_trainhealth import HealthCallback
from tb_trainhealth.callback.lint.activation_probe import dead_share, saturated_share
from tb_trainhealth.contract.events import parse_event
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.activations import check_dead_relu, check_saturated_activation
from tb_trainhealth.signals import RunSignals

rng = np.random.default_rng(0)
X = rng.normal(size=(1024, 16)).astype("float32")
Y = (X[:, 0] + X[:, 1] > 0).astype("int32")


def mlp(activation: str, **dense_kwargs) -> keras.Model:
    hidden = [keras.layers.Dense(64, activation=activation, name=f"hidden{i}", **dense_kwargs) for i in (1, 2)]
    return keras.Sequential([keras.Input((16,)), *hidden, keras.layers.Dense(2, name="logits")])


def train(tmp_path, model):
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(X, Y, batch_size=8, epochs=3, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"))])
    return read_logdir(str(tmp_path))["run"], diagnose_logdir(str(tmp_path))["run"]


CASES = {
    "dead_relu": (
        lambda: mlp("relu", bias_initializer=keras.initializers.Constant(-4.0)),  # units start (and stay) off
        lambda: mlp("relu", kernel_initializer="he_normal"),
    ),
    "saturated_activation": (
        lambda: mlp("tanh", kernel_initializer=keras.initializers.RandomNormal(stddev=8.0)),  # pre-activations ~ +-30
        lambda: mlp("tanh"),
    ),
}


@pytest.mark.parametrize("code", list(CASES))
def test_broken_layers_are_named_and_their_twins_are_quiet(tmp_path, code):
    broken, healthy = CASES[code]
    run, findings = train(tmp_path / "broken", broken())
    # At epoch ends (128 steps each), at most every PROBE_EVERY_STEPS (200) steps.
    assert [e.step for e in run.events if e.kind == "activations"] == [128, 384]
    found = [f for f in findings if f.code == code]  # one finding naming both layers
    assert len(found) == 1 and "hidden1 (" in found[0].title and "hidden2 (" in found[0].title, [
        f.title for f in findings
    ]
    assert found[0].severity == Severity.WARNING and found[0].fixes
    _, twin = train(tmp_path / "twin", healthy())
    assert alarms(twin) == []


def test_dead_relu_also_explains_the_vanishing_gradients_it_causes(tmp_path):
    _, findings = train(tmp_path, CASES["dead_relu"][0]())
    assert "vanishing_gradients" not in {f.code for f in findings}


def test_shares_follow_the_sagemaker_definitions():
    outputs = np.zeros((100, 4), np.float32)
    outputs[:, 0] = 1.0  # always active
    outputs[0, 1] = 1.0  # active on 1% of samples: not dead (dead is < 1%)
    assert dead_share(outputs) == 0.5
    assert saturated_share("tanh", np.array([1.0, -1.0, 0.999, 0.0], np.float32)) == 0.5
    assert saturated_share("sigmoid", np.array([1.0, 1e-12, 0.5, 1e-8], np.float32)) == 0.5


def samples(*shares: float) -> RunSignals:
    events = [
        parse_event(
            {"kind": "activations", "step": 100 * (i + 1), "layers": {"d": {"activation": "relu", "dead": share}}}
        )
        for i, share in enumerate(shares)
    ]
    return RunSignals("r", events=events)


@pytest.mark.parametrize(
    ("shares", "onset"),
    [((0.1, 0.6, 0.7), 200), ((0.6, 0.7, 0.4), None), ((0.5, 0.5), None), ((0.95,), 100), ((0.56, 0.58, 0.57), None)],
    ids=["dies-at-200", "recovered", "at-the-threshold", "all-dead-from-the-start", "half-off-from-init-not-dying"],
)
def test_dead_relu_onset_is_where_it_stayed_dead(shares, onset):
    found = check_dead_relu(samples(*shares))
    assert [f.step for f in found] == ([onset] if onset else [])
    assert check_saturated_activation(samples(*shares)) == []  # a ReLU layer is never "saturated"


def test_small_batches_grow_the_probe_batch_and_a_tiny_probe_gives_no_dead_share():
    """With batch_size=8 one batch says little about a unit that fires 10% of the time."""
    import tensorflow as tf

    from tb_trainhealth.callback.lint.activation_probe import ActivationProbe
    from tb_trainhealth.callback.lint.data_lint import PROBE_SAMPLES, BatchLint

    model = mlp("relu")
    lint = BatchLint(model)
    for start in range(0, 160, 8):
        lint.inspect((tf.constant(X[start : start + 8]), tf.constant(Y[start : start + 8])))
    assert lint.first_inputs.shape[0] == PROBE_SAMPLES
    np.testing.assert_array_equal(lint.first_inputs.numpy(), X[:PROBE_SAMPLES])
    probe = ActivationProbe(model)
    assert "dead" in probe.measure(lint.first_inputs, step=1)["hidden1"]
    assert "dead" not in probe.measure(tf.constant(X[:8]), step=2)["hidden1"]


def test_half_precision_tanh_is_not_judged_for_saturation():
    """float16 rounds tanh to +-1 from inputs of ~4.5 (not 9.4): its outputs can't tell saturation."""
    from tb_trainhealth.callback.lint.activation_probe import ActivationProbe

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = mlp("tanh")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    measured = ActivationProbe(model).measure(X[:64], step=1)
    assert set(measured) == {"hidden1", "hidden2"}
    assert all("saturated" not in layer for layer in measured.values())
    assert "saturated" in ActivationProbe(mlp("tanh")).measure(X[:64], step=1)["hidden1"]


def test_probes_are_sampled_by_steps_and_time_and_the_end_of_training_is_always_measured():
    from tb_trainhealth.callback.lint.activation_probe import PROBE_EVERY_STEPS, ActivationProbe

    probe = ActivationProbe(mlp("relu"))
    assert probe.due(1)  # the first epoch end
    probe.measure(X[:64], step=1)
    assert not probe.due(PROBE_EVERY_STEPS)  # too few steps since
    # Enough steps, but the probe just spent its time share (a ~5 ms pass waits ~1 s).
    assert not probe.due(1 + PROBE_EVERY_STEPS)
    assert probe.due(2, final=True) and not probe.due(1, final=True)  # training ends: once more


def test_nan_activations_are_neither_dead_nor_saturated():
    from tb_trainhealth.callback.lint.activation_probe import ActivationProbe

    for activation in ("relu", "tanh"):
        model = mlp(activation)
        model.get_layer("hidden1").kernel.assign(np.full((16, 64), np.nan, "float32"))
        measured = ActivationProbe(model).measure(X[:64], step=1)
        assert measured["hidden1"] == {"activation": activation, "units": 64}


def test_layers_dead_together_make_one_finding_naming_each():
    """Two layers dead at once are one problem with one set of fixes, not two identical cards."""
    events = [
        parse_event(
            {"kind": "activations", "step": 100, "layers": {"a": {"activation": "relu", "dead": 0.95},
                                                            "b": {"activation": "relu", "dead": 0.97}}}
        )
    ]  # fmt: skip
    (found,) = check_dead_relu(RunSignals("r", events=events))
    assert "a (95%)" in found.title and "b (97%)" in found.title and found.evidence.layer == "b"
    assert "2 layers" in found.detail
