"""HealthCallback on real (tiny) training: the recorded values are the real step's values."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import read_logdir

from tb_trainhealth import HealthCallback
from tb_trainhealth.callback.step import row_buffer, weight_norms
from tb_trainhealth.callback.step.row_layout import EARLY_SAMPLE_EVERY, EARLY_SAMPLE_STEPS, SAMPLE_EVERY
from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Severity


def tiny_model(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="hidden"), keras.layers.Dense(3, name="out")]
    )
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)).astype("float32"), rng.integers(0, 3, n).astype("int32")


def test_first_step_values_equal_a_hand_computed_reference(tmp_path):
    model = tiny_model()
    x, y = data()
    with tf.GradientTape() as tape:
        loss = model.loss(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    expected_layers = [
        np.sqrt(sum(float(tf.reduce_sum(g**2)) for g, v in zip(grads, model.trainable_variables) if layer in v.path))
        for layer in ("hidden", "out")
    ]
    model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"))])
    run = read_logdir(str(tmp_path))["r"]
    assert run.series[sig.LOSS].values[0] == pytest.approx(float(loss), rel=1e-5)
    assert run.series[sig.GRAD_NORM].values[0] == pytest.approx(np.linalg.norm(expected_layers), rel=1e-5)
    np.testing.assert_allclose(run.layer_series[sig.LAYER_GRAD_NORM].values[0], expected_layers, rtol=1e-5)
    weight_norms = [
        np.sqrt(sum(float(np.sum(np.square(v.numpy()))) for v in model.get_layer(n).trainable_variables))
        for n in ("hidden", "out")
    ]
    np.testing.assert_allclose(run.layer_series[sig.LAYER_WEIGHT_NORM].values[-1], weight_norms, rtol=1e-5)
    assert [layer.name for layer in run.layers] == ["hidden", "out"]
    assert run.series[sig.LEARNING_RATE].values[0] == pytest.approx(0.1)


@pytest.mark.parametrize("steps_per_execution", [1, 5])
def test_every_step_recorded_once_across_epochs_and_fits(tmp_path, steps_per_execution):
    model = tiny_model()
    model.compile(model.optimizer, model.loss, steps_per_execution=steps_per_execution)
    x, y = data(200)
    callback = HealthCallback(str(tmp_path / "r"), verbose=False)
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[callback])  # 75 steps
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[callback])  # 25 more, continuing
    run = read_logdir(str(tmp_path))["r"]
    for name in (sig.LOSS, sig.GRAD_NORM):
        np.testing.assert_array_equal(run.series[name].steps, np.arange(1, 101))
    lr = run.series[sig.LEARNING_RATE]  # written where it changes, and once per read-back window
    assert lr.steps[0] == 1 and np.all(np.diff(lr.steps) > 0) and np.allclose(lr.values, 0.1)
    assert len(run.series[sig.EPOCH_LOSS]) == 4
    times = run.series[sig.STEP_TIME_MS]
    assert 50 <= len(times) < 100 and np.all(times.values > 0)


def test_stop_on_critical_records_then_stops_and_notifies(tmp_path, capsys):
    model = tiny_model()
    x, y = data(640)
    x[200, 0] = np.nan  # batch 6 of 32-sample batches
    seen = []
    callback = HealthCallback(str(tmp_path / "r"), stop_on="critical", on_finding=seen.append)
    history = model.fit(x, y, batch_size=32, epochs=50, shuffle=False, verbose=0, callbacks=[callback])
    assert len(history.epoch) == 1  # stopped in the first epoch, not after 50
    assert [f.code for f in seen] == ["nonfinite"] and seen[0].step == 7
    assert f"tb-trainhealth [critical] {tmp_path / 'r'}: nonfinite @ step 7: " in capsys.readouterr().out
    run = read_logdir(str(tmp_path))["r"]
    assert any(e.kind == "finding" and e.finding["code"] == "nonfinite" for e in run.events)


def test_failing_probe_is_reported_once_and_training_continues(tmp_path, capsys, monkeypatch):
    def broken(self, base_step, num_layers):
        raise RuntimeError("probe bug")

    monkeypatch.setattr(row_buffer.RowBuffer, "read_new", broken)
    model = tiny_model()
    x, y = data(640)
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"))])
    assert len(history.epoch) == 2
    assert capsys.readouterr().err.count("probe disabled") == 1
    run = read_logdir(str(tmp_path))["r"]
    assert len(run.series[sig.EPOCH_LOSS]) == 2  # the other probes kept recording
    # and the optimizer is back to normal: a later fit without the callback still trains
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert "apply" not in model.optimizer.__dict__


def test_events_survive_a_crash_after_the_nan(tmp_path):
    script = textwrap.dedent(
        f"""
        import keras, numpy as np
        from scenarios import _classes, _mlp, SPARSE_CE
        from tb_trainhealth import HealthCallback
        x, y = _classes(640, 10, 4, 0)
        x[100, 2] = np.nan
        class Crash(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 10:
                    raise RuntimeError("simulated crash")
        model = _mlp(10, 4)
        model.compile("adam", SPARSE_CE)
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0,
                  callbacks=[HealthCallback({str(tmp_path / "r")!r}), Crash()])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "simulated crash" in proc.stderr
    run = read_logdir(str(tmp_path))["r"]
    nonfinite = [e for e in run.events if e.kind == "nonfinite"]
    assert nonfinite and min(e.step for e in nonfinite) == 4


