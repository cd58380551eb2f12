"""One step axis per run: Keras' epoch-indexed scalars never mix with batch steps."""

from __future__ import annotations

import subprocess
import sys

import keras
import numpy as np
import pytest
import scenarios
from conftest import diagnose_logdir, read_logdir
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from tb_trainhealth import step_axis
from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals, Series

NAN_EPOCH, NAN_BATCH = 2, 4  # 0-based: the weights go NaN after this batch of this epoch


class _PoisonWeights(keras.callbacks.Callback):
    """What a bad update does: the output layer's kernel turns NaN mid-epoch. (Not a hidden layer's:
    on some CPUs oneDNN's fused matmul + ReLU turns NaN into 0, and the loss would stay finite.)"""

    def on_train_batch_end(self, batch, logs=None):
        if self._epoch == NAN_EPOCH and batch == NAN_BATCH:
            kernel = self.model.layers[-1].kernel
            kernel.assign(np.full(kernel.shape, np.nan, dtype="float32"))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch


def keras_only_nan_run(log_dir: str, update_freq) -> None:
    keras.utils.set_random_seed(0)
    x, y = scenarios._classes(320, 8, 3, 0)
    model = scenarios._mlp(8, 3)
    model.compile(keras.optimizers.Adam(1e-3), scenarios.SPARSE_CE)
    tensorboard = keras.callbacks.TensorBoard(log_dir=log_dir, update_freq=update_freq)
    model.fit(
        x, y, epochs=5, batch_size=32, validation_split=0.25, shuffle=False, verbose=0,
        callbacks=[_PoisonWeights(), tensorboard],
    )  # fmt: skip


def _first_nonfinite_batch_step(train_dir: str) -> int:
    """Read straight from the event file: the step of the first NaN `batch_loss`."""
    accumulator = event_accumulator.EventAccumulator(train_dir, size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    points = [
        (e.step, float(np.asarray(tensor_util.make_ndarray(e.tensor_proto)))) for e in accumulator.Tensors("batch_loss")
    ]
    return min(step for step, value in points if not np.isfinite(value))


def test_epoch_points_go_to_the_last_batch_step_written_before_them():
    run = RunSignals("r", series={sig.EPOCH_LOSS: Series.of([0, 1, 2], [3.0, 2.0, 1.0])})
    batch_steps, batch_walls = np.array([1, 2, 3, 4, 5, 6]), np.array([10.0, 11, 12, 13, 14, 15])
    step_axis.place_epoch_series(run, {sig.EPOCH_LOSS: np.array([12.5, 14.5, 15.0])}, (batch_steps, batch_walls))
    assert run.series[sig.EPOCH_LOSS].steps.tolist() == [3, 5, 6] and run.axis == sig.STEP_AXIS
    assert run.series[sig.EPOCH_LOSS].values.tolist() == [3.0, 2.0, 1.0]


def test_without_batch_data_the_axis_is_epochs_counted_from_one():
    run = RunSignals("r", series={sig.EPOCH_LOSS: Series.of([0, 1, 2], [3.0, 2.0, 1.0])})
    step_axis.place_epoch_series(run, {sig.EPOCH_LOSS: np.array([1.0, 2.0, 3.0])}, None)
    assert run.axis == sig.EPOCH_AXIS and run.series[sig.EPOCH_LOSS].steps.tolist() == [1, 2, 3]
    assert run.at(3) == "epoch 3" and run.last_position == 3


def test_batch_level_keras_logs_give_the_nan_its_batch_step(tmp_path):
    """update_freq=1: the NaN finding points at the batch whose loss went NaN, not at the
    epoch index (before: "step 2", and every batch series was cut at step 2)."""
    keras_only_nan_run(str(tmp_path / "run"), update_freq=1)
    first_nan = _first_nonfinite_batch_step(str(tmp_path / "run" / "train"))
    assert first_nan > 2 * 8  # two clean epochs of 8 batches went before it

    (run,) = read_logdir(str(tmp_path)).values()
    assert run.axis == sig.STEP_AXIS
    epochs = run.series[sig.EPOCH_LOSS]
    assert len(epochs) == 5 and epochs.steps[0] > 1 and (np.diff(epochs.steps) > 0).all()
    (finding,) = [f for f in diagnose_logdir(str(tmp_path))["run"] if f.code == "nonfinite"]
    assert finding.step == first_nan and finding.epoch is None
    assert f"step {first_nan}" in finding.title


def test_epoch_level_keras_logs_say_epoch_in_text_json_and_cli(tmp_path):
    """update_freq="epoch" (Keras' default): positions are epochs, said as such everywhere."""
    keras_only_nan_run(str(tmp_path / "run"), update_freq="epoch")
    (run,) = read_logdir(str(tmp_path)).values()
    assert run.axis == sig.EPOCH_AXIS and run.series[sig.EPOCH_LOSS].steps.tolist() == [1, 2, 3, 4, 5]

    (finding,) = [f for f in diagnose_logdir(str(tmp_path))["run"] if f.code == "nonfinite"]
    assert finding.step is None and finding.epoch == NAN_EPOCH + 1  # Keras prints "Epoch 3/5"
    assert "epoch 3" in finding.title and "step" not in finding.title
    assert finding.to_dict()["epoch"] == 3 and finding.to_dict()["step"] is None

    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "nonfinite @ epoch 3:" in proc.stdout, proc.stdout


@pytest.mark.parametrize("update_freq", [1, "epoch"])
def test_a_healthy_keras_only_run_stays_quiet_on_either_axis(tmp_path, update_freq):
    keras.utils.set_random_seed(1)
    x, y = scenarios._classes(600, 8, 3, 1)
    model = scenarios._mlp(8, 3)
    model.compile(keras.optimizers.Adam(3e-3), scenarios.SPARSE_CE)
    tensorboard = keras.callbacks.TensorBoard(log_dir=str(tmp_path / "run"), update_freq=update_freq)
    model.fit(x, y, epochs=12, batch_size=32, validation_split=0.25, verbose=0, callbacks=[tensorboard])
    findings = diagnose_logdir(str(tmp_path))["run"]
    assert [f.code for f in findings if f.severity > 0] == []
