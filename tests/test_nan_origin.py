"""The first NaN, located: the batch is replayed layer by layer on the weights from before the
failing update, and the finding names the layer, the op, the step and the op's own fix."""

from __future__ import annotations

import gc
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import alarms, diagnose_logdir, read_logdir

from tb_trainhealth import HealthCallback
from tb_trainhealth.contract.events import NanOriginEvent
from tb_trainhealth.findings import Severity

rng = np.random.default_rng(0)
X = rng.normal(size=(640, 8)).astype("float32")
Y = (X[:, :1] * 0.5 + 0.1 * rng.normal(size=(640, 1))).astype("float32")


@keras.saving.register_keras_serializable("tests")
class LogFeatures(keras.layers.Layer):
    """log of ReLU features: log(0) = -inf as soon as a unit is off (the bug); log1p is the fix."""

    def __init__(self, safe: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.safe = safe

    def call(self, x):
        return tf.math.log1p(x) if self.safe else tf.math.log(x)


def log_model(safe: bool) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", name="features"),
            LogFeatures(safe, name="log_features"),
            keras.layers.Dense(1, name="head"),
        ]
    )


def functional_log_model(safe: bool) -> keras.Model:
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu", name="features")(inputs)
    outputs = keras.layers.Dense(1, name="head")(LogFeatures(safe, name="log_features")(hidden))
    return keras.Model(inputs, outputs)


def fit(tmp_path, model, loss="mse", x=X, y=Y, epochs=2):
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.Adam(1e-3), loss)
    model.fit(
        x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"))]
    )
    return read_logdir(str(tmp_path))["run"], diagnose_logdir(str(tmp_path))["run"]


@pytest.mark.parametrize("build", [log_model, functional_log_model], ids=["sequential", "functional"])
def test_nan_from_log_of_zero_names_the_layer_the_op_and_its_fix(tmp_path, build):
    run, findings = fit(tmp_path, build(safe=False))
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin.where == "forward" and origin.layer == "log_features" and origin.op == "Log"
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert finding.severity == Severity.CRITICAL and finding.step == 1 == origin.step
    assert finding.evidence.layer == "log_features" and "starts in layer log_features (Log)" in finding.title
    assert "tf.math.log(tf.maximum(x, 1e-7))" in finding.fixes[0].code
    # later hits are counted per layer: every step of the 2 epochs has NaN gradients from step 1 on
    steps = len(run.series["grad_norm"])
    assert f"Non-finite gradients by layer: features on {steps} step(s)" in finding.detail


def test_healthy_twin_log1p_is_quiet(tmp_path):
    run, findings = fit(tmp_path, log_model(safe=True))
    assert not [e for e in run.events if e.kind in ("nan_origin", "nonfinite")]
    assert alarms(findings) == []


def test_nan_from_a_custom_loss_is_placed_in_the_loss(tmp_path):
    def log_loss(y_true, y_pred):  # log of a linear output: NaN once a prediction goes negative
        return -tf.reduce_mean(tf.math.log(y_pred))

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    run, findings = fit(tmp_path, model, loss=log_loss)
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin.where == "loss" and origin.op == "Log"
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert "starts in the loss (Log)" in finding.title and "log" in finding.fixes[0].text


@keras.saving.register_keras_serializable("tests")
class FeatureNorm(keras.layers.Layer):
    """Euclidean norm of the features: finite (0) for an all-zero row, but its gradient there is 0/0."""

    def call(self, x):
        return tf.norm(x, axis=-1, keepdims=True)


