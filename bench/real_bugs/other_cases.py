"""Real-bug cases from other public collections: TensorFlow-Program-Bugs, AUTOTRAINER, UMLAUT, NeuraLint, and
reconstructions from the published fault taxonomies.

Sources: ForeverZyh/TensorFlow-Program-Bugs (Zhang et al., ISSTA 2018; StackOverflow and GitHub subjects, buggy
and fixed versions), shiningrain/AUTOTRAINER (demo_case models and configs), BerkeleyHCI/umlaut (example
programs with their commented fixes), neuralint/neuralint (sample_buggy_scripts), and reconstructions from
Humbatova et al. "Taxonomy of Real Faults in Deep Learning Systems" (ICSE 2020) and Islam et al. (FSE 2019).
Raw TF1 programs are ported to Keras 3 `fit` with the fault kept (same loss math, learning rate, initialiser);
data are numpy stand-ins for MNIST / Fashion-MNIST / blobs / circles / tables, scaled down to train in seconds.
Where a report ran many epochs, the training set is tiled (`_tile`) so one Keras epoch runs several of the
report's epochs with the same number of steps.

Verified with callbacks=[] on a shared 2-core CPU (Keras 3.15, TF backend; every run 2-12 s), held-out
score buggy -> fixed (accuracy, or R^2 floored at -1):

| name | source | symptom | cause | fix | seed 0 | seed 1 |
| --- | --- | --- | --- | --- | --- | --- |
| tpb_so35078027_linear_output_manual_bce | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-7 (SO 35078027) | MLP on MNIST: the loss is NaN from the first steps | the output layer is linear but the hand-written binary cross-entropy takes log(y_) and log(1-y_) | sigmoid on the output, clipped logs, learning rate 0.05 -> 0.5 | acc 0.094 -> 0.953 | acc 0.093 -> 0.947 |
| tpb_so39939881_linreg_sgd_diverges | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-5 (SO 39939881) | simple linear regression: loss grows every step until it is inf/NaN | plain gradient descent with lr 0.1 on x in [-8, 8] is past the stability limit | AdamOptimizer(0.1) | R^2 -0.000 -> 0.998 | R^2 -0.029 -> 0.999 |
| tpb_so43636736_arange_inputs_lr | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-15 (SO 43636736) | linear regression on x = 0..99: the MSE explodes to inf then NaN | GD learning rate 0.5 on unscaled inputs up to 99 | learning rate 0.0005 (inputs stay unscaled; the fixed run learns anyway) | R^2 -1.000 -> 0.993 | R^2 -1.000 -> 0.993 |
| tpb_so43239467_relu_on_logits | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-11 (SO 43239467) | MNIST CNN: accuracy stalls well below what the tutorial reaches | the fc helper applies ReLU to the logits layer too, so logits die at 0 | no activation on the last layer | acc 0.696 -> 0.995 | acc 0.808 -> 0.999 |
| tpb_so42064941_fp16_adam_epsilon | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-10 (SO 42064941) | float16 network: the first Adam step turns the weights and the loss into NaN | Adam's epsilon 1e-8 underflows to 0 in float16; zero gradients give 0/0 | AdamOptimizer(1e-3, epsilon=1e-4) | acc 0.492 -> 1.000 | acc 0.535 -> 1.000 |
| tpb_so38447935_target_shape_broadcast | ForeverZyh/TensorFlow-Program-Bugs StackOverflow/UT-15 (SO 38447935) | fitting y = x: the error stops falling and the fit is a flat line at the mean | targets of shape (N,) against predictions (N, 1): y_ - y broadcasts to (N, N) | y_ = tf.expand_dims(y_, axis=1) | R^2 0.050 -> 0.996 | R^2 0.069 -> 0.998 |
| tpb_dltf_dbn_missing_softmax | ForeverZyh/TensorFlow-Program-Bugs Github/IPS-7 (blackecho/Deep-Learning-TensorFlow model.py) | DBN fine-tuning with cross_entropy: accuracy stays at chance | the clipped cross-entropy cost is applied to the raw linear output instead of probabilities | model_output = tf.nn.softmax(model_output) before the cost | acc 0.098 -> 0.740 | acc 0.110 -> 0.793 |
| autotrainer_gradient_vanish | shiningrain/AUTOTRAINER AutoTrainer/demo_case/Gradient_Vanish_Case (model.h5, config.pkl) | circles: accuracy stuck at 50%, loss flat at 0.693 | eight stacked 5-unit sigmoid layers: gradients vanish before reaching the first layers | selu activations (AUTOTRAINER's repair) | acc 0.463 -> 0.833 | acc 0.510 -> 0.860 |
| autotrainer_relu_output | shiningrain/AUTOTRAINER AutoTrainer/demo_case/Improper_Activation_case/demo_activation.py | blobs: loss does not decrease properly and turns NaN, accuracy at chance | Dense(3, activation='relu') output under categorical_crossentropy (all-zero outputs give 0/0) | softmax output | acc 0.307 -> 0.773 | acc 0.357 -> 0.777 |
| autotrainer_oscillating_sgd_bs1 | shiningrain/AUTOTRAINER AutoTrainer/demo_case/Oscillating_Loss_Case (model.h5, config.pkl) | blobs: training loss and accuracy oscillate from epoch to epoch | SGD lr 0.01 with momentum 0.9 and batch size 1 | Adam (AUTOTRAINER's repair) | acc 0.533 -> 0.783 | acc 0.703 -> 0.787 |
| umlaut_raw_pixels_logits_no_from_logits | BerkeleyHCI/umlaut test_train.py | Fashion-MNIST: loss high and accuracy far below a plain linear model's | pixels left at 0..255 and logits passed to sparse_categorical_crossentropy (from_logits=False) | divide by 255, SparseCategoricalCrossentropy(from_logits=True) | acc 0.170 -> 0.994 | acc 0.198 -> 0.995 |
| umlaut_negative_learning_rate | BerkeleyHCI/umlaut pilot_boilerplate_2.py | Fashion-MNIST MLP: loss jumps to ~7 in the first steps and stays there, accuracy at chance | SGD(learning_rate=-1e5) (gradient ascent, huge) and logits under a from_logits=False loss | optimizer 'adam', SparseCategoricalCrossentropy(from_logits=True) | acc 0.112 -> 0.999 | acc 0.101 -> 0.995 |
| neuralint_so45378493_softmax_one_unit | neuralint/neuralint sample_buggy_scripts/SO Samples/45378493.py (SO 45378493) | binary Conv1D classifier: accuracy frozen at the positive-class share (every prediction is 1) | Dense(1) followed by softmax: the output is always 1 (in Keras 3 the BCE reads the pre-softmax logits, so the training loss still falls while accuracy stays frozen) | sigmoid activation on the single unit | acc 0.336 -> 0.836 | acc 0.335 -> 0.837 |
| neuralint_so50555434_sigmoid_regression | neuralint/neuralint sample_buggy_scripts/SO Samples/50555434.py (SO 50555434) | regressing date components: MAE stuck at its first value, predictions capped below 1 | sigmoid output layer for raw targets in the tens | linear output layer | R^2 -1.000 -> 0.963 | R^2 -1.000 -> 0.972 |
| neuralint_comp_dnnfw_bce_multiclass | neuralint/neuralint sample_buggy_scripts/GitHub Samples/6.py (yumatsuoka/comp_DNNfw 30e0973) | 10-class MNIST CNN learns slowly: accuracy ~0.55 after 3 epochs (Keras 2's 'acc' showed a misleading ~90% binary accuracy) | binary_crossentropy (from_logits=False) on linear 10-way outputs of a single-label problem | categorical cross-entropy on the logits | acc 0.603 -> 0.970 | acc 0.526 -> 0.978 |
| taxonomy_multihot_sigmoid_cce | reconstruction: Humbatova et al. 2020 'Wrong loss function' / Islam et al. 2019 'loss function' | multi-label tagger: loss rises after the first epochs and every tag is predicted for every sample | sigmoid outputs with multi-hot labels trained on categorical_crossentropy | binary_crossentropy | acc 0.395 -> 0.904 | acc 0.390 -> 0.907 |
| taxonomy_raw_pixels_cnn_high_lr | reconstruction: Humbatova et al. 2020 'Missing preprocessing' + 'Suboptimal learning rate' | CNN loss turns NaN in the first epoch | 0..255 pixels with SGD lr 0.01 and momentum 0.9 | rescale pixels to [0, 1] | acc 0.120 -> 0.998 | acc 0.086 -> 0.999 |
| taxonomy_regression_lr_spikes | reconstruction: Humbatova et al. 2020 'Suboptimal learning rate' | regression loss drops, spikes, then sits at the target variance (constant output) | plain SGD learning rate 0.6 for an MLP regression: a blow-up kills the ReLUs | SGD learning rate 0.3 (its loss keeps small occasional spikes near the floor) | R^2 -0.004 -> 0.961 | R^2 -0.090 -> 0.989 |
| taxonomy_unshuffled_class_folders | reconstruction: Humbatova et al. 2020 'Training data: missing shuffling' | batch loss swings as the loader moves from class to class; accuracy lags, predictions lean to the last classes read | a Sequence loader that reads samples class by class and never shuffles | shuffle each epoch (the fixed loader caches decoded images: memory rises in epoch 1, then flat) | acc 0.814 -> 0.893 | acc 0.798 -> 0.879 |
| taxonomy_labels_shuffled_apart | reconstruction: Humbatova et al. 2020 'Training data: wrong labels' | accuracy at chance, loss at ln 2 | np.random.shuffle(X) and np.random.shuffle(y) called separately | one permutation for X and y (the fixed loss stays near the constant predictor: weak signal) | acc 0.488 -> 0.606 | acc 0.473 -> 0.605 |
| taxonomy_labels_1_2_unscaled_scores | reconstruction: Humbatova et al. 2020 'Training data: wrong labels' / Islam et al. 2019 'data' | admission classifier predicts 'admitted' for everyone; the BCE loss goes negative | labels encoded 1/2 instead of 0/1 under a sigmoid + binary_crossentropy | labels - 1 (the raw 60..100 exam scores stay unscaled; the fixed model learns anyway) | acc 0.417 -> 0.818 | acc 0.388 -> 0.818 |

`suspicious_fixed` (the fixed run looks odd but is fine): tpb_so43636736_arange_inputs_lr (unscaled inputs
0..99), taxonomy_labels_1_2_unscaled_scores (unscaled 60..100 exam scores), taxonomy_unshuffled_class_folders
(decoded-image cache: RSS rises ~25 MB in epoch 1, then flat), taxonomy_labels_shuffled_apart (loss ~0.65 vs
ln 2 = 0.693 for the constant predictor: little signal in the data), taxonomy_regression_lr_spikes (small
occasional spikes near the loss floor).

Not ported: SO 33641799 (-reduce_sum(y * log(softmax)), GD 0.01 -> 0.005) because on the numpy stand-in data
the softmax never reached an exact 0 within the budget (no NaN, no score gap); its siblings with the same
mechanism (SO 33712178 / 33699174 / 39487825, GitHub IPS-1 / IPS-9) were skipped for the same reason; SO 45002504 (heart.csv) because the "fixed" learning rate still oscillated on raw features;
AUTOTRAINER's Loss_Issue_Case (double softmax + MSE) because the buggy model scored as well as the fixed one,
as the AUTOTRAINER authors note for loss issues; crash-only subjects (shape/API errors, e.g. SO 38167455,
43285733, 48723158, 34354126, NeuraLint SO 38584268 / 45120429 missing Flatten).
"""

