"""Real tiny runs for the Health tab's comparison (route answers and the browser): one MLP trained
with HealthCallback several ways, one after another, so each run's last write is later than the one
before (what "the best earlier run" goes by)."""

from __future__ import annotations

import os

import numpy as np

SAMPLES = 1200
GOOD_RATE = 3e-3
# Trained in this order. "wider" is another model (a Dropout layer more), "slow_lr" the same model
# with a 10x smaller rate, "base" the good one, "tiny_lr" the same with the rate 1000x smaller and an
# EarlyStopping that never stops: settings that changed too, named before "learning_rate" in any
# alphabetical order, so that the learning rate comes first only when ranked as the likely cause. It is
# compared with "base" at the end of its fit (HealthCallback(baseline=...)): its worse_than_baseline finding.
# "small_lr" (the rate 30x smaller) is compared with "base" too; worse is all it is (no plateau leads it).
RUNS = {
    "wider": {"dropout": True},
    "slow_lr": {"learning_rate": GOOD_RATE / 10},
    "base": {},
    "tiny_lr": {"learning_rate": GOOD_RATE / 1000, "idle_early_stopping": True, "baseline": "base"},
    "small_lr": {"learning_rate": GOOD_RATE / 30, "baseline": "base"},
}


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 12)).astype("float32")
    return x, np.argmax(np.tanh(x @ rng.normal(size=(12, 8))) @ rng.normal(size=(8, 3)), axis=1)


def train_mlp(
    log_dir: str,
    learning_rate: float = GOOD_RATE,
    dropout: bool = False,
    idle_early_stopping: bool = False,
    baseline: str | None = None,
) -> None:
    import keras

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(0)
    x, y = _data()
    layers = [keras.Input((12,)), keras.layers.Dense(32, activation="relu")]
    layers += [keras.layers.Dropout(0.1)] if dropout else []
    model = keras.Sequential([*layers, keras.layers.Dense(3, activation="softmax")])
    early_stopping = [keras.callbacks.EarlyStopping(patience=100)] if idle_early_stopping else []
    model.compile(keras.optimizers.Adam(learning_rate), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(
        x, y, epochs=6, batch_size=32, validation_split=0.25, verbose=0,
        callbacks=[HealthCallback(log_dir, baseline=baseline, verbose=False), *early_stopping],
    )  # fmt: skip


def write_runs(root: str, names: tuple[str, ...] = tuple(RUNS)) -> None:
    """Trains the named runs of RUNS under `root`, in RUNS' order."""
    for name in names:
        settings = dict(RUNS[name])
        if "baseline" in settings:
            settings["baseline"] = os.path.join(root, settings["baseline"])
        train_mlp(os.path.join(root, name), **settings)
