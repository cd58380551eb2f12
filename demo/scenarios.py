"""Small, real training runs: healthy ones and one per training problem.

Shared by the demo (`demo/make_demo_logs.py`), the tests and the rule zoo
(`bench/rule_zoo.py`). Synthetic data only, nothing downloaded; each run takes
seconds on 2 CPU cores. Every function trains into `log_dir` with HealthCallback
and returns the History. `expected` lists the finding codes a run must get.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth import HealthCallback


def _classes(n: int, features: int, classes: int, seed: int, noise: float = 0.5):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.0, size=(classes, features))
    y = rng.integers(0, classes, size=n)
    x = centers[y] + rng.normal(scale=noise * 2.0, size=(n, features))
    return x.astype("float32"), y.astype("int32")


def _images(n: int, seed: int, size: int = 16, classes: int = 3):
    """Images whose class is which quadrant holds a bright blob."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    x = rng.normal(scale=0.3, size=(n, size, size, 1))
    half = size // 2
    for i, label in enumerate(y):
        r, c = divmod(int(label), 2)
        x[i, r * half : (r + 1) * half, c * half : (c + 1) * half, 0] += 1.0
    return x.astype("float32"), y.astype("int32")


def _regression(n: int, features: int, seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features))
    w = rng.normal(size=(features,))
    y = np.sin(x @ w / np.linalg.norm(w)) + 0.1 * rng.normal(size=n)  # smooth enough to learn
    return x.astype("float32"), (scale * y).astype("float32")


def _mlp(inputs: int, outputs: int, hidden=(32, 32), activation="relu", output_activation=None, **dense_kwargs):
    layers = [keras.Input((inputs,))]
    layers += [keras.layers.Dense(h, activation=activation, **dense_kwargs) for h in hidden]
    layers.append(keras.layers.Dense(outputs, activation=output_activation))
    return keras.Sequential(layers)


def _fit(model, x, y, log_dir, *, epochs, batch_size=32, validation_split=0.2, shuffle=True, extra_callbacks=(), **kw):
    callbacks = [HealthCallback(log_dir=log_dir, verbose=False), *extra_callbacks]
    return model.fit(
        x,
        y,
        epochs=epochs,
        batch_size=batch_size,
        validation_split=validation_split,
        shuffle=shuffle and not isinstance(x, tf.data.Dataset),  # a dataset shuffles itself (Keras warns)
        callbacks=callbacks,
        verbose=0,
        **kw,
    )


def _small_cnn(classes: int = 3, rescale: float | None = None):
    return keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            *([keras.layers.Rescaling(rescale)] if rescale is not None else []),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(classes),
        ]
    )


SPARSE_CE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- healthy runs ---------------------------------------------------------------------
def healthy_mlp(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=25)


def healthy_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _images(800, seed)
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=20)


def healthy_regression(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _regression(1500, 6, seed)
    model = _mlp(6, 1, hidden=(64, 64), activation="tanh")
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=25)