from __future__ import annotations

import keras
import numpy as np

from bench.real_bugs.case import Case

# ----------------------------------------------------------------------------------------------
# Shared data and scoring helpers (numpy only; no downloads)
# ----------------------------------------------------------------------------------------------


def _strokes(n_classes: int, size: int, seed: int = 12345) -> np.ndarray:
    """One fixed random-walk stroke pattern per class, the same for every seed."""
    rng = np.random.default_rng(seed)
    protos = np.zeros((n_classes, size, size), np.float32)
    for c in range(n_classes):
        for _ in range(3):
            r, q = (int(v) for v in rng.integers(6, size - 6, 2))
            for _ in range(20):
                protos[c, r - 1 : r + 2, q - 1 : q + 2] = 1.0
                r = int(np.clip(r + rng.integers(-1, 2), 4, size - 5))
                q = int(np.clip(q + rng.integers(-1, 2), 4, size - 5))
    return protos


def _digits(n: int, seed: int, size: int = 28, n_classes: int = 10, mix: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-like images in [0, 1] (mean pixel ~0.1): shifted, partly erased, speckled class strokes;
    `mix` overlays a fraction of another class's strokes (ambiguous, badly written digits)."""
    rng = np.random.default_rng(seed + 101)
    protos = _strokes(n_classes, size)
    labels = rng.integers(0, n_classes, n)
    x = protos[labels] + mix * protos[rng.integers(0, n_classes, n)]
    dr = rng.integers(-2, 3, n)
    dc = rng.integers(-2, 3, n)
    for i in range(n):
        x[i] = np.roll(x[i], (int(dr[i]), int(dc[i])), axis=(0, 1))
    x = x * (rng.random(x.shape) < 0.7) * rng.uniform(0.5, 1.0, (n, 1, 1))
    x = x + (rng.random(x.shape) < 0.08) * rng.random(x.shape)
    return np.clip(x, 0.0, 1.0).astype(np.float32), labels


def _blobs(n: int, seed: int, std: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """make_blobs(centers=3, n_features=2, cluster_std=2, random_state=2) in numpy: the report's three
    centres (the first draw of RandomState(2), uniform in (-10, 10)); the seed only resamples the points."""
    centers = np.random.RandomState(2).uniform(-10.0, 10.0, (3, 2))
    rng = np.random.default_rng(seed + 202)
    y = rng.integers(0, 3, n)
    x = centers[y] + std * rng.standard_normal((n, 2))
    return x.astype(np.float32), y


def _circles(n: int, seed: int, noise: float = 0.1, factor: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """sklearn.datasets.make_circles in numpy, then MinMaxScaler(feature_range=(-1, 1))."""
    rng = np.random.default_rng(seed + 303)
    y = rng.integers(0, 2, n)
    t = rng.uniform(0.0, 2 * np.pi, n)
    r = np.where(y == 1, factor, 1.0)
    x = np.stack([r * np.cos(t), r * np.sin(t)], 1) + noise * rng.standard_normal((n, 2))
    lo, hi = x.min(0), x.max(0)
    x = 2.0 * (x - lo) / (hi - lo) - 1.0
    return x.astype(np.float32), y


def _predict(model: keras.Model, x) -> np.ndarray:
    return np.asarray(model.predict(x, verbose=0, batch_size=1024), dtype=np.float64)


def _accuracy(model: keras.Model, x, labels: np.ndarray) -> float:
    """Held-out accuracy: argmax over classes, or p > 0.5 for one output unit (NaN counts as wrong/0)."""
    p = _predict(model, x)
    pred = (p[:, 0] > 0.5).astype(int) if p.shape[-1] == 1 else np.argmax(np.nan_to_num(p, nan=-np.inf), -1)
    return float(np.mean(pred == labels))


def _r2(model: keras.Model, x, y: np.ndarray) -> float:
    """Held-out R^2 (averaged over outputs), floored at -1; non-finite predictions count as 0."""
    p = np.nan_to_num(_predict(model, x), nan=0.0, posinf=0.0, neginf=0.0).reshape(len(y), -1)
    y = np.asarray(y, np.float64).reshape(len(y), -1)
    sse = np.sum((p - y) ** 2, 0)
    sst = np.sum((y - y.mean(0)) ** 2, 0)
    return float(max(-1.0, np.mean(1.0 - sse / sst)))


def _tile(k: int, *arrays: np.ndarray) -> list[np.ndarray]:
    """Repeat a training set k times, so one Keras epoch runs k of the report's epochs (fewer epochs, the
    same number of steps: keeps fit's per-epoch overhead inside the time budget)."""
    return [np.concatenate([a] * k) for a in arrays]


# ----------------------------------------------------------------------------------------------
# TensorFlow-Program-Bugs (Zhang et al., ISSTA 2018), StackOverflow subjects
# ----------------------------------------------------------------------------------------------


def _run_so35078027(buggy: bool, seed: int, callbacks: list) -> float:
    # One-hidden-layer MLP on MNIST, weights tf.random_normal (stddev 1), no biases. The output layer is
    # linear but the hand-written binary cross-entropy takes tf.log(y_) and tf.log(1 - y_) -> NaN.
    # Fix: sigmoid on the output, logs of clipped values, learning rate 0.05 -> 0.5.
    keras.utils.set_random_seed(seed)
    x, y = _digits(6000, seed)
    x = x.reshape(len(x), 784)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    init = keras.initializers.RandomNormal(stddev=1.0)
    model = keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(512, activation="sigmoid", use_bias=False, kernel_initializer=init),
            keras.layers.Dense(10, activation=None if buggy else "sigmoid", use_bias=False, kernel_initializer=init),
        ]
    )
    ops = keras.ops
    if buggy:

        def loss(y_true, y_pred):
            return ops.sum(-y_true * ops.log(y_pred) - (1 - y_true) * ops.log(1 - y_pred), 1)

        lr = 0.05
    else:

        def loss(y_true, y_pred):
            return ops.sum(
                -y_true * ops.log(ops.clip(y_pred, 1e-10, 1.0))
                - (1 - y_true) * ops.log(ops.clip(1 - y_pred, 1e-10, 1.0)),
                1,
            )

        lr = 0.5
    model.compile(optimizer=keras.optimizers.SGD(lr), loss=loss, metrics=["accuracy"])
    model.fit(
        x,
        np.eye(10)[y],
        batch_size=100,
        epochs=10,
        validation_data=(xt, np.eye(10)[yt]),
        callbacks=callbacks,
        verbose=0,
    )
    return _accuracy(model, xt, yt)


def _run_so39939881(buggy: bool, seed: int, callbacks: list) -> float:
    # Simple linear regression y = w*x + b + U(-1, 1), x ~ U(-8, 8), W and B start at zero, loss
    # tf.reduce_mean(tf.square(y_ - y)), full batch. GradientDescentOptimizer(1e-1) blows up;
    # the accepted fix is AdamOptimizer(1e-1).
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 404)
    w, b = rng.uniform(-8, 8, 2)
    x = rng.uniform(-8, 8, (400, 1)).astype(np.float32)
    y = (w * x[:, 0] + b + rng.uniform(-1, 1, 400)).astype(np.float32)
    xt, yt, x, y = x[:200], y[:200], x[200:], y[200:]
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="zeros")])

    def loss(y_true, y_pred):
        return keras.ops.mean(keras.ops.square(y_pred - y_true))

    opt = keras.optimizers.SGD(1e-1) if buggy else keras.optimizers.Adam(1e-1)
    model.compile(optimizer=opt, loss=loss)
    n = len(x)
    x, y = _tile(10, x, y)  # each batch of n is the whole (full-batch) training set
    model.fit(x, y, batch_size=n, epochs=10, shuffle=False, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _r2(model, xt, yt)


def _run_so43636736(buggy: bool, seed: int, callbacks: list) -> float:
    # Linear regression on x = np.arange(100) (unscaled, 0..99) plus a ones column, W = tf.ones([1, 2]),
    # MSE = 1/(2T) * sum((Y - Yhat)^2), full batch; GradientDescentOptimizer(0.5) diverges to NaN.
    # The fix lowers the learning rate to 0.0005 (inputs stay unscaled).
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 505)
    t = 100
    x = np.stack([np.arange(t), np.ones(t)], 1).astype(np.float32)
    y = (x @ np.array([2.0, 4.0]) + 10 * rng.random(t)).astype(np.float32)
    xv = np.stack([rng.uniform(0, t, 200), np.ones(200)], 1).astype(np.float32)
    yv = (xv @ np.array([2.0, 4.0]) + 10 * rng.random(200)).astype(np.float32)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])

    def mse(y_true, y_pred):
        return 0.5 * keras.ops.mean(keras.ops.square(y_true - y_pred))

    model.compile(optimizer=keras.optimizers.SGD(0.5 if buggy else 0.0005), loss=mse)
    x, y = _tile(10, x, y)  # each batch of T is the whole (full-batch) training set
    model.fit(x, y, batch_size=t, epochs=10, shuffle=False, validation_data=(xv, yv), callbacks=callbacks, verbose=0)
    return _r2(model, xv, yv)


