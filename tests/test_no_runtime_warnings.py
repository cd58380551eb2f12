"""The project's own code raises no RuntimeWarning (overflow, invalid sqrt...) on broken runs:
the user sees our diagnoses, not our numerical noise."""

from __future__ import annotations

import contextlib
import io
import os
import warnings

import keras
import numpy as np
import scenarios

import tb_trainhealth
from tb_trainhealth.cli import main as cli_main

PACKAGE_DIR = os.path.dirname(os.path.abspath(tb_trainhealth.__file__))
# Runs whose values reach float32's limits (overflowing gradients, NaN from the start) or whose
# labels contradict their loss: where numerical warnings come from.
BROKEN = (scenarios.exploding_gradients, scenarios.rnn_exploding_to_nan, scenarios.nan_input)


def _three_classes_through_one_sigmoid(log_dir: str) -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=512)
    x = (rng.normal(size=(512, 8)) + y[:, None]).astype("float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, "relu"), keras.layers.Dense(1, "sigmoid")])
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    scenarios._fit(model, x, y.astype("float32"), log_dir, epochs=3)


def _one_inf_input(log_dir: str) -> None:
    """Inf (not NaN: NaN arithmetic warns of nothing, inf - inf does) in one input value."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    x[100, 3] = np.inf
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    scenarios._fit(model, x, x.sum(axis=1), log_dir, epochs=1)


def _ours(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        f"{os.path.relpath(w.filename, PACKAGE_DIR)}:{w.lineno}: {w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, RuntimeWarning) and os.path.abspath(w.filename).startswith(PACKAGE_DIR)
    ]


def test_broken_runs_raise_no_runtime_warning_from_the_package(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for train in BROKEN:
            train(str(tmp_path / train.__name__))
        _three_classes_through_one_sigmoid(str(tmp_path / "three_classes_one_sigmoid"))
        _one_inf_input(str(tmp_path / "one_inf_input"))
        with contextlib.redirect_stdout(io.StringIO()) as out:
            status = cli_main(["diagnose", str(tmp_path), "--json"])
    assert status in (0, 1), out.getvalue()[-2000:]
    assert '"three_classes_one_sigmoid"' in out.getvalue() and '"critical"' in out.getvalue()
    assert _ours(caught) == []