def test_nan_that_enters_through_the_gradients_is_placed_in_them_not_in_a_forward_op(tmp_path):
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, use_bias=False, name="features"),
            FeatureNorm(name="feature_norm"),
            keras.layers.Dense(1, name="head"),
        ]
    )
    x = X.copy()
    x[5] = 0.0  # an all-zero row in the first batch
    run, findings = fit(tmp_path, model, x=x)
    first = {e.where: e for e in run.events if e.kind == "nonfinite"}
    assert first["gradients"].step == 1 and first["gradients"].layers == ("features",)
    assert first["loss"].step == 2  # the update of step 1 wrote the NaN into the weights
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin == NanOriginEvent(step=2, where="weights", layers=("features",))
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert finding.step == 1 and "starts in" not in finding.title  # no forward op to blame
    assert "an earlier step's gradients brought the NaN in" in finding.detail


def test_nan_in_the_data_is_placed_in_the_batch_with_its_position(tmp_path):
    x = X.copy()
    x[3 * 32 + 7, 5] = np.inf  # batch 4 (step 4), row 7, feature 5
    run, findings = fit(
        tmp_path, keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)]), x=x
    )
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin == NanOriginEvent(step=4, where="input", count=1, position=(7, 5))
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert finding.step == 4 and "input batch holds NaN/Inf" in finding.title
    assert "np.isfinite(x_train)" in finding.fixes[0].code
    # The data is the cause: no fix that changes the model or the optimizer (issue 35, item 7).
    assert not any("learning rate" in fix.text or "logits" in fix.text for fix in finding.fixes)


def test_the_logits_fix_is_not_offered_to_a_loss_that_already_takes_logits(tmp_path):
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), LogFeatures(name="log")])
    y = (X[:, 0] > 0).astype("int32")
    _, logits = fit(tmp_path / "logits", model, keras.losses.SparseCategoricalCrossentropy(from_logits=True), y=y)
    (finding,) = [f for f in logits if f.code == "nonfinite"]
    assert finding.fixes and not any("from_logits=True" in fix.code for fix in finding.fixes)


@keras.saving.register_keras_serializable("tests")
class ZeroNonfinite(keras.layers.Layer):
    """Replaces NaN/Inf activations by 0 on the way forward: the loss stays finite while the
    kernel gradient of the layer before (input^T @ upstream) still carries the input's NaN."""

    def call(self, x):
        return tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))


def test_nan_in_the_data_under_a_finite_loss_is_placed_in_the_batch(tmp_path):
    """The batch is checked under a finite loss too (`NanReplay.hold`): the loss never goes NaN
    here, only the gradients do."""
    x = X.copy()
    x[2 * 32 + 3, 1] = np.nan  # batch 3 (step 3), row 3, feature 1
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(4, name="first"), ZeroNonfinite(), keras.layers.Dense(1, name="head")]
    )
    run, _ = fit(tmp_path, model, x=x, epochs=1)
    first = {e.where: e for e in run.events if e.kind == "nonfinite"}
    assert "loss" not in first and first["gradients"].step == 3
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin == NanOriginEvent(step=3, where="input", count=1, position=(3, 1))


def test_nan_the_model_masks_on_the_way_in_is_no_origin_and_a_later_nan_still_is(tmp_path):
    """Missing values as NaN, zeroed by the model's first layer: loss and gradients stay finite, so
    the batch's NaN is not where anything went wrong; a NaN label later is still replayed."""
    x, y = X.copy(), Y.copy()
    x[32 + 2, 4] = np.nan  # batch 2: masked
    y[4 * 32 + 9, 0] = np.nan  # batch 5: a NaN label, the loss goes NaN
    model = keras.Sequential([keras.Input((8,)), ZeroNonfinite(), keras.layers.Dense(4), keras.layers.Dense(1)])
    run, findings = fit(tmp_path, model, x=x, y=y, epochs=1)
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin == NanOriginEvent(step=5, where="labels", count=1, position=(9, 0))
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert finding.step == 5


@keras.saving.register_keras_serializable("tests")
class FillMissingFirstFeature(keras.layers.Layer):
    """Feature 0 may be missing (NaN): 0 stands in for it. Other features are passed as they are."""

    def call(self, x):
        first = tf.where(tf.math.is_finite(x[:, :1]), x[:, :1], tf.zeros_like(x[:, :1]))
        return tf.concat([first, x[:, 1:]], axis=1)