def healthy_sgd(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _classes(2000, 16, 6, seed, noise=0.6)
    model = _mlp(16, 6, hidden=(64,))
    model.compile(keras.optimizers.SGD(0.02, momentum=0.9), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=6)


def healthy_noisy_regression(log_dir: str, seed: int = 0):
    """Mostly irreducible noise, small batches: a noisy, nearly flat loss that is nobody's bug."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1200, 8)).astype("float32")
    w = rng.normal(size=8)
    y = (0.3 * x @ w / np.linalg.norm(w) + rng.normal(size=1200)).astype("float32")
    model = _mlp(8, 1, hidden=(16,))
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=4, batch_size=8)


def _fit_dataset(model, dataset, log_dir, *, epochs, validation=None):
    callbacks = [HealthCallback(log_dir=log_dir, verbose=False)]
    return model.fit(dataset, validation_data=validation, epochs=epochs, callbacks=callbacks, verbose=0)


def _flip(images, labels):
    return tf.image.random_flip_left_right(images), labels


def healthy_pipeline(log_dir: str, seed: int = 0):
    """A tf.data pipeline built as the tf.data guide says: cache, shuffle, parallel augment, batch, prefetch."""
    keras.utils.set_random_seed(seed)
    x, y = _images(800, seed)
    autotune = tf.data.AUTOTUNE
    train = tf.data.Dataset.from_tensor_slices((x[:640], y[:640])).cache().shuffle(640, seed=seed)
    train = train.map(_flip, num_parallel_calls=autotune).batch(32).prefetch(autotune)
    validation = tf.data.Dataset.from_tensor_slices((x[640:], y[640:])).batch(64).prefetch(autotune)
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit_dataset(model, train, log_dir, epochs=15, validation=validation)


# -- broken runs ------------------------------------------------------------------------
SLOW_DECODE_MS = 8.0


def input_bound(log_dir: str, seed: int = 0):
    """Each batch is 'decoded' in Python (8 ms), sequentially, with no prefetch: every step waits."""
    keras.utils.set_random_seed(seed)
    x, y = _images(640, seed)

    def slow_decode(images):
        time.sleep(SLOW_DECODE_MS / 1000)
        return images

    def load(images, labels):
        images = tf.py_function(slow_decode, [images], tf.float32)
        return tf.ensure_shape(images, [None, 16, 16, 1]), labels

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(640, seed=seed).batch(32).map(load)
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit_dataset(model, dataset, log_dir, epochs=3)


def bad_pipeline(log_dir: str, seed: int = 0):
    """Class-sorted images, augmented then cached (augmentation frozen), batched then shuffled
    (every batch holds one class)."""
    keras.utils.set_random_seed(seed)
    x, y = _images(640, seed)
    order = np.argsort(y, kind="stable")
    dataset = tf.data.Dataset.from_tensor_slices((x[order], y[order]))
    dataset = dataset.map(_flip, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.batch(32).shuffle(20, seed=seed).prefetch(tf.data.AUTOTUNE)
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit_dataset(model, dataset, log_dir, epochs=4)


NAN_BATCH = 37  # the batch (0-based, no shuffling) whose input holds a NaN


def nan_input(log_dir: str, seed: int = 0):
    """A NaN in the training data: the loss and every gradient go NaN at that batch."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1600, 10, 4, seed)
    x[NAN_BATCH * 32 + 5, 3] = np.nan
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE)
    return _fit(model, x, y, log_dir, epochs=2, validation_split=0.0, shuffle=False)


def exploding_gradients(log_dir: str, seed: int = 0):
    """Plain SGD with a learning rate far too high: gradient norms grow by orders of magnitude."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed, noise=1.0)
    model = _mlp(10, 4, hidden=(64,))
    model.compile(keras.optimizers.SGD(2.0), SPARSE_CE)
    return _fit(model, x, y, log_dir, epochs=3, validation_split=0.0)


def vanishing_gradients(log_dir: str, seed: int = 0):
    """A deep stack of sigmoid layers: early layers get almost no gradient."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4, hidden=(32,) * 10, activation="sigmoid")
    model.compile(keras.optimizers.SGD(0.01), SPARSE_CE)
    return _fit(model, x, y, log_dir, epochs=4)


DIVERGE_STEP = 150  # the learning rate jumps 300x after this many steps


def loss_divergence(log_dir: str, seed: int = 0):
    """Training goes well until a learning-rate schedule jumps far too high."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1600, 10, 4, seed)
    model = _mlp(10, 4)
    lr = keras.optimizers.schedules.PiecewiseConstantDecay([DIVERGE_STEP], [1e-3, 0.3])
    model.compile(keras.optimizers.Adam(lr), SPARSE_CE)
    return _fit(model, x, y, log_dir, epochs=8, validation_split=0.0)


def loss_plateau(log_dir: str, seed: int = 0):
    """A learning rate so low that nothing is learned."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(1e-7), SPARSE_CE)
    return _fit(model, x, y, log_dir, epochs=6)


