"""Real-bug cases that cost little (the buggy run's validation loss 1.2-2x its fix's) or that change a
layer argument the callback recorded nothing of before issue 54 (`data_format`, `go_backwards`,
`mask_zero`, a `Reshape` target): the pairs compare must call worse against a band estimated from the
two runs themselves, and name by the changed argument.

Reconstructions of reports in the fault taxonomies (Humbatova et al., ICSE 2020: "missing
preprocessing", "wrong tensor shape", "wrong input format"; Islam et al., FSE 2019: "data flow", "API
misuse"), on numpy data, each version training in a few seconds on a CPU. (A MaxPooling2D with
data_format='channels_first' on channels-last images was tried and dropped: on these images it scored
as well as the fix, 0.677 against 0.655; so did a small fully convolutional segmenter under a dice loss
whose images were shuffled apart from their masks for 80% of the set: held-out soft dice 0.845 against
0.853.)

| name | symptom | cause | fix |
| --- | --- | --- | --- |
| subtle_normalization_bypassed | validation loss 1.2-1.5x a colleague's on the same data | a functional model adapts a Normalization layer and then feeds the raw inputs past it to the first Dense | take the Dense's input from the normalised tensor |
| subtle_lstm_go_backwards | sequence classifier learns slower than its twin | LSTM(go_backwards=True) copied from a bidirectional example: the label's evidence sits at the sequence end and the layer must now carry it across the whole sequence | go_backwards=False |
| subtle_reshape_transposed | flat-pixel CNN learns less than the MLP it replaced | Reshape((28, 28, 1)) written as Reshape((1, 28, 28)): 1-pixel-high images with 28 channels | Reshape((28, 28, 1)) |
| subtle_mask_zero_off | padded-sequence LSTM stalls | post-padded sequences of varying length under Embedding(mask_zero=False): the last state is read after the padding | mask_zero=True |
"""

from __future__ import annotations

import keras
import numpy as np

from bench.real_bugs.case import Case
from bench.real_bugs.other_cases import _accuracy, _digits, _r2


def _run_normalization_bypassed(buggy: bool, seed: int, callbacks: list) -> float:
    # Tabular regression, features on scales from 0.01 to 500. The fixed program feeds the adapted
    # Normalization's output to the first Dense; the buggy one wires the Dense to the raw input tensor
    # (the Normalization layer is then not part of the model at all).
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 5401)
    n = 3000
    scales = np.array([0.3, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 1.0], np.float32)
    z = rng.standard_normal((n, 8)).astype(np.float32)
    x = z * scales + scales
    y = (np.sin(z[:, 0] * 1.5) + z[:, 1] * z[:, 2] + 0.5 * z[:, 5] - 0.3 * z[:, 6] ** 2).astype(np.float32)
    y = y + 0.3 * rng.standard_normal(n).astype(np.float32)
    xt, yt, x, y = x[:600], y[:600], x[600:], y[600:]
    norm = keras.layers.Normalization()
    norm.adapt(x)
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(64, activation="relu")(inputs if buggy else norm(inputs))
    hidden = keras.layers.Dense(32, activation="relu")(hidden)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    model.fit(x, y, epochs=20, batch_size=64, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _r2(model, xt, y=yt)


def _sequences(n: int, rng: np.random.Generator, length: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Noise sequences whose class is the sign of the sum over the LAST 5 steps of channel 0."""
    x = rng.standard_normal((n, length, 3)).astype(np.float32)
    y = (x[:, -5:, 0].sum(1) > 0).astype(np.int64)
    return x, y


def _run_lstm_go_backwards(buggy: bool, seed: int, callbacks: list) -> float:
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 5403)
    x, y = _sequences(2500, rng)
    xt, yt, x, y = x[:500], y[:500], x[500:], y[500:]
    model = keras.Sequential(
        [keras.Input((30, 3)), keras.layers.LSTM(16, go_backwards=buggy), keras.layers.Dense(2, activation="softmax")]
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=6, batch_size=32, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _run_reshape_transposed(buggy: bool, seed: int, callbacks: list) -> float:
    keras.utils.set_random_seed(seed)
    x, y = _digits(3000, seed, size=20, mix=0.5)
    x = x.reshape(len(x), 400)
    xt, yt, x, y = x[:600], y[:600], x[600:], y[600:]
    model = keras.Sequential(
        [
            keras.Input((400,)),
            keras.layers.Reshape((1, 20, 20) if buggy else (20, 20, 1)),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D((1, 2) if buggy else 2),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=4, batch_size=64, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


def _run_mask_zero_off(buggy: bool, seed: int, callbacks: list) -> float:
    # Token sequences of 3-20 tokens post-padded to 40 with 0; the class is whether token 1 appears
    # more often than token 2 in the last 3 real tokens.
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 5406)
    n, width = 3000, 40
    x = np.zeros((n, width), np.int64)
    y = np.zeros(n, np.int64)
    for i in range(n):
        length = int(rng.integers(3, 21))
        tokens = rng.integers(1, 20, length)
        x[i, :length] = tokens
        y[i] = int(np.sum(tokens[-3:] == 1) + np.sum(tokens[-3:] < 6) > np.sum(tokens[-3:] >= 12))
    xt, yt, x, y = x[:600], y[:600], x[600:], y[600:]
    model = keras.Sequential(
        [
            keras.Input((width,)),
            keras.layers.Embedding(20, 8, mask_zero=not buggy),
            keras.layers.LSTM(16),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=5, batch_size=32, validation_data=(xt, yt), callbacks=callbacks, verbose=0)
    return _accuracy(model, xt, yt)


CASES: list[Case] = [
    Case(
        name="subtle_normalization_bypassed",
        source="reconstruction: Humbatova et al. 2020 'Missing preprocessing' (Normalization adapted, not wired)",
        symptom="validation loss 1.2-1.5x a colleague's run on the same data",
        cause="the first Dense reads the raw input tensor, not the adapted Normalization's output",
        fix="feed the Normalization's output to the first Dense",
        codes=("unnormalized_input",),
        run=_run_normalization_bypassed,
        score_name="r2",
        margin=0.02,
        fix_changes=("layers",),
    ),
    Case(
        name="subtle_lstm_go_backwards",
        source="reconstruction: Islam et al. 2019 'API misuse' (go_backwards copied from a bidirectional example)",
        symptom="sequence classifier learns slower than its twin",
        cause="LSTM(go_backwards=True): the evidence at the sequence end is read first and must be carried",
        fix="go_backwards=False",
        codes=("undertrained",),
        run=_run_lstm_go_backwards,
        margin=0.02,
        fix_changes=("go_backwards",),
    ),
    Case(
        name="subtle_reshape_transposed",
        source="reconstruction: Humbatova et al. 2020 'Wrong tensor shape' (Reshape target)",
        symptom="flat-pixel CNN learns less than the MLP it replaced",
        cause="Reshape((1, 20, 20)) for Reshape((20, 20, 1)): 1-pixel-high images with 20 channels",
        fix="Reshape((20, 20, 1))",
        codes=("undertrained",),
        run=_run_reshape_transposed,
        margin=0.02,
        fix_changes=("target_shape", "pool_size"),
    ),
    Case(
        name="subtle_mask_zero_off",
        source="reconstruction: Islam et al. 2019 'data flow' (padding not masked)",
        symptom="padded-sequence LSTM stalls",
        cause="post-padded sequences under Embedding(mask_zero=False): the last state is read after the padding",
        fix="mask_zero=True",
        codes=("undertrained",),
        run=_run_mask_zero_off,
        margin=0.02,
        fix_changes=("mask_zero",),
    ),
]
