"""Preflight: broken set-ups trip each check, healthy twins stay quiet, the user's
model and optimizer are untouched, and the findings reach the log, the CLI and the callback.

Real TensorFlow on tiny models (about a second each). The healthy set-ups include models that
legitimately start at an unusual loss: label smoothing, class weights, a pretrained backbone,
weights from an earlier fit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT

from tb_trainhealth.contract.events import PreflightEvent
from tb_trainhealth.contract.vocab import LossKind
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.preflight import check_initial_loss_off, check_no_gradient
from tb_trainhealth.rules.preflight_fit import check_cannot_fit_small_batch, check_input_ignored
from tb_trainhealth.signals import RunSignals

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
L = keras.layers

import tb_trainhealth
from tb_trainhealth import HealthCallback, PreflightFailed

SCE = "sparse_categorical_crossentropy"


# -- data and models ---------------------------------------------------------------------------
def classes(n=512, d=20, k=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype("float32")
    y = np.argmax(x @ rng.normal(size=(d, k)) + 0.5 * rng.normal(size=(n, k)), 1)
    return x, y


def mlp(k=10, d=20, activation="softmax", loss=SCE, optimizer="adam", extra=(), **last):
    model = keras.Sequential(
        [keras.Input((d,)), L.Dense(64, activation="relu"), *extra, L.Dense(k, activation=activation, **last)]
    )
    model.compile(optimizer=optimizer, loss=loss)
    return model


def regression(n=512, d=8, seed=2, scale=1.0, offset=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype("float32")
    return x, (offset + scale * (np.sin(x[:, 0]) + x[:, 1] * x[:, 2])).astype("float32")


def images(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 16, 16, 1)).astype("float32")
    y = rng.integers(0, 5, n)
    x[np.arange(n), y * 3, y * 3, 0] += 3
    return x, y


def small_cnn(batch_norm=False):
    norm = [L.BatchNormalization()] if batch_norm else []
    model = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            L.Conv2D(8, 3, activation="relu"),
            *norm,
            L.MaxPooling2D(),
            L.Conv2D(16, 3, activation="relu"),
            L.GlobalAveragePooling2D(),
            L.Dense(5, activation="softmax"),
        ]
    )
    model.compile("adam", SCE)
    return model


def pretrained_backbone(head_units=None):
    """A backbone trained on the 10-class task, frozen, with a fresh binary head for a related task."""
    x, y = classes()
    backbone = keras.Sequential(
        [keras.Input((20,)), L.Dense(64, activation="relu"), L.Dense(32, activation="relu")], name="backbone"
    )
    first = keras.Sequential([backbone, L.Dense(10, activation="softmax")])
    first.compile("adam", SCE)
    first.fit(x, y, epochs=5, verbose=0)
    backbone.trainable = False
    hidden = [L.Dense(head_units, activation="relu")] if head_units else []
    model = keras.Sequential([keras.Input((20,)), backbone, *hidden, L.Dense(1, activation="sigmoid")])
    model.compile("adam", "binary_crossentropy")
    return model, x, (y < 5).astype("float32")


def _healthy():
    x, y = classes()
    xb, yb = classes(k=2, seed=1)
    xr, yr = regression()
    xi, yi = images()
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(256, 12, 4)).astype("float32")
    ys = (xs[:, :, 0].sum(1) > 0).astype("int32")
    xw = rng.normal(size=(2000, 20)).astype("float32")
    yw = (xw[:, 0] > 1.6).astype("float32")  # ~5% positives, weighted 10x
    weighted = tf.data.Dataset.from_tensor_slices((xw, yw, np.where(yw == 1, 10.0, 1.0).astype("float32")))
    prefit = mlp()
    prefit.fit(x, y, epochs=5, verbose=0)
    rnn = keras.Sequential([keras.Input((12, 4)), L.LSTM(16), L.Dense(2, activation="softmax")])
    rnn.compile("adam", SCE)
    conv1d = keras.Sequential(  # max-pooled features start large: the highest healthy initial loss seen
        [
            keras.Input((12, 4)),
            L.Conv1D(16, 3, activation="relu"),
            L.GlobalMaxPooling1D(),
            L.Dense(2, activation="softmax"),
        ]
    )
    conv1d.compile("adam", SCE)
    return {
        "mlp_adam": lambda: (mlp(), x, y),
        "mlp_sgd_default_rate": lambda: (mlp(optimizer="sgd"), x, y),
        "mlp_logits": lambda: (mlp(activation=None, loss=keras.losses.SparseCategoricalCrossentropy(True)), x, y),
        "mlp_dropout": lambda: (mlp(extra=(L.Dropout(0.5),)), x, y),
        "label_smoothing": lambda: (
            mlp(loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.5)),
            x,
            keras.utils.to_categorical(y, 10),
        ),
        "binary": lambda: (mlp(k=1, activation="sigmoid", loss="binary_crossentropy"), xb, yb.astype("float32")),
        "class_weights_tf_data": lambda: (
            mlp(k=1, activation="sigmoid", loss="binary_crossentropy"),
            weighted.shuffle(2000, seed=0).batch(32),
            None,
        ),
        "regression_mse": lambda: (mlp(k=1, d=8, activation=None, loss="mse"), xr, yr),
        "regression_small_targets": lambda: (mlp(k=1, d=8, activation=None, loss="mse"), xr, 0.05 + 0.01 * yr),
        "regression_large_targets": lambda: (mlp(k=1, d=8, activation=None, loss="mse"), xr, 300 + 50 * yr),
        "regression_mae": lambda: (mlp(k=1, d=8, activation=None, loss="mae"), xr, yr),
        "cnn_tf_data": lambda: (small_cnn(), tf.data.Dataset.from_tensor_slices((xi, yi)).batch(32), None),
        "cnn_batch_norm": lambda: (small_cnn(batch_norm=True), xi, yi),
        "rnn": lambda: (rnn, xs, ys),
        "conv1d_max_pooling": lambda: (conv1d, xs, ys),
        "pretrained_backbone_linear_head": lambda: pretrained_backbone(),
        "pretrained_backbone_mlp_head": lambda: pretrained_backbone(head_units=32),
        "weights_from_an_earlier_fit": lambda: (prefit, x, y),
    }


HEALTHY = [
    "mlp_adam",
    "mlp_sgd_default_rate",
    "mlp_logits",
    "mlp_dropout",
    "label_smoothing",
    "binary",
    "class_weights_tf_data",
    "regression_mse",
    "regression_small_targets",
    "regression_large_targets",
    "regression_mae",
    "cnn_tf_data",
    "cnn_batch_norm",
    "rnn",
    "conv1d_max_pooling",
    "pretrained_backbone_linear_head",
    "pretrained_backbone_mlp_head",
    "weights_from_an_earlier_fit",
]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_set_ups_pass(name):
    keras.utils.set_random_seed(0)
    model, x, y = _healthy()[name]()
    # A budget no machine runs out of (36 s of 60 went to 1700 steps with two copies of the suite on
    # 2 cores, and the verdict was skipped): every check must run and pass, however slow the machine.
    report = tb_trainhealth.preflight(model, x, y, max_seconds=600)
    assert report.ok, str(report)
    assert not report.measurements.skipped, str(report)
    assert "OK" in str(report)


def _broken():
    x, y = classes()
    xr, yr = regression()
    stop = keras.Input((20,))
    encoded = L.Dense(64, activation="relu", name="encoder")(stop)
    stopped = keras.Model(stop, L.Dense(10, activation="softmax")(L.Lambda(tf.stop_gradient)(encoded)))
    stopped.compile("adam", SCE)
    batch_mean = keras.Sequential(
        [
            keras.Input((20,)),
            L.Lambda(lambda t: tf.reduce_mean(t, axis=0, keepdims=True) + 0 * t),  # mean over the batch axis
            L.Dense(64, activation="relu"),
            L.Dense(10, activation="softmax"),
        ]
    )
    batch_mean.compile("adam", SCE)
    frozen = mlp()
    frozen.trainable = False
    frozen.compile("adam", SCE)
    unscaled_output = keras.Sequential(
        [keras.Input((8,)), L.Dense(64, activation="relu"), L.Dense(1), L.Rescaling(100.0)]
    )
    unscaled_output.compile("adam", "mse")
    dead = mlp()
    dead.layers[0].bias.assign(np.full(64, -100.0, "float32"))
    return {
        "learning_rate_1e-7": (lambda: (mlp(optimizer=keras.optimizers.Adam(1e-7)), x, y), "cannot_fit_small_batch"),
        "sigmoid_output_for_large_targets": (
            lambda: (mlp(k=1, d=8, activation="sigmoid", loss="mse"), xr, 50 + 10 * yr),
            "cannot_fit_small_batch",
        ),
        "last_layer_initialised_large": (
            lambda: (mlp(kernel_initializer=keras.initializers.RandomNormal(stddev=5.0)), x, y),
            "initial_loss_off",
        ),
        "predictions_unscaled_inside_the_model": (lambda: (unscaled_output, xr, yr), "initial_loss_off"),
        "mean_over_the_batch_axis": (lambda: (batch_mean, x, y), "input_ignored"),
        "frozen_model": (lambda: (frozen, x, y), "no_gradient"),
        "stop_gradient": (lambda: (stopped, x, y), "no_gradient"),
        "dead_relu_from_initialisation": (lambda: (dead, x, y), "no_gradient"),
    }


BROKEN = [
    "learning_rate_1e-7",
    "sigmoid_output_for_large_targets",
    "last_layer_initialised_large",
    "predictions_unscaled_inside_the_model",
    "mean_over_the_batch_axis",
    "frozen_model",
    "stop_gradient",
    "dead_relu_from_initialisation",
]


@pytest.mark.parametrize("name", BROKEN)
def test_broken_set_ups_are_found(name):
    keras.utils.set_random_seed(0)
    build, code = _broken()[name]
    model, x, y = build()
    report = tb_trainhealth.preflight(model, x, y)
    assert not report.ok
    assert code in {f.code for f in report.findings if f.severity >= Severity.WARNING}, str(report)
    assert all(f.fixes and f.fixes[0].code for f in report.findings), str(report)


def test_the_likely_cause_is_named():
    keras.utils.set_random_seed(0)
    x, y = classes()
    report = tb_trainhealth.preflight(mlp(optimizer=keras.optimizers.Adam(1e-7)), x, y)
    (finding,) = [f for f in report.findings if f.code == "cannot_fit_small_batch"]
    assert finding.severity == Severity.CRITICAL and "learning rate of 1e-07" in finding.title
    xr, yr = regression()
    report = tb_trainhealth.preflight(mlp(k=1, d=8, activation="sigmoid", loss="mse"), xr, 50 + 10 * yr)
    (finding,) = [f for f in report.findings if f.code == "cannot_fit_small_batch"]
    assert "activation" in finding.title and "targets out of output range" in finding.detail
    assert "output_loss_mismatch" in {f.code for f in report.findings}


def test_the_users_model_and_optimizer_are_unchanged():
    keras.utils.set_random_seed(0)
    x, y = images()
    model = small_cnn(batch_norm=True)
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)  # optimizer state and BN statistics exist
    weights = [w.copy() for w in model.get_weights()]
    optimizer_state = [v.numpy() for v in model.optimizer.variables]
    iterations = int(model.optimizer.iterations)
    tb_trainhealth.preflight(model, x, y)
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True))
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(optimizer_state, model.optimizer.variables, strict=True))
    assert int(model.optimizer.iterations) == iterations == 4
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)  # and it still trains
    assert int(model.optimizer.iterations) == 8


def test_a_small_cnn_preflight_takes_seconds_and_max_seconds_is_honoured():
    keras.utils.set_random_seed(0)
    x, y = images()
    began = time.perf_counter()
    report = tb_trainhealth.preflight(small_cnn(), x, y)
    assert time.perf_counter() - began < 15 and report.ok
    x, y = classes()
    slow = mlp(optimizer="sgd")  # needs ~600 steps to reach its target
    began = time.perf_counter()
    report = tb_trainhealth.preflight(slow, x, y, max_seconds=0.5)
    assert time.perf_counter() - began < 3.0
    assert report.measurements.fit_stopped == "time"
    assert "cannot_fit_small_batch" not in {f.code for f in report.findings}  # too few steps to judge


def test_raise_on_critical_raises_a_clear_error():
    keras.utils.set_random_seed(0)
    x, y = classes()
    frozen = mlp()
    frozen.trainable = False
    frozen.compile("adam", SCE)
    with pytest.raises(PreflightFailed, match="no_gradient") as raised:
        tb_trainhealth.preflight(frozen, x, y, raise_on="critical")
    assert not raised.value.report.ok
    tb_trainhealth.preflight(mlp(), x, y, raise_on="warning")  # a healthy model does not raise


def test_an_uncompiled_model_is_refused_clearly():
    x, y = classes()
    model = keras.Sequential([keras.Input((20,)), L.Dense(10)])
    with pytest.raises(ValueError, match=r"model\.compile"):
        tb_trainhealth.preflight(model, x, y)


def test_lint_findings_come_with_the_preflight():
    keras.utils.set_random_seed(0)
    x, y = classes()
    report = tb_trainhealth.preflight(mlp(loss="categorical_crossentropy"), x, y)  # class ids, not one-hot
    assert "label_problem" in {f.code for f in report.findings}
    assert "the loss fails on this batch" in str(report)  # as the first step of fit would


def _diagnose_cli(logdir):
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return {run["run"]: run for run in json.loads(proc.stdout)["runs"]}


def test_a_run_with_only_a_preflight_shows_it_in_diagnose(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = classes()
    frozen = mlp()
    frozen.trainable = False
    frozen.compile("adam", SCE)
    tb_trainhealth.preflight(frozen, x, y, log_dir=str(tmp_path / "frozen"))
    tb_trainhealth.preflight(mlp(), x, y, log_dir=str(tmp_path / "healthy"))
    runs = _diagnose_cli(tmp_path)
    assert runs["frozen"]["status"] == "critical"
    (finding,) = runs["frozen"]["findings"]
    assert finding["code"] == "no_gradient" and finding["step"] == 0
    assert runs["healthy"]["status"] == "ok"
    assert runs["healthy"]["event_counts"] == {"preflight": 1, "weight_init": 1}  # the kernels it judged
    from test_plugin import client_for, get_json  # the Health tab's routes, through TensorBoard's app

    client = client_for(str(tmp_path))
    tab = get_json(client, "/findings?run=frozen")
    assert [(f["code"], f["step"]) for f in tab["findings"]] == [("no_gradient", 0)]


def test_a_preflight_before_a_fit_in_the_same_run_keeps_both(tmp_path):
    """Preflight records live under their own tag: the fit's events at the same step do not replace them."""
    keras.utils.set_random_seed(0)
    x, y = classes()
    model = mlp(optimizer=keras.optimizers.Adam(1e-7))
    tb_trainhealth.preflight(model, x, y, log_dir=str(tmp_path / "run"))
    time.sleep(1.1)  # (event files are named by the second they were opened)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"), verbose=False)])
    run = _diagnose_cli(tmp_path)["run"]
    assert "cannot_fit_small_batch" in {f["code"] for f in run["findings"]}
    assert run["event_counts"]["preflight"] == 1 and run["event_counts"]["fit_end"] == 1