def loss_oscillation(log_dir: str, seed: int = 0):
    """SGD with a learning rate too high to settle; clipping keeps it from blowing up."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1200, 8))
    w = rng.normal(size=8)
    y = 2.0 * (x @ w / np.linalg.norm(w) + 0.5 * rng.normal(size=1200))
    model = _mlp(8, 1, hidden=(16,))
    model.compile(keras.optimizers.SGD(1.5, clipnorm=1.0), "mse")
    return _fit(model, x.astype("float32"), y.astype("float32"), log_dir, epochs=4, batch_size=16)


def overfitting(log_dir: str, seed: int = 0):
    """A big model on a small, noisy dataset, trained for many epochs."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(300, 20, 4, seed, noise=1.5)
    model = _mlp(20, 4, hidden=(256, 256))
    model.compile(keras.optimizers.Adam(2e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=40, batch_size=16, validation_split=0.3)


def training_crash(log_dir: str, seed: int = 0):
    """Labels with the wrong shape for the loss: the first step raises (the demo catches it)."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(400, 10, 4, seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(1e-3), "mse")  # 4 outputs, but y holds one class id per row
    try:
        return _fit(model, x, y.reshape(-1, 1).astype("float32").repeat(3, axis=1), log_dir, epochs=2)
    except ValueError:
        return None  # recorded by HealthCallback before it propagated


PAUSE_AT_BATCH = 10
PAUSE_SECONDS = 3.0


def paused_input(log_dir: str, seed: int = 0):
    """The data generator's read hangs for 3 s once (a network mount that stalls), with
    `stall_after=1`: the watchdog records the stall where it happened, then the resume."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(960, 10, 3, seed)

    def read_batches():
        for index, start in enumerate(range(0, len(x), 32)):
            if index == PAUSE_AT_BATCH:
                time.sleep(PAUSE_SECONDS)
            yield x[start : start + 32], y[start : start + 32]

    spec = (tf.TensorSpec((None, 10), tf.float32), tf.TensorSpec((None,), tf.int32))
    dataset = tf.data.Dataset.from_generator(read_batches, output_signature=spec).prefetch(2)
    model = _mlp(10, 3)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    health = HealthCallback(log_dir=log_dir, verbose=False, stall_after=1.0)
    return model.fit(dataset, epochs=1, callbacks=[health], verbose=0)


def sorted_validation_split(log_dir: str, seed: int = 0):
    """Data sorted by class and validation_split (the last rows): validation holds a class
    training never sees, so validation accuracy sits near zero."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(900, 10, 3, seed)
    order = np.argsort(y, kind="stable")
    model = _mlp(10, 3)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x[order], y[order], log_dir, epochs=5, validation_split=float(np.mean(y == 2)))


def zeroed_inputs(log_dir: str, seed: int = 0):
    """uint8 pixels 'normalised' with integer division (x // 255): every input is 0, so the
    model can only learn the class frequencies: its loss sits at their entropy."""
    keras.utils.set_random_seed(seed)
    x, y = _images(800, seed)
    pixels = np.clip(x * 100 + 100, 0, 254).astype("uint8")
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, (pixels // 255).astype("float32"), y, log_dir, epochs=4)


def dead_relu(log_dir: str, seed: int = 0):
    """ReLU layers whose biases start at -4 (a gating-layer recipe copied to hidden layers):
    their units never fire, get no gradient, and never recover."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 16, 2, seed)
    model = _mlp(16, 2, hidden=(64, 64), bias_initializer=keras.initializers.Constant(-4.0))
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=3, validation_split=0.0)


def saturated_tanh(log_dir: str, seed: int = 0):
    """tanh layers initialised far too large: most units sit at +-1, where tanh has no gradient."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 16, 2, seed)
    model = _mlp(
        16, 2, hidden=(64, 64), activation="tanh", kernel_initializer=keras.initializers.RandomNormal(stddev=8.0)
    )
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=3, validation_split=0.0)


@keras.saving.register_keras_serializable("tb_trainhealth_demo")
class LogFeatures(keras.layers.Layer):
    """log of its (ReLU) inputs: -inf as soon as a unit is off. log1p would be the fix."""

    def call(self, x):
        return tf.math.log(x)


def nan_in_layer(log_dir: str, seed: int = 0):
    """A custom layer takes log of ReLU features: the first zero gives -inf, then NaN everywhere."""
    keras.utils.set_random_seed(seed)
    x, y = _regression(800, 8, seed)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            LogFeatures(name="log_features"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=1, validation_split=0.0)


def softmax_with_from_logits(log_dir: str, seed: int = 0):
    """The last layer applies softmax and the loss is told it gets logits. Keras reads the logits behind
    the softmax itself (bench/keras_handles_lints.py: the same losses as the logits model), so this is
    reported as info and trains like its healthy twin."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4, output_activation="softmax")
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=12)  # long enough to converge: nothing else to report


