"""Trials (issue 52): a failing fit's candidate changes are tried on its own data before the plan
tells them, on a clone, leaving the user's model, optimizer and random state as they were."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tb_trainhealth import HealthCallback
from tb_trainhealth.advice.plan import build_plan
from tb_trainhealth.contract.trial_events import TrialsEvent, TrialVerdict
from tb_trainhealth.diagnosis import diagnose_run
from tb_trainhealth.findings import RAISE_RATE
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader


def _data(seed: int = 0, n: int = 1200):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.0, size=(4, 10))
    y = rng.integers(0, 4, size=n)
    x = centers[y] + rng.normal(size=(n, 10))
    return x.astype("float32"), y.astype("int32")


def _model(rate: float) -> keras.Model:
    model = keras.Sequential(
        [keras.Input((10,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4, activation="softmax")]
    )
    model.compile(keras.optimizers.Adam(rate), "sparse_categorical_crossentropy")
    return model


# Tests give trials all the time they need (on a loaded machine the usual budget may end after the first).
TRIAL_SECONDS = 600.0


def _fit(log_dir: str, rate: float, trials: bool | float, data=None) -> tuple[keras.Model, keras.callbacks.History]:
    keras.utils.set_random_seed(0)
    x, y = _data()
    model = _model(rate)
    history = model.fit(
        data if data is not None else x,
        None if data is not None else y,
        epochs=4,
        batch_size=32,
        verbose=0,
        callbacks=[HealthCallback(log_dir, verbose=False, trials=trials)],
    )
    return model, history


def _read(log_dir: str):
    reader = SignalReader(open_logdir(log_dir))
    (group,) = reader.groups()
    diagnosis = diagnose_run(reader, group)
    return diagnosis.signals, diagnosis.findings


@pytest.fixture(scope="module")
def too_small_rate(tmp_path_factory):
    """Adam at 1e-6: stuck at the constant prediction (the learning rate is 1000x too small)."""
    root = tmp_path_factory.mktemp("trials")
    with_trials, history = _fit(str(root / "on"), 1e-6, trials=TRIAL_SECONDS)
    after = (np.random.random(), float(keras.random.uniform(())), [w.copy() for w in with_trials.get_weights()])
    without, plain = _fit(str(root / "off"), 1e-6, trials=False)
    after_plain = (np.random.random(), float(keras.random.uniform(())), without.get_weights())
    return root, history, plain, after, after_plain


def test_a_learning_rate_far_too_small_is_raised_first_because_the_trial_measured_it(too_small_rate):
    root, *_ = too_small_rate
    signals, findings = _read(str(root / "on"))
    (trials,) = signals.events_of(TrialsEvent)
    raised = [t for t in trials.trials if t.setting == "learning_rate" and t.direction == "raise"]
    assert raised and raised[0].verdict is TrialVerdict.HELPED, trials  # (the default, 1e-3, is tried first)
    assert raised[0].error < trials.unchanged_error - 0.3
    plan = build_plan(signals, findings)
    first = plan.actions[0]
    assert RAISE_RATE in first.intents and first.tried and "learning_rate=0.001" in first.code
    assert first.measured.startswith(f"Tried on {trials.samples} of your samples for {trials.steps} steps")
    assert not any(
        intent.setting == "learning_rate" and intent.direction.value == "lower"
        for a in plan.actions
        for intent in a.intents
    )


def test_trials_change_nothing_the_program_sees_after_the_fit(too_small_rate):
    _, history, plain, after, after_plain = too_small_rate
    assert history.history["loss"] == plain.history["loss"]
    assert after[:2] == after_plain[:2]  # NumPy's and Keras' random numbers drawn next: the same
    assert all(np.array_equal(a, b) for a, b in zip(after[2], after_plain[2]))  # the user's weights: untouched


def test_trials_off_record_nothing(too_small_rate):
    root, *_ = too_small_rate
    signals, _ = _read(str(root / "off"))
    assert signals.events_of(TrialsEvent) == []


def test_a_healthy_fit_is_never_tried(tmp_path):
    _fit(str(tmp_path / "ok"), 1e-3, trials=True)
    signals, findings = _read(str(tmp_path / "ok"))
    assert not [f for f in findings if f.severity.label != "info"]
    assert signals.events_of(TrialsEvent) == []


def test_data_that_cannot_be_read_twice_says_why_no_trial_ran(tmp_path):
    x, y = _data()

    def batches():
        while True:
            for i in range(0, len(x), 32):
                yield x[i : i + 32], y[i : i + 32]

    keras.utils.set_random_seed(0)
    model = _model(1e-6)
    model.fit(
        batches(), steps_per_epoch=37, epochs=4, verbose=0, callbacks=[HealthCallback(str(tmp_path), verbose=False)]
    )
    signals, findings = _read(str(tmp_path))
    (trials,) = signals.events_of(TrialsEvent)
    assert trials.trials == () and "generator" in trials.skipped
    assert build_plan(signals, findings).actions  # the rules' plan, untried


def test_a_loss_written_as_a_plain_function_is_tried_too(tmp_path):
    """Keras' clone_model recompiles a copy from the compile config, where a loss that is a Python
    function cannot be found by name: the copy is compiled with the function itself instead."""

    def my_loss(y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred)

    keras.utils.set_random_seed(0)
    x, y = _data()
    model = _model(1e-6)
    model.compile(keras.optimizers.Adam(1e-6), my_loss)
    callback = HealthCallback(str(tmp_path), verbose=False, trials=TRIAL_SECONDS)
    model.fit(x, y, epochs=4, batch_size=32, verbose=0, callbacks=[callback])
    signals, _ = _read(str(tmp_path))
    (trials,) = signals.events_of(TrialsEvent)
    assert trials.skipped is None and trials.trials, trials
    assert not [t for t in trials.trials if t.failure], trials
    assert model.compiled and model.loss is my_loss  # the user's model: as it was


def test_one_hot_targets_get_a_categorical_head_and_class_ids_a_sparse_one():
    """A new softmax head is tried with the cross-entropy its targets call for (sparse on one-hot rows
    failed: real-bug zoo dm_conv1d_relu_output_cce)."""
    from tb_trainhealth.callback.trials.candidates import candidates
    from tb_trainhealth.callback.trials.sample import Sample
    from tb_trainhealth.callback.trials.task_error import task_of

    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(4, activation="relu")])
    model.compile("adam", "categorical_crossentropy")
    x, ids = _data(n=400)
    for y, loss in (
        (np.eye(4, dtype="float32")[ids], "categorical_crossentropy"),
        (ids, "sparse_categorical_crossentropy"),
    ):
        sample = Sample(x, y, x[:100], y[:100], 32)
        (head, *_) = candidates(model, sample, task_of(y), {"worse_than_constant"}, 1e-3, False)
        assert head.loss == loss and "softmax" in head.label, head


def _signed_regression(seed: int = 0, n: int = 1200):
    """Real-valued targets in [-1, 1] from a smooth function of the inputs."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 10)).astype("float32")
    return x, np.tanh(x[:, :3].sum(axis=1) / 2).astype("float32")


