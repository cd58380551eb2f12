"""What the callback reports while training, and when: new findings at once, worse ones again."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth import HealthCallback
from tb_trainhealth.findings import Severity


def test_a_pipeline_lint_finding_is_reported_in_the_first_steps_not_when_training_ends(tmp_path):
    """A tf.data mistake found at train start is worth a diagnosis at once, like a model lint."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    # A loss of the user's own: no label statistics (a lint event) to make the first diagnosis urgent.
    model.compile("adam", lambda y, logits: keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
    x = np.random.default_rng(0).normal(size=(2048, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).shuffle(64).prefetch(2)  # shuffles batches
    reported_at = []
    health = HealthCallback(
        str(tmp_path / "r"),
        diagnose_every=10**6,
        on_finding=lambda f: reported_at.append((f.code, int(model.optimizer.iterations.numpy()))),
    )
    model.fit(dataset, epochs=3, shuffle=False, verbose=0, callbacks=[health])
    (step,) = [step for code, step in reported_at if code == "input_pipeline_config"]
    assert step < 32  # in the first steps (epochs of 64), not at an epoch end nor when training ends


class GradientAmplifier(keras.layers.Layer):
    """Identity forward; the backward pass multiplies the gradient by `gain` (a variable
    the test raises each epoch): the gradients below it grow while the loss stays put."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.gain = tf.Variable(1.0, trainable=False)

    def call(self, x):
        gain = self.gain

        @tf.custom_gradient
        def amplify(value):
            return tf.identity(value), lambda upstream: upstream * gain

        return amplify(x)


def test_a_warning_that_turns_critical_is_reported_again_and_stops_training(tmp_path, monkeypatch):
    from tb_trainhealth.callback import live_diagnosis

    monkeypatch.setattr(live_diagnosis, "DIAGNOSIS_TIME_SHARE", 1.0)  # diagnose at every epoch end
    keras.utils.set_random_seed(0)
    amplifier = GradientAmplifier()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="first"), amplifier, keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(1e-12), "mse")  # the weights barely move: only the gain changes
    # Each epoch's rows are read back before the diagnosis at its end judges them.
    x = np.random.default_rng(0).normal(size=(8192, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    raise_gain = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: amplifier.gain.assign(amplifier.gain * 10.0)
    )
    seen = []
    health = HealthCallback(str(tmp_path / "r"), diagnose_every=1, stop_on="critical", on_finding=seen.append)
    history = model.fit(x, y, batch_size=32, epochs=15, verbose=0, callbacks=[raise_gain, health])
    exploding = [f.severity for f in seen if f.code == "exploding_gradients"]
    assert exploding == [Severity.WARNING, Severity.CRITICAL]
    assert len(history.epoch) < 15  # stop_on="critical" stopped it when the warning turned critical


def test_a_diagnosis_at_an_epoch_end_judges_every_step_of_that_epoch(tmp_path, monkeypatch):
    """Rows are read back every few hundred steps, epochs may end more often: an epoch end whose
    diagnosis is due reads them first, so it never judges a run without its last steps."""
    from tb_trainhealth.callback import live_diagnosis
    from tb_trainhealth.contract import series as sig

    monkeypatch.setattr(live_diagnosis, "DIAGNOSIS_TIME_SHARE", 1.0)  # due at every epoch end
    judged = []
    diagnose = live_diagnosis.LiveDiagnosis.now

    def now(self, recording, step, final):
        norms = recording.signals().get(sig.GRAD_NORM)
        judged.append((step, int(norms.steps[-1]) if norms is not None else None))
        return diagnose(self, recording, step, final)

    monkeypatch.setattr(live_diagnosis.LiveDiagnosis, "now", now)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(1024, 4)).astype("float32")
    health = HealthCallback(str(tmp_path / "r"), diagnose_every=1, verbose=False)
    model.fit(x, x.sum(axis=1), batch_size=32, epochs=4, verbose=0, callbacks=[health])  # 32 steps an epoch
    at_epoch_ends = [(step, last) for step, last in judged if step in (32, 64, 96, 128)]
    assert len(at_epoch_ends) >= 3, judged
    assert all(step == last for step, last in at_epoch_ends), judged