# -- twins: a broken run and the healthy run it is easily mistaken for ----------------------
def early_stopped_overfit(log_dir: str, seed: int = 0):
    """The overfitting run with the callback practitioners add for it: handled, not a warning."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(300, 20, 4, seed, noise=1.5)
    model = _mlp(20, 4, hidden=(256, 256))
    model.compile(keras.optimizers.Adam(2e-3), SPARSE_CE, metrics=["accuracy"])
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True)
    return _fit(model, x, y, log_dir, epochs=40, batch_size=16, validation_split=0.3, extra_callbacks=[stop])


def cut_short(log_dir: str, seed: int = 0):
    """Two epochs at a modest learning rate: the loss is still falling fast when training stops."""
    keras.utils.set_random_seed(seed)
    x, y = _regression(2000, 8, seed)
    model = _mlp(8, 1, hidden=(32,), activation="tanh")
    model.compile(keras.optimizers.Adam(3e-4), "mse")
    return _fit(model, x, y, log_dir, epochs=2, batch_size=16)


def converged_in_two_epochs(log_dir: str, seed: int = 0):
    """Twin of cut_short: an easy task learnt within the first epoch, stopped after two."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(2000, 8, 3, seed, noise=0.2)
    model = _mlp(8, 3, hidden=(32,))
    model.compile(keras.optimizers.Adam(1e-2), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=2, batch_size=16)


def _sequences(n: int, seed: int, steps: int = 20):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, steps, 4)).astype("float32")
    return x, x[:, :, 0].sum(axis=1, keepdims=True).astype("float32") / np.sqrt(steps)


def _rnn(recurrent_scale: float):
    initializer = keras.initializers.Orthogonal(gain=recurrent_scale)
    return keras.Sequential(
        [
            keras.Input((20, 4)),
            keras.layers.SimpleRNN(32, activation="linear", recurrent_initializer=initializer),
            keras.layers.Dense(1),
        ]
    )


def rnn_exploding_to_nan(log_dir: str, seed: int = 0):
    """A linear RNN whose recurrence grows each step: the gradients explode, then overflow to NaN."""
    keras.utils.set_random_seed(seed)
    x, y = _sequences(1024, seed)
    model = _rnn(recurrent_scale=1.2)
    model.compile(keras.optimizers.SGD(2e-4), "mse")
    return _fit(model, x, y, log_dir, epochs=3)


def rnn_clipped(log_dir: str, seed: int = 0):
    """Twin of rnn_exploding_to_nan: a stable recurrence and clipped gradients."""
    keras.utils.set_random_seed(seed)
    x, y = _sequences(1024, seed)
    model = _rnn(recurrent_scale=0.9)
    model.compile(keras.optimizers.Adam(3e-3, clipnorm=1.0), "mse")
    return _fit(model, x, y, log_dir, epochs=8)


def rare_outliers(log_dir: str, seed: int = 0):
    """Healthy: two outlier targets in 1,500 (real data has some). The batches that hold them
    spike, and the loss is back at its level the next step: no warning."""
    keras.utils.set_random_seed(seed)
    x, y = _regression(1500, 6, seed)
    y[[100, 900]] = 15.0  # targets are ~[-1, 1]
    model = _mlp(6, 1, hidden=(64, 64), activation="tanh")
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=10, batch_size=16)