def _run_so43239467(buggy: bool, seed: int, callbacks: list) -> float:
    # MNIST CNN (conv-pool, conv-pool, fc 1024, fc 10; truncated_normal(0.1) weights, 0.1 biases) whose
    # fc_layer helper applies tf.nn.relu to every layer, the logits layer included; softmax cross-entropy
    # on those logits, Adam(1e-3). Fix: no activation on the logits layer. (Scaled: 8/16 filters, fc 128.)
    keras.utils.set_random_seed(seed)
    x, y = _digits(5000, seed)
    x = x[..., None]
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    w = keras.initializers.TruncatedNormal(stddev=0.1)
    b = keras.initializers.Constant(0.1)
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 5, padding="same", activation="relu", kernel_initializer=w, bias_initializer=b),
            keras.layers.MaxPooling2D(2, padding="same"),
            keras.layers.Conv2D(16, 5, padding="same", activation="relu", kernel_initializer=w, bias_initializer=b),
            keras.layers.MaxPooling2D(2, padding="same"),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu", kernel_initializer=w, bias_initializer=b),
            keras.layers.Dense(10, activation="relu" if buggy else None, kernel_initializer=w, bias_initializer=b),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        x, np.eye(10)[y], batch_size=100, epochs=3, validation_data=(xt, np.eye(10)[yt]), callbacks=callbacks, verbose=0
    )
    return _accuracy(model, xt, yt)