def test_a_masked_nan_does_not_use_up_the_batch_check_and_a_real_one_is_one_origin(tmp_path):
    """Step 2: a missing feature the model fills in (nothing to report). Step 4: a NaN in another
    feature, zeroed after the first layer: the loss stays finite, the first layer's gradients
    do not; from step 5 on its weights and the loss are NaN: one origin, the batch at step 4."""
    x = X.copy()
    x[32 + 6, 0] = np.nan  # batch 2: filled in
    x[3 * 32 + 11, 3] = np.nan  # batch 4: reaches the first layer's gradients
    model = keras.Sequential(
        [
            keras.Input((8,)),
            FillMissingFirstFeature(),
            keras.layers.Dense(4, kernel_regularizer="l2", name="first"),  # NaN weights: a NaN loss from step 5
            ZeroNonfinite(),
            keras.layers.Dense(1, name="head"),
        ]
    )
    run, findings = fit(tmp_path, model, x=x, epochs=1)
    first = {e.where: e.step for e in run.events if e.kind == "nonfinite"}
    assert (first["gradients"], first["loss"]) == (4, 5)
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin == NanOriginEvent(step=4, where="input", count=1, position=(11, 3))
    (finding,) = [f for f in findings if f.code == "nonfinite"]
    assert finding.step == 4 and "input batch holds NaN/Inf" in finding.title


def test_no_replay_inside_xla_but_the_nan_is_still_found(tmp_path):
    model = log_model(safe=False)
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=True)
    model.fit(X, Y, epochs=1, verbose=0, callbacks=[HealthCallback(str(tmp_path / "xla"))])
    run = read_logdir(str(tmp_path))["xla"]
    assert not [e for e in run.events if e.kind == "nan_origin"]  # no host callback inside XLA
    assert [e for e in run.events if e.kind == "nonfinite"]  # the NaN itself is still found


def test_replay_leaves_batchnorm_statistics_and_dropout_seeds_as_they_were():
    from tb_trainhealth.callback.nan.nan_origin import localize

    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.BatchNormalization(),
            keras.layers.Dropout(0.3),
            LogFeatures(name="log_features"),  # log of normalised (half negative) values: NaN
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    before = [v.numpy().copy() for v in model.non_trainable_variables]
    batch = (tf.constant(X[:32] * 5.0 + 3.0), tf.constant(Y[:32]))  # moves the batch statistics
    origin = localize(model, batch)
    assert origin["where"] == "forward" and origin["layer"] == "log_features"  # replayed in full
    for old, variable in zip(before, model.non_trainable_variables):
        np.testing.assert_array_equal(variable.numpy(), old)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_replaying_a_recurrent_layer_leaves_no_tensorflow_error_block():
    """check_numerics stops Keras' eager RNN loop at the step that overflows; the TensorArray that
    step wrote is never read, and TensorFlow logged "ERROR:tensorflow: Object was never used (type
    <class '...TensorArray'>)" when it was collected (the demo's rnn_exploding_to_nan, issue 55)."""
    from tb_trainhealth.callback.nan.nan_origin import localize

    model = keras.Sequential(
        [
            keras.Input((20, 4)),
            keras.layers.SimpleRNN(8, activation="linear", recurrent_initializer=keras.initializers.Orthogonal(1e6)),
            keras.layers.Dense(1),
        ]
    )
    batch = (tf.ones((4, 20, 4)), tf.zeros((4, 1)))  # overflows to inf after a few of the 20 steps
    records, tf_logger = _Records(), logging.getLogger("tensorflow")
    tf_logger.addHandler(records)
    try:
        origin = localize(model, batch)
        gc.collect()
    finally:
        tf_logger.removeHandler(records)
    assert origin["where"] == "forward" and origin["layer"] == model.layers[0].name
    assert [m for m in records.messages if "never used" in m] == []