def unstable_not_overfitting(log_dir: str, seed: int = 0):
    """Adam at a learning rate of 0.1 on a small MLP: the validation loss jumps because the
    weights are thrown around (loss_divergence / oscillation), not because it memorises."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4, hidden=(64, 64))
    model.compile(keras.optimizers.Adam(0.1), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=20)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    train: Callable[..., object]
    expected: tuple[str, ...]  # codes that must appear (warning or critical); () = healthy


SCENARIOS = (
    Scenario("healthy_mlp", healthy_mlp, ()),
    Scenario("healthy_cnn", healthy_cnn, ()),
    Scenario("healthy_regression", healthy_regression, ()),
    Scenario("healthy_sgd", healthy_sgd, ()),
    Scenario("healthy_noisy_regression", healthy_noisy_regression, ()),
    Scenario("healthy_pipeline", healthy_pipeline, ()),
    Scenario("nan_input", nan_input, ("nonfinite",)),
    Scenario("exploding_gradients", exploding_gradients, ("exploding_gradients",)),
    Scenario("vanishing_gradients", vanishing_gradients, ("vanishing_gradients",)),
    Scenario("loss_divergence", loss_divergence, ("loss_divergence",)),
    Scenario("loss_plateau", loss_plateau, ("loss_plateau",)),
    Scenario("loss_oscillation", loss_oscillation, ("loss_oscillation",)),
    Scenario("overfitting", overfitting, ("overfitting",)),
    Scenario("training_crash", training_crash, ("training_crash",)),
    Scenario("paused_input", paused_input, ("training_stalled",)),
    Scenario("input_bound", input_bound, ("input_bound", "input_pipeline_config")),
    Scenario("bad_pipeline", bad_pipeline, ("input_pipeline_config",)),
    Scenario("sorted_validation_split", sorted_validation_split, ("label_problem",)),
    Scenario("zeroed_inputs", zeroed_inputs, ("loss_plateau",)),
    Scenario("dead_relu", dead_relu, ("dead_relu",)),
    Scenario("saturated_tanh", saturated_tanh, ("saturated_activation",)),
    Scenario("nan_in_layer", nan_in_layer, ("nonfinite",)),
    Scenario("softmax_with_from_logits", softmax_with_from_logits, ()),  # info: Keras handles it
    Scenario("early_stopped_overfit", early_stopped_overfit, ()),
    Scenario("cut_short", cut_short, ()),  # info: stopped while still improving, within its budget
    Scenario("converged_in_two_epochs", converged_in_two_epochs, ()),
    Scenario("rnn_exploding_to_nan", rnn_exploding_to_nan, ("nonfinite",)),
    Scenario("rnn_clipped", rnn_clipped, ()),
    Scenario("rare_outliers", rare_outliers, ()),
    Scenario("unstable_not_overfitting", unstable_not_overfitting, ("loss_divergence",)),
)


# -- runs that train without an error and learn the wrong thing ------------------
# Each broken run has a healthy twin on the same model kind; every class on an MLP and a CNN.
def _imbalanced(n: int, features: int, seed: int, minority: float = 0.06, shift: float = 0.35):
    """Two classes, the second rare and only weakly different (fraud-like): the best guess is 'class 0'."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < minority).astype("int32")
    x = rng.normal(size=(n, features)) + shift * y[:, None]
    return x.astype("float32"), y


