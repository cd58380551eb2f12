"""Adding HealthCallback changes nothing about the training it watches (issue 53, part 1): a few of
`bench/transparency.py`'s programs, each run plain and with the callback, same seed; and where the
callback cannot measure without changing the fit, it says so (`part_not_recorded`)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from conftest import diagnose_logdir

from bench import transparency
from tb_trainhealth import HealthCallback
from tb_trainhealth.contract.vocab import STALE_TRAIN_STEP
from tb_trainhealth.findings import Severity


@pytest.mark.parametrize(
    "program",
    [
        # The crash: Keras keeps its traced step (head only); a new trace would hand the
        # optimizer the base's variables ("Unknown variable ... originally built with").
        "unfreeze_nested_without_compile",
        "unfreeze_nested_plain_first",
        # The callback on the first fit only: the plain fit after the flip must reuse a step traced
        # as Keras' first one was (the probe's untraced stand-in crashed it with "Unknown variable").
        "unfreeze_callback_first_then_plain",
        # Freezing without compile: Keras goes on training the frozen layer; a new trace would not.
        "freeze_without_compile",
    ],
)
def test_the_callback_changes_neither_losses_nor_crashes(program):
    result = transparency.compare(program, transparency._seeded(transparency.CHANGES[program]))
    assert result["differences"] == [], result
    assert result["crash_plain"] is None and result["epochs"] > 0


def test_a_fit_whose_step_was_traced_before_trainable_changed_says_what_it_left_out(tmp_path):
    """Fitted plain with the base frozen, unfrozen without compile, fitted with the callback: the
    callback keeps Keras' traced step (no probe) and records why, instead of crashing the fit."""
    transparency._keras()
    keras.utils.set_random_seed(0)
    model = transparency._nested()
    transparency._set_base_trainable(model, False)
    transparency._compile(model)
    x, y = transparency._data()
    model.fit(x, y, epochs=1, verbose=0)
    transparency._set_base_trainable(model, True)
    history = model.fit(x, y, epochs=2, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"), verbose=False)])
    assert np.isfinite(history.history["loss"]).all()
    findings = diagnose_logdir(str(tmp_path))["run"]
    left_out = [f for f in findings if f.code == "part_not_recorded"]
    assert left_out and STALE_TRAIN_STEP in left_out[0].detail, [f.title for f in findings]
    assert "training_crash" not in {f.code for f in findings}
    (stale,) = [f for f in findings if f.code == "model_config" and f.severity == Severity.WARNING]
    assert "Trainable changed without compile" in stale.title and "compile" in stale.fixes[0].code


def _ragged_fit(log_dir: str | None) -> list[np.ndarray]:
    """819 rows in batches of 32: the last batch holds 19, where a mean is no multiply by a power of two."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(819, 20, 4)).astype("float32")
    y = np.tanh(x.sum(axis=(1, 2)) / 10).astype("float32")
    model = keras.Sequential([keras.Input((20, 4)), keras.layers.SimpleRNN(16), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(3e-3, clipnorm=1.0), "mse")
    callbacks = [] if log_dir is None else [HealthCallback(log_dir, verbose=False)]
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=callbacks)
    return model.get_weights()


def test_a_ragged_last_batch_trains_the_same_bits_with_the_input_probe(tmp_path):
    """The input probe hands Keras its batches from the host, which traced Keras' one-step function
    for the first batch's shape (then relaxed for the smaller last one): the demo's rnn_clipped
    ended with other last bits than without the callback. Traced for the dataset's spec: the same."""
    plain, watched = _ragged_fit(None), _ragged_fit(str(tmp_path / "run"))
    assert all(np.array_equal(a, b) for a, b in zip(plain, watched))
    assert diagnose_logdir(str(tmp_path))["run"] is not None
