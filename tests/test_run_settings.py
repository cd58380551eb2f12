"""The run settings HealthCallback records once per fit (`callback/run_settings.py`), on real
tiny training, read back from the event file: the values the fit used, fingerprints that
ignore the order of the samples but not which label goes with which input, tf_keras too, and
a model that refuses its config still trains and records the rest."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import read_logdir, run_python

from tb_trainhealth import HealthCallback
from tb_trainhealth.callback import data_settings
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.run_settings import RunSettings
from tb_trainhealth.contract.vocab import LossKind

SAMPLES, FEATURES, CLASSES, BATCH = 96, 6, 3, 16
SAME = 1e-9  # fingerprints of the same data: equal to this relative tolerance


def read_settings(log_dir: str) -> RunSettings:
    """The run's last settings record, straight from its event files (the run directory only),
    checked against what the project's reader makes of the run."""
    found: list[tuple[int, float, RunSettings]] = []
    for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tags.TAG_RUN_SETTINGS:
                    raw = json.loads(tf.make_ndarray(value.tensor).item().decode("utf-8"))
                    assert RunSettings.parse(raw).to_json() == raw, "every recorded value passes the contract"
                    found.append((event.step, event.wall_time, RunSettings.parse(raw)))
    assert found, f"no {tags.TAG_RUN_SETTINGS} record in {log_dir}"
    latest = max(found, key=lambda record: record[:2])[2]
    (run,) = read_logdir(log_dir).values()  # the read side (`RunSignals.settings`) reads the same
    assert run.settings == latest
    return latest


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32") + (x[:, 1] > 1).astype("int32")


def classifier(optimizer: keras.optimizers.Optimizer | None = None) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(
                16,
                activation="relu",
                kernel_initializer=keras.initializers.RandomNormal(stddev=0.5),
                kernel_regularizer=keras.regularizers.L2(0.01),
                name="hidden",
            ),
            keras.layers.Dropout(0.25, name="drop"),
            keras.layers.Dense(CLASSES, activation="softmax", name="out"),
        ]
    )
    model.compile(
        optimizer or keras.optimizers.SGD(0.05, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
    )
    return model


def fit_and_read(tmp_path, name: str, x, y, model: keras.Model | None = None, **fit) -> RunSettings:
    log_dir = str(tmp_path / name)
    model = model if model is not None else classifier()
    fit = {"batch_size": BATCH, "epochs": 1, "verbose": 0, **fit}
    model.fit(x, y, callbacks=[*fit.pop("callbacks", []), HealthCallback(log_dir, verbose=False)], **fit)
    return read_settings(log_dir)


def test_a_fit_records_the_settings_it_used(tmp_path):
    x, y = data()
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=7, min_delta=0.001)
    found = fit_and_read(tmp_path, "run", x, y, epochs=2, validation_split=0.25, callbacks=[stop])
    settings = found.settings
    expected = {
        "optimizer": "SGD",
        "learning_rate": 0.05,
        "momentum": 0.9,
        "nesterov": False,
        "batch_size": BATCH,
        "epochs": 2,
        "steps_per_epoch": 72 // BATCH + 1,
        "initial_epoch": 0,
        "loss": "sparse_categorical_crossentropy",
        "loss.from_logits": False,
        "metrics": "accuracy",
        "callbacks": "EarlyStopping",
        "EarlyStopping.patience": 7,
        "EarlyStopping.monitor": "loss",
        "EarlyStopping.min_delta": 0.001,
        "hidden.units": 16,
        "hidden.activation": "relu",
        "hidden.kernel_initializer": "RandomNormal(stddev=0.5)",
        "hidden.bias_initializer": "Zeros",
        "hidden.kernel_regularizer": "L2(l2=0.01)",
        "drop.rate": 0.25,
        "out.activation": "softmax",
        "train_samples": 72,  # what validation_split left for training
        "validation_samples": 24,
        "input_shape": f"({FEATURES},)",
        "input_dtype": "float32",
        "dtype_policy": "float32",
        "device": "CPU" if not tf.config.list_logical_devices("GPU") else "GPU",
        "keras_version": keras.__version__,
    }
    assert {key: settings.get(key) for key in expected} == expected
    assert found.layers == (("hidden", "Dense"), ("drop", "Dropout"), ("out", "Dense"))
    shares = np.bincount(y[:72], minlength=CLASSES) / 72
    np.testing.assert_allclose(settings["label_distribution"], shares, atol=1e-4)
    np.testing.assert_allclose(
        [settings["input_mean"], settings["input_std"]], [x[:72].mean(), x[:72].std()], rtol=1e-6
    )
    assert "learning_rate_schedule" not in settings and "HealthCallback" not in settings["callbacks"]