def _imbalanced_images(n: int, seed: int, minority: float = 0.08, blob: float = 0.12):
    """16x16 images; the rare class has a faint bright quadrant."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < minority).astype("int32")
    x = rng.normal(scale=0.3, size=(n, 16, 16, 1))
    x[y == 1, :8, :8, 0] += blob
    return x.astype("float32"), y


def majority_class_mlp(log_dir: str, seed: int = 0):
    """94% of one class and a weak signal: the MLP answers 'class 0' for every sample."""
    keras.utils.set_random_seed(seed)
    x, y = _imbalanced(2000, 8, seed)
    model = _mlp(8, 2)
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=8)


def majority_class_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _imbalanced_images(1000, seed)
    model = _small_cnn(classes=2)
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=6)


def _balancing_weights(y):
    counts = np.bincount(y)
    return {i: len(y) / (len(counts) * c) for i, c in enumerate(counts)}


def class_weighted_mlp(log_dir: str, seed: int = 0):
    """Twin of majority_class_mlp: the same imbalance trained with class_weight."""
    keras.utils.set_random_seed(seed)
    x, y = _imbalanced(2000, 8, seed, shift=1.0)
    model = _mlp(8, 2)
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=8, class_weight=_balancing_weights(y))


def class_weighted_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _imbalanced_images(1000, seed, blob=0.6)
    model = _small_cnn(classes=2)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=6, class_weight=_balancing_weights(y))


def symmetric_init_mlp(log_dir: str, seed: int = 0):
    """Every kernel starts at 0.05 (a 'small constant' initialiser): each layer's units stay identical."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4, hidden=(32, 32), kernel_initializer=keras.initializers.Constant(0.05))
    model.layers[-1].kernel.assign(tf.fill(model.layers[-1].kernel.shape, 0.05))
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=5)


def symmetric_init_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _images(800, seed)
    ones = keras.initializers.Constant(0.1)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            keras.layers.Conv2D(8, 3, activation="relu", kernel_initializer=ones),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 3, activation="relu", kernel_initializer=ones),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3, kernel_initializer=ones),
        ]
    )
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=4)


def he_init_mlp(log_dir: str, seed: int = 0):
    """Twin of symmetric_init_mlp: He initialisation."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4, hidden=(32, 32), kernel_initializer="he_normal")
    model.compile(keras.optimizers.Adam(1e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=5)


def _deep_relu_mlp(initializer, depth: int = 6, width: int = 64):
    return _mlp(10, 4, hidden=(width,) * depth, kernel_initializer=initializer)


def _deep_cnn(initializer):
    conv = [
        keras.layers.Conv2D(16, 3, padding="same", activation="relu", kernel_initializer=initializer) for _ in range(4)
    ]
    return keras.Sequential(
        [keras.Input((16, 16, 1)), *conv, keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)]
    )


def init_nan_mlp(log_dir: str, seed: int = 0):
    """A deep ReLU MLP with weights drawn at unit scale (RandomNormal(stddev=1)): the output starts
    ~1e4x too large and the first SGD steps overflow to NaN, at a learning rate that is fine."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _deep_relu_mlp(keras.initializers.RandomNormal(stddev=1.0))
    model.compile(keras.optimizers.SGD(0.01, momentum=0.9), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=2)


def init_nan_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _images(640, seed)
    model = _deep_cnn(keras.initializers.RandomNormal(stddev=1.0))
    model.compile(keras.optimizers.SGD(0.005, momentum=0.9), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=2)


def he_deep_mlp(log_dir: str, seed: int = 0):
    """Twin of init_nan_mlp: the same net, optimizer and learning rate, He initialisation."""
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _deep_relu_mlp("he_normal")
    model.compile(keras.optimizers.SGD(0.01, momentum=0.9), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=6)


def he_deep_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _images(640, seed)
    model = _deep_cnn("he_normal")
    model.compile(keras.optimizers.SGD(0.005, momentum=0.9), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=12)


def _price_targets(seed: int):
    x, y = _regression(1500, 6, seed)
    return x, (1200.0 + 400.0 * y).astype("float32")  # prices in the hundreds to thousands


def _brightness_targets(seed: int):
    x, _ = _images(800, seed)
    return x, (500.0 + 300.0 * x[:, :8, :8, 0].mean(axis=(1, 2))).astype("float32")


def _regression_cnn():
    return keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(1),
        ]
    )


def unscaled_targets_mlp(log_dir: str, seed: int = 0):
    """Regression targets around 1200 (never standardised): MSE ~1e6 at the end."""
    keras.utils.set_random_seed(seed)
    x, y = _price_targets(seed)
    model = _mlp(6, 1, hidden=(64, 64), activation="tanh")
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=8)


def unscaled_targets_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _brightness_targets(seed)
    model = _regression_cnn()
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, y, log_dir, epochs=6)