def test_embedding_gradient_norm_sums_duplicate_rows(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((6,), dtype="int32"),
            keras.layers.Embedding(50, 4, name="emb"),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1, name="out"),
        ]
    )
    model.compile(keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError())
    x = np.array([[1, 1, 1, 2, 2, 3]] * 8, dtype="int32")  # repeated ids: duplicate sparse rows
    y = np.ones((8, 1), "float32")
    with tf.GradientTape() as tape:
        loss = model.loss(y, model(x, training=True))
    (emb_grad,) = [
        g for g, v in zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables) if "emb" in v.path
    ]
    expected = float(tf.norm(tf.convert_to_tensor(emb_grad)))
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"))])
    run = read_logdir(str(tmp_path))["r"]
    assert run.layer_series[sig.LAYER_GRAD_NORM].values[0][0] == pytest.approx(expected, rel=1e-5)


def test_new_optimizer_between_fits_keeps_steps_increasing(tmp_path):
    """Fine-tuning: freeze, fit, unfreeze, compile a new optimizer, fit again with the same callback."""
    model = tiny_model()
    x, y = data(160)
    callback = HealthCallback(str(tmp_path / "r"), verbose=False)
    model.get_layer("hidden").trainable = False
    model.compile(keras.optimizers.SGD(0.1), model.loss)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[callback])  # 10 steps
    model.get_layer("hidden").trainable = True
    model.compile(keras.optimizers.Adam(1e-3), model.loss)  # iterations back at 0
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[callback])  # 20 more
    run = read_logdir(str(tmp_path))["r"]
    np.testing.assert_array_equal(run.series[sig.LOSS].steps, np.arange(1, 31))
    np.testing.assert_array_equal(run.series[sig.EPOCH_LOSS].steps, [10, 20, 30])
    assert [layer.name for layer in run.layers] == ["hidden", "out"]


def test_mixed_precision_loss_scale_skips_are_info_not_nonfinite(tmp_path):
    """LossScaleOptimizer skips steps whose scaled fp16 gradients overflow: normal, reported as info."""
    from conftest import diagnose_logdir

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(0)
        x = np.random.default_rng(0).normal(size=(2048, 16)).astype("float32")
        y = (300 * x[:, :1]).astype("float32")  # big targets: scaled gradients overflow fp16 at first
        model = keras.Sequential(
            [keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1, dtype="float32")]
        )
        model.compile(keras.optimizers.Adam(1e-3), "mse")
        model.fit(
            x, y, batch_size=32, epochs=2, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"), verbose=False)]
        )
        assert float(model.optimizer.dynamic_scale.numpy()) < model.optimizer.initial_scale  # steps were skipped
    finally:
        keras.mixed_precision.set_global_policy("float32")
    run = read_logdir(str(tmp_path))["r"]
    assert run.info.loss_scale and any(e.kind == "nonfinite" for e in run.events)
    nonfinite = [f for f in diagnose_logdir(str(tmp_path))["r"] if f.code == "nonfinite"]
    assert nonfinite and all(f.severity == Severity.INFO for f in nonfinite)


@pytest.mark.parametrize(
    ("activation", "loss", "check"),
    [
        ("softmax", keras.losses.SparseCategoricalCrossentropy(from_logits=True), "probabilities as logits"),
        (None, "sparse_categorical_crossentropy", "logits as probabilities"),
        (None, keras.losses.SparseCategoricalCrossentropy(from_logits=True), None),  # the healthy twin
        ("softmax", "sparse_categorical_crossentropy", None),  # also right
    ],
)
def test_model_lint_last_layer_vs_loss(tmp_path, activation, loss, check):
    from conftest import diagnose_logdir

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(3, activation=activation, name="head"),
        ]
    )
    model.compile("adam", loss)
    x, y = data(64)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"), verbose=False)])
    found = [f for f in diagnose_logdir(str(tmp_path))["r"] if f.code == "output_loss_mismatch"]
    if check is None:
        assert found == []
    else:
        (finding,) = found
        assert check in finding.title and finding.evidence.layer == "head" and finding.fixes[0].code
        # Keras reads the logits behind a softmax itself (bench/keras_handles_lints.py): info, not a warning.
        assert finding.severity == (Severity.INFO if check == "probabilities as logits" else Severity.WARNING)