def _run_so42064941(buggy: bool, seed: int, callbacks: list) -> float:
    # A float16 conv net trained with tf.train.AdamOptimizer(1e-3): its default epsilon 1e-8 rounds to 0
    # in float16, so m / (sqrt(v) + eps) is 0/0 for any weight whose gradient is exactly zero (the report's
    # zero-initialised conv on zero inputs) and those weights turn NaN at the first step; NaN then spreads
    # to the loss. Fix: AdamOptimizer(1e-3, epsilon=1e-4). (Ported to a float16 classifier of 16x16 RGBA
    # images whose alpha channel is always 0, so its conv weights get exactly zero gradients.)
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 606)
    n = 2400
    labels = rng.integers(0, 2, n)
    x = rng.standard_normal((n, 16, 16, 4)).astype(np.float32) * 0.5
    x[labels == 1, 4:12, 4:12, 0] += 1.0
    x[..., 3] = 0.0
    x = x.astype(np.float16)
    xt, yt, x, y = x[:400], labels[:400], x[400:], labels[400:]
    model = keras.Sequential(
        [
            keras.Input((16, 16, 4), dtype="float16"),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu", dtype="float16"),
            keras.layers.GlobalAveragePooling2D(dtype="float16"),
            keras.layers.Dense(1, activation="sigmoid", dtype="float16"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-8 if buggy else 1e-4),
        loss="binary_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, batch_size=32, epochs=4, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


class _BroadcastMSE(keras.losses.Loss):
    """tf.reduce_mean(tf.square(y_ - y)) exactly as raw TF computes it: no rank matching of y_ and y."""

    def call(self, y_true, y_pred):
        return keras.ops.mean(keras.ops.square(y_true - y_pred))


def _run_so38447935(buggy: bool, seed: int, callbacks: list) -> float:
    # Fitting y = x with x = [[1, 1], [1, 2], [1, 3]] through w (2x1), y = tf.matmul(x, w) has shape (3, 1)
    # but the targets y_ have shape (3,), so y_ - y broadcasts to (3, 3) and the fit goes to the mean.
    # Fix: y_ = tf.expand_dims(y_, axis=1). (Scaled: 64 points, Adam 1e-2 x 600 steps for 1e-4 x 50000.)
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 707)
    t = rng.uniform(0, 4, 128).astype(np.float32)
    x = np.stack([np.ones_like(t), t], 1)
    y = t + 0.05 * rng.standard_normal(128).astype(np.float32)
    if not buggy:
        y = y[:, None]
    xt, yt, x, y = x[:64], y[:64], x[64:], y[64:]
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(1, use_bias=False, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.1)),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=_BroadcastMSE())
    x, y = _tile(40, x, y)  # each batch of 64 is the whole training set: 600 full-batch steps
    model.fit(x, y, batch_size=64, epochs=15, shuffle=False, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _r2(model, xt, yt)


# ----------------------------------------------------------------------------------------------
# TensorFlow-Program-Bugs, GitHub subject IPS-7 (Deep-Learning-TensorFlow DBN fine-tuning)
# ----------------------------------------------------------------------------------------------


def _run_dltf_missing_softmax(buggy: bool, seed: int, callbacks: list) -> float:
    # model.py's 'cross_entropy' cost -mean(y*log(clip(out, 1e-10, inf)) + (1-y)*log(clip(1-out, 1e-10, inf)))
    # is applied to the raw (linear) output layer of the DBN (rbm_layers 512,256, relu, gradient descent
    # 0.01, batch 10). Fix: model_output = tf.nn.softmax(model_output) before the cost.
    keras.utils.set_random_seed(seed)
    x, y = _digits(4000, seed)
    x = x.reshape(len(x), 784)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10, activation=None if buggy else "softmax"),
        ]
    )
    ops = keras.ops

    def cost(y_true, y_pred):
        return -ops.mean(
            y_true * ops.log(ops.clip(y_pred, 1e-10, np.inf))
            + (1 - y_true) * ops.log(ops.clip(1 - y_pred, 1e-10, np.inf)),
            -1,
        )

    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=cost, metrics=["accuracy"])
    model.fit(
        x, np.eye(10)[y], batch_size=10, epochs=4, validation_data=(xt, np.eye(10)[yt]), callbacks=callbacks, verbose=0
    )
    return _accuracy(model, xt, yt)


# ----------------------------------------------------------------------------------------------
# AUTOTRAINER (Zhang et al., ICSE 2021) demo cases
# ----------------------------------------------------------------------------------------------


def _run_at_vanish(buggy: bool, seed: int, callbacks: list) -> float:
    # demo_case/Gradient_Vanish_Case: make_circles, eight Dense(5, sigmoid, he_uniform) layers, sigmoid
    # output, binary_crossentropy, Adam(lr=0.001), batch 128, 300 epochs. AUTOTRAINER's repair: selu.
    keras.utils.set_random_seed(seed)
    x, y = _circles(1000, seed)
    xt, yt, x, y = x[700:], y[700:], x[:700], y[:700]
    act = "sigmoid" if buggy else "selu"
    layers = [keras.Input((2,))]
    layers += [keras.layers.Dense(5, activation=act, kernel_initializer="he_uniform") for _ in range(8)]
    layers += [keras.layers.Dense(1, activation="sigmoid", kernel_initializer="he_uniform")]
    model = keras.Sequential(layers)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="binary_crossentropy", metrics=["accuracy"]
    )
    x, y = _tile(15, x, y)  # 300 epochs as 20 passes over the set repeated 15 times
    model.fit(x, y, batch_size=128, epochs=20, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _blob_mlp(last: str) -> keras.Model:
    layers = [keras.Input((2,))]
    layers += [keras.layers.Dense(50, activation="relu", kernel_initializer="he_uniform") for _ in range(4)]
    layers += [keras.layers.Dense(3, activation=last)]
    return keras.Sequential(layers)


def _run_at_relu_output(buggy: bool, seed: int, callbacks: list) -> float:
    # demo_case/Improper_Activation_case: blobs (3 centres, std 2), four Dense(50, relu) layers and
    # Dense(3, activation='relu') as the output, loss 'categorical_crossentropy', Adam(lr=1e-4), batch 256,
    # 300 epochs. Fix: softmax output.
    keras.utils.set_random_seed(seed)
    x, y = _blobs(1000, seed)
    xt, yt, x, y = x[700:], y[700:], x[:700], y[:700]
    model = _blob_mlp("relu" if buggy else "softmax")
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-4), loss="categorical_crossentropy", metrics=["accuracy"]
    )
    x, y = _tile(15, x, y)  # 300 epochs as 20 passes over the set repeated 15 times
    model.fit(
        x, np.eye(3)[y], batch_size=256, epochs=20, validation_data=(xt, np.eye(3)[yt]), callbacks=callbacks, verbose=0
    )
    return _accuracy(model, xt, yt)