def test_a_schedule_records_its_class_and_first_value(tmp_path):
    x, y = data()
    schedule = keras.optimizers.schedules.ExponentialDecay(0.02, decay_steps=3, decay_rate=0.5)
    found = fit_and_read(tmp_path, "run", x, y, model=classifier(keras.optimizers.Adam(schedule, beta_1=0.8)))
    settings = found.settings
    assert settings["optimizer"] == "Adam" and settings["learning_rate"] == pytest.approx(0.02, rel=1e-6)
    assert settings["learning_rate_schedule"] == "ExponentialDecay" and settings["beta_1"] == 0.8
    assert settings["learning_rate_schedule.decay_steps"] == 3


def test_fingerprints_ignore_the_order_but_not_which_label_goes_where(tmp_path):
    x, y = data()
    order = np.random.default_rng(1).permutation(SAMPLES)
    first = fit_and_read(tmp_path, "first", x, y).settings
    shuffled = fit_and_read(tmp_path, "shuffled", x[order], y[order]).settings
    relabelled = fit_and_read(tmp_path, "relabelled", x, y[order]).settings
    rescaled = fit_and_read(tmp_path, "rescaled", x * 1.01, y).settings
    for key in ("train_inputs", "train_labels"):
        assert isinstance(first[key], float)
        assert shuffled[key] == pytest.approx(first[key], rel=SAME), key
    assert relabelled["train_inputs"] == pytest.approx(first["train_inputs"], rel=SAME)
    assert relabelled["train_labels"] != pytest.approx(first["train_labels"], rel=1e-6)
    assert relabelled["label_distribution"] == first["label_distribution"]  # (the same labels, elsewhere)
    assert rescaled["train_inputs"] != pytest.approx(first["train_inputs"], rel=1e-6)


def test_a_dataset_fit_records_no_guessed_data_settings(tmp_path):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)
    settings = fit_and_read(tmp_path, "run", dataset, None, batch_size=None, shuffle=False).settings
    assert settings["train_samples"] == SAMPLES and settings["batch_size"] == BATCH
    assert settings["input_shape"] == f"({FEATURES},)" and settings["input_dtype"] == "float32"
    assert not {"train_inputs", "train_labels", "input_mean", "label_distribution"} & set(settings)


def test_fingerprints_stay_order_free_when_only_some_features_are_read(monkeypatch):
    x, y = data()
    monkeypatch.setattr(data_settings, "MAX_FINGERPRINT_VALUES", SAMPLES * 2)  # every 3rd feature
    monkeypatch.setattr(data_settings, "CHUNK_BYTES", 64)  # many chunks
    assert data_settings.feature_stride(SAMPLES, FEATURES) == 3
    order = np.random.default_rng(2).permutation(SAMPLES)
    first = data_settings.array_statistics([x], [y])
    shuffled = data_settings.array_statistics([x[order]], [y[order]])
    assert shuffled["train_inputs"] == pytest.approx(first["train_inputs"], rel=SAME)
    assert shuffled["train_labels"] == pytest.approx(first["train_labels"], rel=SAME)
    changed = x.copy()
    changed[5, 3] += 1.0  # a feature the stride reads (0, 3)
    assert data_settings.array_statistics([changed], [y])["train_inputs"] != pytest.approx(first["train_inputs"])


def test_label_distributions_of_one_hot_and_regression_targets():
    one_hot = np.eye(CLASSES, dtype="float32")[[0, 0, 1, 2]]
    assert data_settings.label_distribution([one_hot], LossKind.CATEGORICAL_CROSSENTROPY) == {
        "label_distribution": [0.5, 0.25, 0.25]
    }
    targets = np.array([1.0, 3.0], "float32")
    assert data_settings.label_distribution([targets], LossKind.MEAN_SQUARED_ERROR) == {
        "label_distribution": [2.0, 1.0]
    }