def test_health_callback_runs_the_preflight_at_train_start(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = classes()
    broken = mlp(optimizer=keras.optimizers.Adam(1e-7))
    callback = HealthCallback(str(tmp_path / "broken"), preflight=True, verbose=False)
    broken.fit(x, y, epochs=1, verbose=0, callbacks=[callback])
    assert "cannot_fit_small_batch" in {f.code for f in callback.findings}
    healthy = HealthCallback(str(tmp_path / "healthy"), preflight=True, verbose=False)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    mlp().fit(dataset, epochs=1, verbose=0, callbacks=[healthy])
    assert not [f for f in healthy.findings if f.severity >= Severity.WARNING]
    runs = _diagnose_cli(tmp_path)
    assert "cannot_fit_small_batch" in {f["code"] for f in runs["broken"]["findings"]}
    assert runs["healthy"]["event_counts"]["preflight"] == 1


def test_a_generator_fit_skips_the_preflight_without_taking_its_batches(tmp_path, capsys):
    x, y = classes()

    def batches():
        while True:
            for i in range(0, 512, 32):
                yield x[i : i + 32], y[i : i + 32]

    model = mlp()
    callback = HealthCallback(str(tmp_path / "gen"), preflight=True, verbose=False)
    model.fit(batches(), steps_per_epoch=4, epochs=1, verbose=0, callbacks=[callback])
    assert int(model.optimizer.iterations) == 4
    assert "preflight skipped" in capsys.readouterr().err


def test_a_failing_preflight_never_breaks_training(tmp_path, monkeypatch):
    from tb_trainhealth.callback.preflight import in_fit

    def broken(*args, **kwargs):
        raise RuntimeError("bug in the preflight")

    monkeypatch.setattr(in_fit, "measure", broken)
    x, y = classes()
    model = mlp()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"), preflight=True, verbose=False)])
    assert int(model.optimizer.iterations) == 16


# -- the rules on their own (no training) ------------------------------------------------------
def _run(**fields) -> RunSignals:
    return RunSignals("r", events=[PreflightEvent(0, samples=32, fit_samples=32, trainable_params=10_000, **fields)])


def test_initial_loss_only_far_above_the_implied_value_counts():
    sce = LossKind.SPARSE_CATEGORICAL_CROSSENTROPY
    assert check_initial_loss_off(_run(loss=sce, initial_loss=6.8, expected_loss=2.3)) == []
    assert check_initial_loss_off(_run(loss=sce, initial_loss=0.4, expected_loss=2.3)) == []  # pretrained
    assert check_initial_loss_off(_run(loss=sce, initial_loss=7.0, expected_loss=2.3))[0].code == "initial_loss_off"
    mse = LossKind.MEAN_SQUARED_ERROR
    assert check_initial_loss_off(_run(loss=mse, initial_loss=0.5, expected_loss=0.003)) == []  # small targets
    assert check_initial_loss_off(_run(loss=mse, initial_loss=4000.0, expected_loss=1.2))


def test_cannot_fit_is_judged_against_the_reference_and_only_after_a_fair_trial():
    fit = {"fit_start_loss": 2.4, "fit_reference": 2.0, "fit_target": 0.2, "baseline_loss": 2.0}
    assert check_cannot_fit_small_batch(_run(fit_end_loss=1.9, fit_steps=600, fit_stopped="steps", **fit))
    assert check_cannot_fit_small_batch(_run(fit_end_loss=1.0, fit_steps=600, fit_stopped="steps", **fit)) == []
    assert check_cannot_fit_small_batch(_run(fit_end_loss=2.4, fit_steps=20, fit_stopped="time", **fit)) == []
    stuck = check_cannot_fit_small_batch(_run(fit_end_loss=2.39, fit_steps=600, fit_stopped="steps", **fit))
    assert stuck[0].severity == Severity.CRITICAL
    # Label smoothing: the floor is the targets' own entropy, not 0.
    smoothed = {**fit, "floor_loss": 1.6}
    assert check_cannot_fit_small_batch(_run(fit_end_loss=1.7, fit_steps=600, fit_stopped="steps", **smoothed)) == []
    tiny_head = RunSignals(
        "r", events=[PreflightEvent(0, samples=32, fit_samples=32, trainable_params=17, fit_end_loss=2.39, **fit)]
    )
    assert check_cannot_fit_small_batch(tiny_head) == []


def test_input_ignored_needs_a_fit_that_learned_and_a_control_as_good():
    fit = {"fit_start_loss": 2.4, "baseline_loss": 1.9, "zeroed_steps": 600}
    assert check_input_ignored(_run(fit_end_loss=1.9, zeroed_end_loss=2.0, **fit))[0].code == "input_ignored"
    assert check_input_ignored(_run(fit_end_loss=1.2, zeroed_end_loss=2.0, **fit)) == []
    assert check_input_ignored(_run(fit_end_loss=2.39, zeroed_end_loss=2.39, **fit)) == []  # nothing learned


def test_no_gradient_severity():
    assert check_no_gradient(_run(trainable_variables=0))[0].severity == Severity.CRITICAL
    some = check_no_gradient(_run(trainable_variables=4, no_gradient=("enc/kernel", "enc/bias")))
    assert some[0].severity == Severity.WARNING and some[0].evidence.layer == "enc"
    assert check_no_gradient(_run(trainable_variables=4)) == []