def _run_at_oscillating(buggy: bool, seed: int, callbacks: list) -> float:
    # demo_case/Oscillating_Loss_Case: blobs, Dense(50, relu) + Dense(3, softmax), categorical_crossentropy,
    # SGD(lr=0.01, momentum=0.9) with batch size 1 (200 epochs; 4 here). AUTOTRAINER's repair: Adam.
    keras.utils.set_random_seed(seed)
    x, y = _blobs(1000, seed)
    xt, yt, x, y = x[700:], y[700:], x[:700], y[:700]
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(50, activation="relu", kernel_initializer="he_uniform"),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9) if buggy else keras.optimizers.Adam()
    model.compile(optimizer=opt, loss="categorical_crossentropy", metrics=["accuracy"])
    model.fit(
        x, np.eye(3)[y], batch_size=1, epochs=4, validation_data=(xt, np.eye(3)[yt]), callbacks=callbacks, verbose=0
    )
    return _accuracy(model, xt, yt)


# ----------------------------------------------------------------------------------------------
# UMLAUT (Schoop et al., CHI 2021) example programs
# ----------------------------------------------------------------------------------------------


def _run_umlaut_test_train(buggy: bool, seed: int, callbacks: list) -> float:
    # test_train.py: Fashion-MNIST pixels 0..255 straight into Flatten + Dense(10) (logits), compiled with
    # loss=tf.keras.losses.sparse_categorical_crossentropy (from_logits=False), optimizer 'adam', 5 epochs,
    # validation_split=0.2. Fix (UMLAUT's advice): scale by 255 and SparseCategoricalCrossentropy(from_logits=True).
    keras.utils.set_random_seed(seed)
    x, y = _digits(6000, seed)
    x = np.round(x * 255).astype(np.uint8)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    if not buggy:
        x, xt = x / 255.0, xt / 255.0
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)])
    loss = (
        keras.losses.sparse_categorical_crossentropy
        if buggy
        else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
    model.fit(x, y, epochs=5, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _run_umlaut_negative_lr(buggy: bool, seed: int, callbacks: list) -> float:
    # pilot_boilerplate_2.py: Fashion-MNIST / 255, Flatten, Dense(256, relu) x2, Dense(10) logits,
    # optimizer=tf.keras.optimizers.SGD(learning_rate=-1e5), loss=sparse_categorical_crossentropy,
    # batch 256, validation_split=0.2. Fix (test_train_cifar.py): optimizer 'adam' and
    # SparseCategoricalCrossentropy(from_logits=True).
    keras.utils.set_random_seed(seed)
    x, y = _digits(6000, seed)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    if buggy:
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=-1e5),
            loss=keras.losses.sparse_categorical_crossentropy,
            metrics=["accuracy"],
        )
    else:
        model.compile(
            optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
        )
    model.fit(x, y, epochs=5, batch_size=256, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


# ----------------------------------------------------------------------------------------------
# NeuraLint (Nikanjam et al., TOSEM 2021) sample buggy scripts
# ----------------------------------------------------------------------------------------------


def _run_so45378493(buggy: bool, seed: int, callbacks: list) -> float:
    # SO 45378493: Conv1D(16)-BN-LeakyReLU-Dropout, Conv1D(8)-BN-LeakyReLU-Dropout, Dense(64)-BN-LeakyReLU,
    # then Dense(1) + Activation('softmax'), binary_crossentropy, adam, batch 128 (100 epochs; 10 here, the
    # ReduceLROnPlateau callback left out): a softmax over one unit is always 1. Fix: Activation('sigmoid').
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 909)
    n = 4000
    x = rng.standard_normal((n, 10, 4)).astype(np.float32)
    score = x[:, :, 0].mean(1) - x[:, 5:, 2].mean(1) + 0.3 * rng.standard_normal(n)
    y = (score > 0.25).astype(int)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((10, 4)),
            keras.layers.Conv1D(filters=16, kernel_size=4, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.LeakyReLU(),
            keras.layers.Dropout(0.2),
            keras.layers.Conv1D(filters=8, kernel_size=4, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.LeakyReLU(),
            keras.layers.Dropout(0.2),
            keras.layers.Flatten(),
            keras.layers.Dense(64),
            keras.layers.BatchNormalization(),
            keras.layers.LeakyReLU(),
            keras.layers.Dense(1),
            keras.layers.Activation("softmax" if buggy else "sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=10, batch_size=128, validation_data=(xt, yt), callbacks=callbacks, verbose=0, shuffle=True)
    return _accuracy(model, xt, yt)


def _run_so50555434(buggy: bool, seed: int, callbacks: list) -> float:
    # SO 50555434: 28 features -> Dense(20, relu) -> Dense(15, relu) -> Dense(6, relu) -> Dense(6, sigmoid),
    # kernel_initializer='normal', optimizer 'adam', loss 'mae', regressing 6 components of a date (raw
    # values in the tens) that a sigmoid cannot reach. Fix: linear output layer.
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 1010)
    n = 2600
    x = rng.standard_normal((n, 28)).astype(np.float32)
    stamp = x @ (rng.standard_normal((28, 1)) / np.sqrt(28))  # one underlying date drives all 6 components
    scale = np.array([4.0, 6.0, 8.0, 10.0, 12.0, 15.0])
    offset = np.array([12.0, 20.0, 25.0, 30.0, 35.0, 40.0])
    y = (stamp * scale + offset).astype(np.float32)
    xt, yt, x, y = x[:600], y[:600], x[600:], y[600:]
    model = keras.Sequential(
        [
            keras.Input((28,)),
            keras.layers.Dense(20, kernel_initializer="normal", activation="relu"),
            keras.layers.Dense(15, kernel_initializer="normal", activation="relu"),
            keras.layers.Dense(6, kernel_initializer="normal", activation="relu"),
            keras.layers.Dense(6, kernel_initializer="normal", activation="sigmoid" if buggy else None),
        ]
    )
    model.compile(optimizer="adam", loss="mae")
    model.fit(x, y, epochs=25, batch_size=32, validation_split=0.15, callbacks=callbacks, verbose=0)
    return _r2(model, xt, yt)


def _run_comp_dnnfw(buggy: bool, seed: int, callbacks: list) -> float:
    # NeuraLint GitHub sample 6 (yumatsuoka/comp_DNNfw): LeNet-like Conv2D(16,5)-relu-AvgPool x2, Dense(100)
    # relu, Dense(10) with no activation, compiled with loss='binary_crossentropy', optimizer 'adam',
    # metrics ['acc'] for 10-class MNIST, batch 256, 3 epochs. Fix: categorical cross-entropy on the
    # logits (CategoricalCrossentropy(from_logits=True)).
    keras.utils.set_random_seed(seed)
    x, y = _digits(5000, seed)
    x = x[..., None]
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(16, (5, 5)),
            keras.layers.Activation("relu"),
            keras.layers.AveragePooling2D((2, 2)),  # Keras 2's default pool size
            keras.layers.Conv2D(16, (5, 5)),
            keras.layers.Activation("relu"),
            keras.layers.AveragePooling2D((2, 2)),  # Keras 2's default pool size
            keras.layers.Flatten(),
            keras.layers.Dense(100),
            keras.layers.Activation("relu"),
            keras.layers.Dense(10),
        ]
    )
    loss = "binary_crossentropy" if buggy else keras.losses.CategoricalCrossentropy(from_logits=True)
    model.compile(loss=loss, optimizer="adam", metrics=["acc"])
    model.fit(
        x, np.eye(10)[y], batch_size=256, epochs=3, validation_data=(xt, np.eye(10)[yt]), callbacks=callbacks, verbose=0
    )
    return _accuracy(model, xt, yt)