class Refuses(keras.layers.Layer):
    """A custom layer that cannot describe itself (get_config raises), with Keras' attribute names."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units, self.activation = units, keras.activations.tanh

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform")

    def call(self, inputs):
        return self.activation(inputs @ self.kernel)

    def get_config(self):
        raise NotImplementedError("no config")


class RefusingModel(keras.Model):
    """A subclassed model whose configs raise, the compile config too."""

    def __init__(self):
        super().__init__()
        self.refuses = Refuses(8, name="refuses")
        self.out = keras.layers.Dense(CLASSES, name="out")

    def call(self, inputs):
        return self.out(self.refuses(inputs))

    def get_config(self):
        raise NotImplementedError("no config")

    def get_compile_config(self):
        raise RuntimeError("no compile config")


def test_a_model_that_refuses_its_config_trains_and_records_what_it_can(tmp_path, capsys):
    x, y = data()
    keras.utils.set_random_seed(0)
    model = RefusingModel()
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    log_dir = str(tmp_path / "run")
    history = model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[HealthCallback(log_dir, verbose=False)])
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert "probe disabled" not in capsys.readouterr().err
    found = read_settings(log_dir)
    assert found.layers == (("refuses", "Refuses"), ("out", "Dense"))
    settings = found.settings
    assert settings["refuses.units"] == 8 and settings["refuses.activation"] == "tanh"  # from its attributes
    assert settings["out.units"] == CLASSES and settings["optimizer"] == "SGD" and settings["epochs"] == 2
    assert "metrics" not in settings  # its section failed: left out, not guessed


TF_KERAS_FIT = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
from tb_trainhealth import HealthCallback
keras = tf.keras
rng = np.random.default_rng(0)
x = rng.normal(size=({samples}, {features})).astype("float32")
y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 1).astype("int32")
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input(({features},)),
    keras.layers.Dense(16, activation="relu", name="hidden"),
    keras.layers.Dropout(0.25, name="drop"),
    keras.layers.Dense({classes}, activation="softmax", name="out"),
])
model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
stop = keras.callbacks.EarlyStopping(monitor="loss", patience=4)
model.fit(x, y, batch_size={batch}, epochs=2, verbose=0, callbacks=[stop, HealthCallback(sys.argv[1], verbose=False)])
import tf_keras
print(tf_keras.__version__)
"""


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras not installed")
def test_a_tf_keras_fit_records_the_same_settings(tmp_path):
    script = TF_KERAS_FIT.format(samples=SAMPLES, features=FEATURES, classes=CLASSES, batch=BATCH)
    proc = run_python("-c", textwrap.dedent(script), str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "probe disabled" not in proc.stderr, proc.stderr[-3000:]
    found = read_settings(str(tmp_path / "run"))
    settings = found.settings
    expected = {
        "optimizer": "Adam",
        "learning_rate": 0.01,
        "batch_size": BATCH,
        "epochs": 2,
        "steps_per_epoch": SAMPLES // BATCH,
        "loss": "sparse_categorical_crossentropy",
        "metrics": "accuracy",
        "callbacks": "EarlyStopping",
        "EarlyStopping.patience": 4,
        "hidden.activation": "relu",
        "drop.rate": 0.25,
        "train_samples": SAMPLES,
        "keras_version": proc.stdout.strip().splitlines()[-1],
    }
    assert {key: settings.get(key) for key in expected} == expected
    assert settings["keras_version"].startswith("2.")
    assert found.layers == (("hidden", "Dense"), ("drop", "Dropout"), ("out", "Dense"))
    x, y = data()  # the same arrays: the same fingerprints as Keras 3 would record
    here = data_settings.array_statistics([x], [y])
    assert settings["train_inputs"] == pytest.approx(here["train_inputs"], rel=SAME)
    assert settings["train_labels"] == pytest.approx(here["train_labels"], rel=SAME)


def test_every_constructor_argument_of_a_layer_is_recorded(tmp_path):
    """Issue 54: arguments outside the usual few (a Reshape's target, a pooling layer's data_format,
    an LSTM's go_backwards, an Embedding's mask_zero, a Permute's dims) are recorded, so compare can
    name them; names, dtypes and seeds are not."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((12,)),
            keras.layers.Embedding(10, 4, mask_zero=True, name="embed"),
            keras.layers.LSTM(4, go_backwards=True, return_sequences=True, name="lstm"),
            keras.layers.Reshape((12, 2, 2), name="reshape"),
            keras.layers.Permute((2, 1, 3), name="permute"),
            keras.layers.MaxPooling2D(2, data_format="channels_first", name="pool"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dropout(0.1, seed=3, name="drop"),
            keras.layers.Dense(2, activation="softmax", name="out"),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    x = np.random.default_rng(0).integers(0, 10, (32, 12))
    settings = fit_and_read(tmp_path, "args", x, x[:, 0] % 2, model=model).settings
    assert settings["embed.mask_zero"] is True
    assert settings["lstm.go_backwards"] is True
    assert settings["reshape.target_shape"] == [12, 2, 2]
    assert settings["permute.dims"] == [2, 1, 3]
    assert settings["pool.data_format"] == "channels_first"
    assert not any(key.endswith((".name", ".dtype", ".seed")) for key in settings)
