"""The callback must never break training: the input-wait probe, the first-batch lint, the NaN
trigger and the activation probe on the shapes of real user code (dict inputs, subclassed and
nested models, sample weights, infinite datasets, validation data)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import read_logdir

from tb_trainhealth import HealthCallback

rng = np.random.default_rng(0)
X = rng.normal(size=(256, 8)).astype("float32")
Y = rng.integers(0, 3, 256).astype("int32")
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def dict_inputs_model() -> keras.Model:
    a, b = keras.Input((4,), name="a"), keras.Input((4,), name="b")
    hidden = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()([a, b]))
    return keras.Model({"a": a, "b": b}, keras.layers.Dense(3)(hidden))


def nested_model() -> keras.Model:
    base = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu")], name="base")
    return keras.Sequential([keras.Input((8,)), base, keras.layers.Dense(3)])


def mlp() -> keras.Model:
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])


CASES = {
    "subclassed model": (Subclassed, lambda: {"x": X, "y": Y}),
    "dict inputs": (dict_inputs_model, lambda: {"x": {"a": X[:, :4], "b": X[:, 4:]}, "y": Y}),
    "nested model": (nested_model, lambda: {"x": X, "y": Y}),
    "sample weights": (mlp, lambda: {"x": X, "y": Y, "sample_weight": rng.uniform(size=256).astype("float32")}),
    "infinite dataset with steps_per_epoch": (
        mlp,
        lambda: {"x": tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(32), "steps_per_epoch": 5},
    ),
    "validation data and class weights": (
        mlp,
        lambda: {"x": X, "y": Y, "validation_data": (X[:64], Y[:64]), "class_weight": {0: 1.0, 1: 2.0, 2: 1.0}},
    ),
    "ragged last batch": (mlp, lambda: {"x": X[:250], "y": Y[:250], "batch_size": 32}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_training_is_unchanged_and_recorded(tmp_path, case):
    build, fit_kwargs = CASES[case]
    kwargs = fit_kwargs()
    histories = []
    for callbacks in ([], [HealthCallback(str(tmp_path / "run"))]):
        keras.utils.set_random_seed(0)
        model = build()
        model.compile(keras.optimizers.Adam(1e-3), LOSS)
        histories.append(model.fit(epochs=2, verbose=0, shuffle=False, callbacks=callbacks, **kwargs).history)
    plain, probed = histories
    # The same training: the callback changes nothing the model computes.
    np.testing.assert_allclose(probed["loss"], plain["loss"], rtol=1e-5)
    run = read_logdir(str(tmp_path))["run"]
    assert len(run.series["input_wait_ms"]) == len(run.series["loss"]) > 0
    assert not [e for e in run.events if e.kind in ("crash", "nonfinite")]


def test_many_fits_in_one_process_print_no_warnings_of_ours(tmp_path, caplog, recwarn):
    """A sweep in a notebook: each fit has its own callback; none may add TensorFlow's
    'retracing' warning or Keras' input-structure warning to the user's console."""
    for index in range(7):
        model = mlp()
        model.compile("adam", LOSS)
        model.fit(X, Y, epochs=2, verbose=0, callbacks=[HealthCallback(str(tmp_path / f"run{index}"), verbose=False)])
    assert "retracing" not in caplog.text
    assert not [str(w.message) for w in recwarn if "structure of `inputs`" in str(w.message)]


@pytest.mark.parametrize(
    ("failing", "from_call"),
    [("_write_rows_now", 2), ("_write_scalars_now", 2), ("_write_json_now", 2), ("_write_scalars_now", 4)],
    ids=["rows", "epoch scalars", "records", "the last epoch's scalars"],
)
def test_a_disk_that_fills_up_mid_run_never_breaks_fit(tmp_path, monkeypatch, capsys, failing, from_call):
    """Writes run on a background thread: their errors surface later, on the training thread
    (the last one only when fit ends), where recording is switched off with one line; fit
    itself finishes as without the callback."""
    from tb_trainhealth.callback.record import health_writer, read_back

    monkeypatch.setattr(read_back, "READ_SECONDS", 0.0)  # rows written at every step: many writes
    written = {"calls": 0}
    original = getattr(health_writer.HealthWriter, failing)

    def fails_after_first(self, *args):
        written["calls"] += 1
        if written["calls"] >= from_call:
            raise OSError(28, "No space left on device")
        return original(self, *args)

    monkeypatch.setattr(health_writer.HealthWriter, failing, fails_after_first)
    keras.utils.set_random_seed(0)
    model = mlp()
    model.compile("adam", LOSS)
    history = model.fit(
        X, Y, batch_size=16, epochs=4, verbose=0, callbacks=[HealthCallback(str(tmp_path), verbose=False)]
    )
    assert len(history.history["loss"]) == 4 and np.isfinite(history.history["loss"]).all()
    assert written["calls"] >= from_call
    assert "No space left on device" in capsys.readouterr().err