# ----------------------------------------------------------------------------------------------
# Reconstructions from the fault taxonomies (Humbatova et al. ICSE 2020; Islam et al. FSE 2019)
# ----------------------------------------------------------------------------------------------


def _run_multihot_cce(buggy: bool, seed: int, callbacks: list) -> float:
    # Multi-label tagging (5 tags, several per sample): sigmoid outputs trained with
    # 'categorical_crossentropy', which only rewards raising the true tags' share, so every output drifts
    # to 1. Fix: 'binary_crossentropy'. Score: per-tag accuracy at threshold 0.5.
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 1111)
    n = 4000
    x = rng.standard_normal((n, 20)).astype(np.float32)
    w = rng.standard_normal((20, 5))
    y = ((x @ w) / np.sqrt(20) + 0.3 * rng.standard_normal((n, 5)) > 0.3).astype(np.float32)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(5, activation="sigmoid")]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy" if buggy else "binary_crossentropy")
    model.fit(x, y, epochs=15, batch_size=32, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    p = _predict(model, xt)
    return float(np.mean((p > 0.5) == (yt > 0.5)))


def _run_raw_pixels_cnn(buggy: bool, seed: int, callbacks: list) -> float:
    # A small CNN fed raw 0..255 pixels with SGD(learning_rate=0.01, momentum=0.9): the first steps blow
    # the weights up and the loss goes to NaN. Fix: rescale the images to [0, 1].
    keras.utils.set_random_seed(seed)
    x, y = _digits(5000, seed)
    x = np.round(x * 255).astype(np.float32)[..., None]
    if not buggy:
        x = x / 255.0
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=3, batch_size=64, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _regression_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + 1212)
    x = rng.uniform(-1, 1, (n, 8)).astype(np.float32)
    y = np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] ** 2 - x[:, 4] + 0.05 * rng.standard_normal(n)
    return x, y.astype(np.float32)