@pytest.mark.parametrize(
    ("layers", "check"),
    [
        ([keras.layers.Dense(8, activation="relu"), keras.layers.Dropout(0.8, name="drop"), keras.layers.Dense(3)],
         "Dropout rate 0.8 in drop"),
        ([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3), keras.layers.Dropout(0.2, name="drop")],
         "Dropout after the output layer (drop)"),
        ([keras.layers.Dense(8, activation="relu"), keras.layers.Dropout(0.5, name="drop"), keras.layers.Dense(3)],
         None),  # the usual rate
    ],
    ids=["rate-0.8", "after-output", "rate-0.5"],
)  # fmt: skip
def test_model_config_lint_on_dropout(tmp_path, layers, check):
    from conftest import diagnose_logdir

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), *layers])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data(64)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "r"), verbose=False)])
    found = [f for f in diagnose_logdir(str(tmp_path))["r"] if f.code == "model_config"]
    assert [f.title for f in found] == ([] if check is None else [check])
    assert all(f.severity == Severity.INFO and f.evidence.layer == "drop" and f.fixes[0].code for f in found)


@pytest.mark.parametrize(
    ("hidden_layers", "numpy_samples"),
    [(1, True), (1, False), (9, False)],  # 9: more variables than weight_norms.EAGER_MAX_VARIABLES
    ids=["numpy", "eager", "compiled"],
)
def test_update_ratio_is_the_real_update_over_the_weights(tmp_path, monkeypatch, hidden_layers, numpy_samples):
    """Plain SGD moves each weight by exactly lr * gradient: the sampled ||dw|| / ||w|| must equal
    lr * ||g|| / ||w|| on the same step, layer by layer; sampled densely early in the fit, sparsely after."""
    if not numpy_samples:  # a small model in host memory is sampled with numpy (`HOST_MAX_PARAMS`)
        monkeypatch.setattr(weight_norms, "HOST_MAX_PARAMS", 0)
    keras.utils.set_random_seed(0)
    hidden = [keras.layers.Dense(8, activation="relu") for _ in range(hidden_layers)]
    model = keras.Sequential([keras.Input((4,)), *hidden, keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert (len(model.trainable_variables) > weight_norms.EAGER_MAX_VARIABLES) == (hidden_layers == 9)
    x, y = data(8 * 320)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"))])
    weights_sampler = model.__dict__["_trainhealth_step_probe"].weights
    assert weights_sampler._compiled == (hidden_layers == 9)
    assert weights_sampler.on_host == (numpy_samples and not tf.config.list_physical_devices("GPU"))
    run = read_logdir(str(tmp_path))["run"]
    ratios = run.layer_series[sig.LAYER_UPDATE_RATIO]
    early = range(EARLY_SAMPLE_EVERY, EARLY_SAMPLE_STEPS + 1, EARLY_SAMPLE_EVERY)
    assert list(ratios.steps) == [*early, *range(EARLY_SAMPLE_STEPS + SAMPLE_EVERY, 321, SAMPLE_EVERY)]
    grads, weights = run.layer_series[sig.LAYER_GRAD_NORM], run.layer_series[sig.LAYER_WEIGHT_NORM]
    for step, ratio in zip(ratios.steps, ratios.values):
        grad = grads.values[list(grads.steps).index(step)]
        weight = weights.values[list(weights.steps).index(step)]
        # ||w_after - w_before|| in float32: weights of ~0.3 moving by ~1e-6 (the deep model's first
        # layers) keep ~3 digits, so the deep model is held to 1e-3.
        np.testing.assert_allclose(ratio * weight, 0.1 * grad, rtol=1e-4 if hidden_layers == 1 else 1e-3)


def test_the_event_file_is_closed_after_fit_and_a_fit_that_follows_at_once_writes_on_in_it(tmp_path, monkeypatch):
    """Closed like Keras' TensorBoard callback closes its writers, once no fit follows within
    CLOSE_IDLE_SECONDS (files opened within one second can sort out of order)."""
    from tb_trainhealth.callback.record import health_writer, recording

    closed = []
    original_close = health_writer.HealthWriter.close

    def close(writer):
        if writer._log_dir.startswith(str(tmp_path)):  # (other tests' callbacks close meanwhile)
            closed.append(writer)
        original_close(writer)

    monkeypatch.setattr(health_writer.HealthWriter, "close", close)
    monkeypatch.setattr(recording, "CLOSE_IDLE_SECONDS", 1.5)
    model = tiny_model()
    x, y = data()
    callback = HealthCallback(str(tmp_path / "r"))
    for _ in range(2):  # one after the other: the same file
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[callback])
    time.sleep(2.5)
    assert len(closed) == 1 and len(os.listdir(tmp_path / "r")) == 1
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[callback])  # after a pause: a new file
    time.sleep(2.5)
    assert len(closed) == 2 and len(os.listdir(tmp_path / "r")) == 2
    run = read_logdir(str(tmp_path))["r"]
    np.testing.assert_array_equal(run.series[sig.LOSS].steps, np.arange(1, 13))  # 3 fits, 4 steps each