def standardized_targets_mlp(log_dir: str, seed: int = 0):
    """Twin of unscaled_targets_mlp: the same targets standardised."""
    keras.utils.set_random_seed(seed)
    x, y = _price_targets(seed)
    model = _mlp(6, 1, hidden=(64, 64), activation="tanh")
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return _fit(model, x, (y - y.mean()) / y.std(), log_dir, epochs=8)


def standardized_targets_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _brightness_targets(seed)
    model = _regression_cnn()
    model.compile(keras.optimizers.Adam(3e-3), "mse")
    return _fit(model, x, (y - y.mean()) / y.std(), log_dir, epochs=6)


def _unit_features(seed: int):
    x, y = _classes(1200, 10, 4, seed)
    return (x - x.min(axis=0)) / (x.max(axis=0) - x.min(axis=0)), y  # min-max scaled to [0, 1]


def tiny_inputs_mlp(log_dir: str, seed: int = 0):
    """Features already in [0, 1] divided by 255 again: the inputs are ~1e-3."""
    keras.utils.set_random_seed(seed)
    x, y = _unit_features(seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x / 255.0, y, log_dir, epochs=12)


def _pixels(seed: int):
    x, y = _images(800, seed)
    return np.clip(x * 100 + 100, 0, 255).astype("uint8"), y


def tiny_inputs_cnn(log_dir: str, seed: int = 0):
    """Pixels divided by 255 in the loader and again by a Rescaling(1/255) layer."""
    keras.utils.set_random_seed(seed)
    pixels, y = _pixels(seed)
    model = _small_cnn(rescale=1 / 255)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, pixels.astype("float32") / 255.0, y, log_dir, epochs=12)


def scaled_once_mlp(log_dir: str, seed: int = 0):
    """Twin of tiny_inputs_mlp: min-max scaled once."""
    keras.utils.set_random_seed(seed)
    x, y = _unit_features(seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=12)


def scaled_once_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    pixels, y = _pixels(seed)
    model = _small_cnn(rescale=1 / 255)
    model.compile(keras.optimizers.Adam(3e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, pixels.astype("float32"), y, log_dir, epochs=12)


def _separately_shuffled(x, y, seed: int):
    rng = np.random.default_rng(seed + 100)
    return x[rng.permutation(len(x))], y[rng.permutation(len(y))]


def shuffled_labels_mlp(log_dir: str, seed: int = 0):
    """x and y shuffled with two different permutations: training accuracy creeps up by
    memorising, validation accuracy stays at chance."""
    keras.utils.set_random_seed(seed)
    x, y = _separately_shuffled(*_classes(800, 20, 4, seed), seed)
    model = _mlp(20, 4, hidden=(256, 256))
    model.compile(keras.optimizers.Adam(2e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=15, batch_size=16)


def shuffled_labels_cnn(log_dir: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    x, y = _separately_shuffled(*_images(800, seed), seed)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(3),
        ]
    )
    model.compile(keras.optimizers.Adam(2e-3), SPARSE_CE, metrics=["accuracy"])
    return _fit(model, x, y, log_dir, epochs=12, batch_size=16)


WRONG_CAUSE_SCENARIOS = (
    Scenario("majority_class_mlp", majority_class_mlp, ("majority_class",)),
    Scenario("majority_class_cnn", majority_class_cnn, ("majority_class",)),
    Scenario("class_weighted_mlp", class_weighted_mlp, ()),
    Scenario("class_weighted_cnn", class_weighted_cnn, ()),
    Scenario("symmetric_init_mlp", symmetric_init_mlp, ("bad_initialization",)),
    Scenario("symmetric_init_cnn", symmetric_init_cnn, ("bad_initialization",)),
    Scenario("he_init_mlp", he_init_mlp, ()),
    Scenario("init_nan_mlp", init_nan_mlp, ("bad_initialization",)),
    Scenario("init_nan_cnn", init_nan_cnn, ("bad_initialization",)),
    Scenario("he_deep_mlp", he_deep_mlp, ()),
    Scenario("he_deep_cnn", he_deep_cnn, ()),
    Scenario("unscaled_targets_mlp", unscaled_targets_mlp, ("unnormalized_target",)),
    Scenario("unscaled_targets_cnn", unscaled_targets_cnn, ("unnormalized_target",)),
    Scenario("standardized_targets_mlp", standardized_targets_mlp, ()),
    Scenario("standardized_targets_cnn", standardized_targets_cnn, ()),
    Scenario("tiny_inputs_mlp", tiny_inputs_mlp, ("unnormalized_input",)),
    Scenario("tiny_inputs_cnn", tiny_inputs_cnn, ("unnormalized_input",)),
    Scenario("scaled_once_mlp", scaled_once_mlp, ()),
    Scenario("scaled_once_cnn", scaled_once_cnn, ()),
    Scenario("shuffled_labels_mlp", shuffled_labels_mlp, ("label_problem",)),
    Scenario("shuffled_labels_cnn", shuffled_labels_cnn, ("label_problem",)),
)


def _batch_softmax_loss(y_true, logits):
    """Hand-written cross-entropy with the softmax over axis 0: the batch, not the classes."""
    log_p = tf.nn.log_softmax(logits, axis=0)
    return -tf.reduce_mean(tf.gather(log_p, tf.cast(tf.reshape(y_true, [-1]), tf.int32), axis=1, batch_dims=1))


def _summed_loss(y_true, logits):
    """Hand-written cross-entropy summed over the batch instead of averaged."""
    return tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True))