def _run_regression_lr_spikes(buggy: bool, seed: int, callbacks: list) -> float:
    # Regression MLP (two Dense(64, relu)) with plain SGD(learning_rate=0.6): the MSE drops, jumps back with
    # a large spike and then sits at the variance of the target (the ReLUs die, the output is constant).
    # Fix: SGD(learning_rate=0.3); its loss still shows occasional small spikes near the floor (mini-batches
    # of 32 at a fairly high rate), which is fine.
    keras.utils.set_random_seed(seed)
    x, y = _regression_data(3000, seed)
    xt, yt, x, y = x[:600], y[:600], x[600:], y[600:]
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.6 if buggy else 0.3), loss="mse")
    model.fit(x, y, epochs=15, batch_size=32, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _r2(model, xt, yt)


class _FolderSequence(keras.utils.PyDataset):
    """Reads the 'images' class folder by class folder (as os.listdir sorted them), decoding uint8 to float.

    The fixed version shuffles the sample order every epoch and keeps each decoded batch in a cache that
    fills during the first epoch (so memory rises once, then stays flat)."""

    def __init__(self, x_uint8, y, batch_size, shuffle, cache, seed):
        super().__init__()
        order = np.argsort(y, kind="stable")
        self.x, self.y = x_uint8[order], y[order]
        self.batch_size, self.shuffle, self.cache = batch_size, shuffle, cache
        self.rng = np.random.default_rng(seed)
        self.decoded: dict[int, np.ndarray] = {}
        self.index = np.arange(len(self.y))
        if shuffle:
            self.rng.shuffle(self.index)

    def __len__(self):
        return int(np.ceil(len(self.y) / self.batch_size))

    def _decode(self, i):
        if self.cache and i in self.decoded:
            return self.decoded[i]
        img = self.x[i].astype(np.float32) / 255.0
        if self.cache:
            self.decoded[i] = img
        return img

    def __getitem__(self, b):
        idx = self.index[b * self.batch_size : (b + 1) * self.batch_size]
        return np.stack([self._decode(int(i)) for i in idx]), self.y[idx]

    def on_epoch_end(self):
        if self.shuffle:
            self.rng.shuffle(self.index)


def _run_unshuffled_folders(buggy: bool, seed: int, callbacks: list) -> float:
    # Training samples read class folder by class folder through a keras.utils.Sequence that never shuffles
    # (fit's shuffle= does not apply to a Sequence): every epoch ends on the last classes and the model
    # forgets the others. Fix: shuffle the index each epoch; the fixed loader also caches decoded images,
    # so its memory climbs during epoch 1 and then levels off.
    keras.utils.set_random_seed(seed)
    x, y = _digits(7000, seed, mix=0.7)
    x = np.round(np.clip(x, 0, 1) * 255).astype(np.uint8)
    xt, yt, x, y = x[:1000], y[:1000], x[1000:], y[1000:]
    data = _FolderSequence(x, y, batch_size=64, shuffle=not buggy, cache=not buggy, seed=seed)
    model = keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(data, epochs=4, validation_data=(xt / 255.0, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt / 255.0, yt)


def _run_labels_shuffled_apart(buggy: bool, seed: int, callbacks: list) -> float:
    # A weak-signal churn table: the author shuffles the training arrays with np.random.shuffle(X) and
    # np.random.shuffle(y) separately, which destroys the pairing (accuracy stays at chance). Fix: one
    # permutation for both. The fixed model's loss stays close to the constant predictor's (the data has
    # little signal) but it is the best this data allows.
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 1313)
    n = 6000
    x = rng.standard_normal((n, 12)).astype(np.float32)
    y = ((x[:, 0] + 0.6 * x[:, 1] - 0.4 * x[:, 2]) * 0.3 + rng.standard_normal(n) > 0).astype(np.float32)
    xt, yt, x, y = x[:2000], y[:2000], x[2000:], y[2000:]
    x, y = x.copy(), y.copy()
    if buggy:
        np.random.shuffle(x)
        np.random.shuffle(y)
    else:
        p = np.random.permutation(len(x))
        x, y = x[p], y[p]
    model = keras.Sequential(
        [keras.Input((12,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=10, batch_size=64, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _run_exam_labels_1_2(buggy: bool, seed: int, callbacks: list) -> float:
    # Admission from three raw exam scores (60..100): the label column is read as 1 = rejected,
    # 2 = admitted and fed to a sigmoid unit under binary_crossentropy, which then pushes every output to 1.
    # Fix: labels - 1 (0/1). The fixed model still sees the unscaled 60..100 scores and learns anyway.
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 1414)
    n = 4000
    x = rng.uniform(60, 100, (n, 3)).astype(np.float32)
    z = (x[:, 0] - 80) / 6 + (x[:, 1] - 80) / 8 - (x[:, 2] - 80) / 10 + 0.5 * rng.standard_normal(n)
    labels = (z > 0.8).astype(int)
    y = (labels + 1).astype(np.float32) if buggy else labels.astype(np.float32)
    xt, lt, yt, x, y = x[:1000], labels[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=15, batch_size=32, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, lt)


CASES: list[Case] = [
    Case(
        name="tpb_so35078027_linear_output_manual_bce",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-7 (SO 35078027)",
        symptom="MLP on MNIST: the loss is NaN from the first steps",
        cause="the output layer is linear but the hand-written binary cross-entropy takes log(y_) and log(1-y_)",
        fix="sigmoid on the output, clipped logs, learning rate 0.05 -> 0.5",
        codes=("nonfinite", "output_loss_mismatch"),
        run=_run_so35078027,
        # The clipped logs are unseen: the custom loss keeps its name ('loss').
        fix_changes=("activation", "learning_rate"),
    ),
    Case(
        name="tpb_so39939881_linreg_sgd_diverges",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-5 (SO 39939881)",
        symptom="simple linear regression: loss grows every step until it is inf/NaN",
        cause="plain gradient descent with lr 0.1 on x in [-8, 8] is past the stability limit",
        fix="AdamOptimizer(0.1)",
        codes=("loss_divergence", "nonfinite", "exploding_gradients"),
        run=_run_so39939881,
        score_name="r2",
        margin=0.1,
        # SGD's own settings (momentum, nesterov) and Adam's (beta_1, ...) come and go with the optimizer.
        fix_changes=("optimizer",),
    ),
    Case(
        name="tpb_so43636736_arange_inputs_lr",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-15 (SO 43636736)",
        symptom="linear regression on x = 0..99: the MSE explodes to inf then NaN",
        cause="GD learning rate 0.5 on unscaled inputs up to 99",
        fix="learning rate 0.0005 (inputs stay unscaled; the fixed run learns anyway)",
        codes=("loss_divergence", "nonfinite", "unnormalized_input"),
        run=_run_so43636736,
        score_name="r2",
        margin=0.1,
        suspicious_fixed=True,
        fix_changes=("learning_rate",),
    ),
    Case(
        name="tpb_so43239467_relu_on_logits",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-11 (SO 43239467)",
        symptom="MNIST CNN: accuracy stalls well below what the tutorial reaches",
        cause="the fc helper applies ReLU to the logits layer too, so logits die at 0",
        fix="no activation on the last layer",
        codes=("dead_relu", "output_loss_mismatch", "loss_plateau"),
        run=_run_so43239467,
        fix_changes=("activation",),
    ),
    Case(
        name="tpb_so42064941_fp16_adam_epsilon",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/IPS-10 (SO 42064941)",
        symptom="float16 network: the first Adam step turns the weights and the loss into NaN",
        cause="Adam's epsilon 1e-8 underflows to 0 in float16; zero gradients give 0/0",
        fix="AdamOptimizer(1e-3, epsilon=1e-4)",
        codes=("nonfinite", "model_config"),
        run=_run_so42064941,
        fix_changes=("epsilon",),
    ),
    Case(
        name="tpb_so38447935_target_shape_broadcast",
        source="ForeverZyh/TensorFlow-Program-Bugs StackOverflow/UT-15 (SO 38447935)",
        symptom="fitting y = x: the error stops falling and the fit is a flat line at the mean",
        cause="targets of shape (N,) against predictions (N, 1): y_ - y broadcasts to (N, N)",
        fix="y_ = tf.expand_dims(y_, axis=1)",
        codes=("worse_than_constant", "loss_plateau", "label_problem"),
        run=_run_so38447935,
        score_name="r2",
        margin=0.1,
        fix_changes=(),
        fix_unseen="the targets are reshaped from (N,) to (N, 1): the same values, and the labels' shape is not a "
        "recorded setting (the custom loss keeps its name)",
    ),
    Case(
        name="tpb_dltf_dbn_missing_softmax",
        source="ForeverZyh/TensorFlow-Program-Bugs Github/IPS-7 (blackecho/Deep-Learning-TensorFlow model.py)",
        symptom="DBN fine-tuning with cross_entropy: accuracy stays at chance",
        cause="the clipped cross-entropy cost is applied to the raw linear output instead of probabilities",
        fix="model_output = tf.nn.softmax(model_output) before the cost",
        codes=("output_loss_mismatch", "loss_plateau"),
        run=_run_dltf_missing_softmax,
        fix_changes=("activation",),
    ),
    Case(
        name="autotrainer_gradient_vanish",
        source="shiningrain/AUTOTRAINER AutoTrainer/demo_case/Gradient_Vanish_Case (model.h5, config.pkl)",
        symptom="circles: accuracy stuck at 50%, loss flat at 0.693",
        cause="eight stacked 5-unit sigmoid layers: gradients vanish before reaching the first layers",
        fix="selu activations (AUTOTRAINER's repair)",
        codes=("vanishing_gradients", "saturated_activation", "loss_plateau"),
        run=_run_at_vanish,
        fix_changes=("activation",),
    ),
    Case(
        name="autotrainer_relu_output",
        source="shiningrain/AUTOTRAINER AutoTrainer/demo_case/Improper_Activation_case/demo_activation.py",
        symptom="blobs: loss does not decrease properly and turns NaN, accuracy at chance",
        cause="Dense(3, activation='relu') output under categorical_crossentropy (all-zero outputs give 0/0)",
        fix="softmax output",
        codes=("output_loss_mismatch", "dead_relu", "nonfinite"),
        run=_run_at_relu_output,
        fix_changes=("activation",),
    ),
    Case(
        name="autotrainer_oscillating_sgd_bs1",
        source="shiningrain/AUTOTRAINER AutoTrainer/demo_case/Oscillating_Loss_Case (model.h5, config.pkl)",
        symptom="blobs: training loss and accuracy oscillate from epoch to epoch",
        cause="SGD lr 0.01 with momentum 0.9 and batch size 1",
        fix="Adam (AUTOTRAINER's repair)",
        codes=("loss_oscillation",),
        run=_run_at_oscillating,
        # Adam() also takes its default rate 0.001 for SGD's 0.01 (SGD's momentum goes with the optimizer).
        fix_changes=("optimizer", "learning_rate"),
    ),
    Case(
        name="umlaut_raw_pixels_logits_no_from_logits",
        source="BerkeleyHCI/umlaut test_train.py",
        symptom="Fashion-MNIST: loss high and accuracy far below a plain linear model's",
        cause="pixels left at 0..255 and logits passed to sparse_categorical_crossentropy (from_logits=False)",
        fix="divide by 255, SparseCategoricalCrossentropy(from_logits=True)",
        codes=("output_loss_mismatch", "unnormalized_input"),
        run=_run_umlaut_test_train,
        # The pixels become floats too (input_dtype uint8 -> float): bookkeeping, not the fix.
        fix_changes=("input_mean", "input_std", "train_inputs", "from_logits", "loss"),
    ),
    Case(
        name="umlaut_negative_learning_rate",
        source="BerkeleyHCI/umlaut pilot_boilerplate_2.py",
        symptom="Fashion-MNIST MLP: loss jumps to ~7 in the first steps and stays there, accuracy at chance",
        cause="SGD(learning_rate=-1e5) (gradient ascent, huge) and logits under a from_logits=False loss",
        fix="optimizer 'adam', SparseCategoricalCrossentropy(from_logits=True)",
        codes=("loss_divergence", "output_loss_mismatch", "loss_plateau"),
        run=_run_umlaut_negative_lr,
        fix_changes=("optimizer", "learning_rate", "from_logits", "loss"),
    ),
    Case(
        name="neuralint_so45378493_softmax_one_unit",
        source="neuralint/neuralint sample_buggy_scripts/SO Samples/45378493.py (SO 45378493)",
        symptom="binary Conv1D classifier: accuracy frozen at the positive-class share (every prediction is 1)",
        cause="Dense(1) followed by softmax: the output is always 1 (in Keras 3 the BCE reads the pre-softmax "
        "logits, so the training loss still falls while accuracy stays frozen)",
        fix="sigmoid activation on the single unit",
        codes=("output_loss_mismatch", "majority_class", "loss_plateau"),
        run=_run_so45378493,
        fix_changes=("activation",),
    ),
    Case(
        name="neuralint_so50555434_sigmoid_regression",
        source="neuralint/neuralint sample_buggy_scripts/SO Samples/50555434.py (SO 50555434)",
        symptom="regressing date components: MAE stuck at its first value, predictions capped below 1",
        cause="sigmoid output layer for raw targets in the tens",
        fix="linear output layer",
        codes=("unnormalized_target", "output_loss_mismatch", "worse_than_constant"),
        run=_run_so50555434,
        score_name="r2",
        margin=0.1,
        fix_changes=("activation",),
    ),
    Case(
        name="neuralint_comp_dnnfw_bce_multiclass",
        source="neuralint/neuralint sample_buggy_scripts/GitHub Samples/6.py (yumatsuoka/comp_DNNfw 30e0973)",
        symptom="10-class MNIST CNN learns slowly: accuracy ~0.55 after 3 epochs (Keras 2's 'acc' showed a "
        "misleading ~90% binary accuracy)",
        cause="binary_crossentropy (from_logits=False) on linear 10-way outputs of a single-label problem",
        fix="categorical cross-entropy on the logits",
        codes=("output_loss_mismatch", "loss_plateau", "loss_metric_mismatch"),
        run=_run_comp_dnnfw,
        fix_changes=("loss", "from_logits"),
    ),
    Case(
        name="taxonomy_multihot_sigmoid_cce",
        source="reconstruction: Humbatova et al. 2020 'Wrong loss function' / Islam et al. 2019 'loss function'",
        symptom="multi-label tagger: loss rises after the first epochs and every tag is predicted for every sample",
        cause="sigmoid outputs with multi-hot labels trained on categorical_crossentropy",
        fix="binary_crossentropy",
        codes=("output_loss_mismatch", "label_problem"),
        run=_run_multihot_cce,
        fix_changes=("loss",),
    ),
    Case(
        name="taxonomy_raw_pixels_cnn_high_lr",
        source="reconstruction: Humbatova et al. 2020 'Missing preprocessing' + 'Suboptimal learning rate'",
        symptom="CNN loss turns NaN in the first epoch",
        cause="0..255 pixels with SGD lr 0.01 and momentum 0.9",
        fix="rescale pixels to [0, 1]",
        codes=("unnormalized_input", "nonfinite", "exploding_gradients"),
        run=_run_raw_pixels_cnn,
        fix_changes=("input_mean", "input_std", "train_inputs"),
    ),
    Case(
        name="taxonomy_regression_lr_spikes",
        source="reconstruction: Humbatova et al. 2020 'Suboptimal learning rate'",
        symptom="regression loss drops, spikes, then sits at the target variance (constant output)",
        cause="plain SGD learning rate 0.6 for an MLP regression: a blow-up kills the ReLUs",
        fix="SGD learning rate 0.3 (its loss keeps small occasional spikes near the floor)",
        codes=("loss_divergence", "dead_relu", "worse_than_constant"),
        run=_run_regression_lr_spikes,
        score_name="r2",
        margin=0.1,
        suspicious_fixed=True,
        fix_changes=("learning_rate",),
    ),
    Case(
        name="taxonomy_unshuffled_class_folders",
        source="reconstruction: Humbatova et al. 2020 'Training data: missing shuffling'",
        symptom="batch loss swings as the loader moves from class to class; accuracy lags, predictions lean "
        "to the last classes read",
        cause="a Sequence loader that reads samples class by class and never shuffles",
        fix="shuffle each epoch (the fixed loader caches decoded images: memory rises in epoch 1, then flat)",
        codes=("loss_oscillation", "label_problem"),
        run=_run_unshuffled_folders,
        suspicious_fixed=True,
        fix_changes=(),
        fix_unseen="the PyDataset shuffles its own index each epoch: fit's shuffle setting is unchanged, and data "
        "from a PyDataset get no fingerprints or statistics (compare lists no change at all)",
    ),
    Case(
        name="taxonomy_labels_shuffled_apart",
        source="reconstruction: Humbatova et al. 2020 'Training data: wrong labels'",
        symptom="accuracy at chance, loss at ln 2",
        cause="np.random.shuffle(X) and np.random.shuffle(y) called separately",
        fix="one permutation for X and y (the fixed loss stays near the constant predictor: weak signal)",
        codes=("label_problem", "worse_than_constant", "loss_plateau"),
        run=_run_labels_shuffled_apart,
        suspicious_fixed=True,
        # The fix restores the pairing of inputs and labels: what train_labels fingerprints (each label
        # weighed by its own sample's input projection); train_inputs and the class shares stay the same.
        fix_changes=("train_labels",),
    ),
    Case(
        name="taxonomy_labels_1_2_unscaled_scores",
        source="reconstruction: Humbatova et al. 2020 'Training data: wrong labels' / Islam et al. 2019 'data'",
        symptom="admission classifier predicts 'admitted' for everyone; the BCE loss goes negative",
        cause="labels encoded 1/2 instead of 0/1 under a sigmoid + binary_crossentropy",
        fix="labels - 1 (the raw 60..100 exam scores stay unscaled; the fixed model learns anyway)",
        codes=("label_problem", "loss_divergence", "majority_class"),
        run=_run_exam_labels_1_2,
        suspicious_fixed=True,
        # The labels 1/2 become 0/1: their shares and fingerprint change.
        fix_changes=("label_distribution", "train_labels", "validation_label_distribution"),
    ),
]