@pytest.fixture
def traces(monkeypatch):
    """Counts how often Keras' standard train_step is traced (its Python runs only while tracing)."""
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    count = {"n": 0}
    original = TensorFlowTrainer.train_step

    @functools.wraps(original)
    def counting(self, data):
        count["n"] += 1
        return original(self, data)

    monkeypatch.setattr(TensorFlowTrainer, "train_step", counting)
    return count


def test_a_fit_traces_the_step_once_and_a_second_fit_not_at_all(tmp_path, traces):
    """A new HealthCallback per fit (a sweep, a notebook cell) costs no tracing beyond Keras' own:
    the optimizer is built before the first step, so even a fresh model's step is traced once
    (Keras alone traces it twice: the first trace creates the optimizer's variables)."""

    def adam_model() -> keras.Model:  # (Adam has slot variables, built in the first step)
        model = tiny_model()
        model.compile(keras.optimizers.Adam(1e-3), model.loss)
        return model

    x, y = data(96)
    adam_model().fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert traces["n"] == 2  # Keras alone, fresh model

    model, traces["n"] = adam_model(), 0
    # (trials=False: a fit judged failing trains clones at its end, whose steps the counter would see too)
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=1,
        verbose=0,
        callbacks=[HealthCallback(str(tmp_path / "a"), verbose=False, trials=False)],
    )
    assert traces["n"] == 1
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=2,
        verbose=0,
        callbacks=[HealthCallback(str(tmp_path / "b"), verbose=False, trials=False)],
    )
    assert traces["n"] == 1  # the second fit reused the instrumented step
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # without the callback: Keras' own step, no probe
    assert "scale_loss" not in model.optimizer.__dict__  # unwrapped between fits
    runs = read_logdir(str(tmp_path))
    np.testing.assert_array_equal(runs["a"].series[sig.LOSS].steps, np.arange(1, 7))
    np.testing.assert_array_equal(runs["b"].series[sig.LOSS].steps, np.arange(7, 19))  # steps go on
    assert np.isfinite(runs["b"].layer_series[sig.LAYER_WEIGHT_NORM].values[0]).all()  # first row of a fit: norms


def test_a_fresh_model_with_compiled_metrics_is_traced_once_with_keras_own_metrics(tmp_path, traces):
    """Keras alone traces a fresh model's step twice when it has compiled metrics (the first trace
    creates their variables); the callback has Keras build them from the first batch before the
    step: one trace, and the same metrics with the same values."""

    def with_metrics() -> keras.Model:
        model = tiny_model()
        model.compile(keras.optimizers.Adam(1e-2), model.loss, metrics=["accuracy"])
        return model

    x, y = data(96)
    bare = with_metrics().fit(x, y, batch_size=16, epochs=2, verbose=0).history
    assert traces["n"] == 2
    traces["n"] = 0
    callback = HealthCallback(str(tmp_path / "r"), verbose=False, trials=False)  # (clones would be counted)
    health = with_metrics().fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[callback]).history
    assert traces["n"] == 1
    assert set(health) == set(bare) == {"loss", "accuracy"}
    for key in bare:
        np.testing.assert_allclose(health[key], bare[key], rtol=1e-6)


def test_compiling_again_gives_a_fresh_instrumented_step(tmp_path):
    """After compile (here: a different loss) the recorded loss is the new loss, not the old step's."""
    x, y = data(64)
    model = tiny_model()
    model.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "a"), verbose=False)])
    # The same optimizer object, the same variables: only compile itself tells the step is stale.
    model.compile(model.optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=False))
    expected = float(model.loss(y, model(x)))
    model.fit(
        x,
        y,
        batch_size=64,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[HealthCallback(str(tmp_path / "b"), verbose=False)],
    )
    recorded = read_logdir(str(tmp_path))["b"].series[sig.LOSS].values[0]
    assert recorded == pytest.approx(expected, rel=1e-5)