def _mean_loss(y_true, logits):
    """Hand-written cross-entropy done right: softmax over the classes, mean over the batch."""
    log_p = tf.nn.log_softmax(logits, axis=-1)
    return -tf.reduce_mean(tf.gather(log_p, tf.cast(tf.reshape(y_true, [-1]), tf.int32), axis=1, batch_dims=1))


def _custom_loss_mlp(loss, log_dir: str, seed: int):
    keras.utils.set_random_seed(seed)
    x, y = _classes(1200, 10, 4, seed)
    model = _mlp(10, 4)
    model.compile(keras.optimizers.Adam(1e-3), loss, metrics=["sparse_categorical_accuracy"])
    return _fit(model, x, y, log_dir, epochs=12)


def _custom_loss_cnn(loss, log_dir: str, seed: int):
    keras.utils.set_random_seed(seed)
    x, y = _images(800, seed)
    model = _small_cnn()
    model.compile(keras.optimizers.Adam(3e-3), loss, metrics=["sparse_categorical_accuracy"])
    return _fit(model, x, y, log_dir, epochs=12)


def loss_wrong_axis_mlp(log_dir: str, seed: int = 0):
    return _custom_loss_mlp(_batch_softmax_loss, log_dir, seed)


def loss_wrong_axis_cnn(log_dir: str, seed: int = 0):
    return _custom_loss_cnn(_batch_softmax_loss, log_dir, seed)


def loss_summed_mlp(log_dir: str, seed: int = 0):
    return _custom_loss_mlp(_summed_loss, log_dir, seed)


def loss_summed_cnn(log_dir: str, seed: int = 0):
    return _custom_loss_cnn(_summed_loss, log_dir, seed)


def custom_loss_mlp(log_dir: str, seed: int = 0):
    """Twin of loss_wrong_axis_mlp and loss_summed_mlp: the hand-written loss done right."""
    return _custom_loss_mlp(_mean_loss, log_dir, seed)


def custom_loss_cnn(log_dir: str, seed: int = 0):
    return _custom_loss_cnn(_mean_loss, log_dir, seed)


WRONG_CAUSE_SCENARIOS += (
    Scenario("loss_wrong_axis_mlp", loss_wrong_axis_mlp, ("loss_metric_mismatch",)),
    Scenario("loss_wrong_axis_cnn", loss_wrong_axis_cnn, ("loss_metric_mismatch",)),
    Scenario("loss_summed_mlp", loss_summed_mlp, ("loss_metric_mismatch",)),
    Scenario("loss_summed_cnn", loss_summed_cnn, ("loss_metric_mismatch",)),
    Scenario("custom_loss_mlp", custom_loss_mlp, ()),
    Scenario("custom_loss_cnn", custom_loss_cnn, ()),
)
