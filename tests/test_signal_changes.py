"""`compare`'s signal_changes: what the health signals say changed where no setting does. A custom
layer with a constant no config records (a real bug's shape: a scale factor in a preprocessing layer)
against the same model with the constant right, real training; seed twins and in-memory runs for
the thresholds."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from tb_trainhealth import HealthCallback
from tb_trainhealth.compare.comparison import CODE
from tb_trainhealth.compare.runs import compare_directories
from tb_trainhealth.compare.signal_changes import GRADIENT_DECADES, signal_changes
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import ActivationsEvent, LayerActivations, Verdict
from tb_trainhealth.contract.run_info import LayerInfo
from tb_trainhealth.signals import LayerSeries, RunSignals

# The custom layer reads its factor from here, not from its config: no recorded setting sees it.
HIDDEN = {"factor": 1.0}


class Rescale(keras.layers.Layer):
    def call(self, inputs):
        return inputs * HIDDEN["factor"]


def _train(log_dir: str, factor: float, seed: int = 0) -> None:
    HIDDEN["factor"] = factor
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1200, 12)).astype("float32")
    y = np.argmax(np.tanh(x @ rng.normal(size=(12, 8))) @ rng.normal(size=(8, 3)), axis=1)
    model = keras.Sequential(
        [
            keras.Input((12,)),
            keras.layers.Dense(32, activation="relu", name="hidden"),
            Rescale(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=6, batch_size=32, validation_split=0.25, verbose=0,
              callbacks=[HealthCallback(log_dir, verbose=False)])  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("signals")
    paths = {name: str(root / name) for name in ("good", "twin", "hidden_bug")}
    _train(paths["good"], 1.0)
    _train(paths["twin"], 1.0, seed=1)
    _train(paths["hidden_bug"], 1e-4)
    return paths


def test_a_bug_no_setting_records_is_named_by_the_layer_its_gradients_left(runs):
    comparison = compare_directories(runs["hidden_bug"], runs["good"])
    assert comparison.verdict is Verdict.WORSE
    lead = comparison.signal_changes[0]
    assert (lead.signal, lead.layer) == ("gradient norm", "hidden") and lead.run < lead.baseline / 100
    worse = next(f for f in comparison.findings if f.code == CODE)
    assert "The health signals show where: hidden: gradient norm" in worse.detail
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-m", "tb_trainhealth.cli", "compare", runs["hidden_bug"], runs["good"], "--json"],
            capture_output=True, text=True, timeout=180,
        ).stdout
    )  # fmt: skip
    assert shown["signal_changes"][0] == {**dataclasses.asdict(lead), "text": lead.text()}
    assert shown["signal_changes"][0]["text"].startswith("hidden: gradient norm ")


def test_a_seed_twin_moves_no_signal(runs):
    assert compare_directories(runs["twin"], runs["good"]).signal_changes == []


def _run(name: str, grads: list[float], dead: list[float | None], layers=("dense", "dense_1")) -> RunSignals:
    steps = np.arange(1, 51)
    rows = np.tile(grads, (len(steps), 1)) * np.exp(np.random.default_rng(0).normal(0, 0.3, (len(steps), len(grads))))
    return RunSignals(
        name,
        layer_series={sig.LAYER_GRAD_NORM: LayerSeries.of(steps, rows, len(grads))},
        layers=[LayerInfo(layer, 100) for layer in layers],
        events=[ActivationsEvent(50, {layer: LayerActivations("relu", 8, dead=d) for layer, d in zip(layers, dead)})],
    )


def test_layers_match_by_position_across_keras_numbering_and_moves_seeds_make_are_not_changes():
    baseline = _run("b", [1.0, 1.0], [0.0, 0.1])
    numbered = ("dense_4", "dense_5")
    assert signal_changes(_run("a", [1.0, 30.0], [0.2, 0.45], numbered), baseline) == []  # 30x, 0.35 more dead
    moved = signal_changes(_run("a", [10**GRADIENT_DECADES * 1.5, 1.0], [0.0, 0.95], numbered), baseline)
    assert [(c.signal, c.layer) for c in moved] == [("dead units", "dense_5"), ("gradient norm", "dense_4")]
    assert moved[0].text() == "dense_5: 95% of its units dead (baseline 10%)"
    # A layer never measured in one run is no change.
    assert signal_changes(_run("a", [1.0, 1.0], [None, 1.0]), _run("b", [1.0, 1.0], [0.0, None])) == []