def _fit_sigmoid_bce(log_dir: str, y: np.ndarray, x: np.ndarray) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((10,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile("adam", "binary_crossentropy")
    callback = HealthCallback(log_dir, verbose=False, trials=TRIAL_SECONDS)
    model.fit(x, y, epochs=4, batch_size=32, verbose=0, callbacks=[callback])


def test_real_valued_targets_under_binary_crossentropy_are_tried_as_a_regression(tmp_path):
    """Targets in [-1, 1] under a sigmoid and binary_crossentropy are a regression (real-bug zoo
    dm_bce_targets_in_minus1_1): a linear output with mse, or the targets scaled into the sigmoid's
    [0, 1], is what to change, and the trial tells which; the plan's first step is one that helped."""
    x, y = _signed_regression()
    _fit_sigmoid_bce(str(tmp_path), y, x)
    signals, findings = _read(str(tmp_path))
    assert "label_problem" in {f.code for f in findings}
    (trials,) = signals.events_of(TrialsEvent)
    labels = {t.label: t.verdict for t in trials.trials}
    assert "targets scaled to [0, 1]" in labels and any("output linear" in label for label in labels), labels
    first = build_plan(signals, findings).actions[0]
    assert first.tried and first.trial.verdict is TrialVerdict.HELPED, first


def test_class_labels_coded_one_and_two_are_not_tried(tmp_path):
    """Labels 1/2 under binary_crossentropy are wrong data, not a setting: no change of settings is
    tried on them (the fix is the labels)."""
    x, y = _signed_regression()
    _fit_sigmoid_bce(str(tmp_path), (y > 0).astype("float32") + 1, x)
    signals, findings = _read(str(tmp_path))
    assert "label_problem" in {f.code for f in findings}
    assert not signals.events_of(TrialsEvent)
