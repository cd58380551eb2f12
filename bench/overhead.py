"""Cost of HealthCallback per training step, measured side by side in one process.

Configurations are interleaved round by round, in a new random order each round (so machine
noise hits all alike):
no callback, HealthCallback at defaults, HealthCallback without the input-wait probe
(so the probe's own cost is the ratio of those two), and keras.callbacks.TensorBoard(update_freq=1)
for reference. Each fit's first epoch (tracing) is dropped; the time per step is the total
of the other epochs over their steps, so costs paid only now and then (the activation
probe, a diagnosis, a read-back) count at their real rate. Each round gives a ratio
(config / no callback, adjacent in time); we print the median ratio over rounds and
its inter-quartile range. Usage: python bench/overhead.py [--rounds 10] [--jit] [--mirrored] [--mlp] [--tf-keras]
(--jit: model.compile(jit_compile=True); --mirrored: MirroredStrategy over 2 logical CPUs;
--mlp: a tiny MLP with ~1 ms steps instead of the small CNN; --deep: a 41-layer MLP, where the
costs per variable weigh; --tf-keras: legacy Keras 2).

`--fixed` measures the other cost, the one paid once per `fit` (tracing, set-up): a short
fit (one epoch) timed whole, for a fresh model per fit and for a model that has fitted
before (a new callback each time, as in a hyperparameter sweep), each config beside the
same fit without callbacks in the same round; printed as the median extra ms per fit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# --tf-keras: the same benchmark on legacy Keras 2 (tf_keras), chosen before TensorFlow starts.
TF_KERAS = "--tf-keras" in sys.argv
if TF_KERAS:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np
import tensorflow as tf

if TF_KERAS:
    import tf_keras as keras
else:
    import keras

from tb_trainhealth import HealthCallback

BATCH = 64
SAMPLES = 64 * 40
DEEP_LAYERS = 40  # hidden layers of the `--deep` MLP


class EpochTimer:
    """Times each epoch from its first batch to the end of its last callback.

    Keras builds each epoch's input iterator between `on_epoch_begin` and the first batch:
    ~9 ms, but ~115 ms in one epoch of four on this machine, with or without any callback,
    which would drown a 5% effect in 200 ms epochs. So the clock starts at the first batch:
    `first` goes first in the callback list (every callback's batch hooks are timed), `last`
    goes last (every callback's epoch-end work is timed)."""

    def __init__(self):
        self.seconds: list[float] = []
        timer = self

        class First(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 0:
                    timer._start = time.perf_counter()

        class Last(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                timer.seconds.append(time.perf_counter() - timer._start)

        self.first, self.last = First(), Last()


def small_cnn(jit: bool = False, mlp: bool = False, deep: bool = False) -> keras.Model:
    """A small CNN (~5 ms steps here), or with `mlp` a tiny MLP (~1 ms steps: the callback's
    fixed costs per step weigh the most), or with `deep` a 41-layer MLP (~3 ms steps: the costs
    per variable weigh the most)."""
    if deep:
        layers = [*(keras.layers.Dense(32, activation="relu") for _ in range(DEEP_LAYERS)), keras.layers.Dense(10)]
        mlp = True
    elif mlp:
        layers = [keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)]
    else:
        layers = [
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    model = keras.Sequential([keras.Input((28, 28, 1)), *([keras.layers.Flatten()] if mlp else []), *layers])
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"], jit_compile=jit
    )
    return model


def model_name(args: argparse.Namespace) -> str:
    return "41-layer MLP" if args.deep else "tiny MLP" if args.mlp else "small CNN"


def strategy_for(mirrored: bool) -> tf.distribute.Strategy:
    """The default strategy, or MirroredStrategy over 2 logical CPUs (before any op runs)."""
    if not mirrored:
        return tf.distribute.get_strategy()
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def fixed_costs(args, strategy, x, y, root: str) -> None:
    """Extra wall time of one short fit (one epoch) over the same fit without callbacks."""
    configs = {
        "no callback": lambda tag: [],
        "HealthCallback": lambda tag: [HealthCallback(os.path.join(root, f"fixed-health-{tag}"), verbose=False)],
        "TensorBoard(update_freq=1)": lambda tag: [
            keras.callbacks.TensorBoard(os.path.join(root, f"fixed-tb-{tag}"), update_freq=1)
        ],
    }
    seconds: dict[tuple[str, str], list[float]] = {}
    for round_index in range(args.rounds):
        for name, make in configs.items():
            keras.utils.set_random_seed(round_index)
            with strategy.scope():
                model = small_cnn(args.jit, args.mlp, args.deep)
            for kind in ("fresh model", "model fitted before"):
                start = time.perf_counter()
                model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=make(f"{round_index}-{kind[:5]}"))
                seconds.setdefault((name, kind), []).append(time.perf_counter() - start)
    steps = SAMPLES // BATCH
    keras_name = "tf_keras" if args.tf_keras else "Keras 3"
    print(f"{model_name(args)} ({keras_name}): one epoch of {steps} steps per fit, {args.rounds} rounds")
    for kind in ("fresh model", "model fitted before"):
        base = np.array(seconds[("no callback", kind)])
        print(f"  {kind}: no callback {np.median(base) * 1000:.0f} ms per fit")
        for name in list(configs)[1:]:
            extra = (np.array(seconds[(name, kind)]) - base) * 1000
            q25, q50, q75 = np.percentile(extra, [25, 50, 75])
            print(f"    {name:32} +{q50:6.0f} ms per fit  (IQR {q25:.0f} to {q75:.0f})")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=10, help="timed epochs per fit (after one warm-up epoch)")
    parser.add_argument("--jit", action="store_true", help="compile the step with XLA")
    parser.add_argument("--mirrored", action="store_true", help="MirroredStrategy over 2 logical CPUs")
    parser.add_argument("--mlp", action="store_true", help="a tiny MLP (~1 ms steps) instead of the small CNN")
    parser.add_argument("--deep", action="store_true", help="a 41-layer MLP (~3 ms steps) instead of the small CNN")
    parser.add_argument("--fixed", action="store_true", help="the cost per fit (tracing, set-up) instead of per step")
    parser.add_argument("--tf-keras", action="store_true", help="legacy Keras 2 (tf_keras) instead of Keras 3")
    args = parser.parse_args()
    strategy = strategy_for(args.mirrored)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, SAMPLES).astype("int32")
    root = tempfile.mkdtemp()
    if args.fixed:
        fixed_costs(args, strategy, x, y, root)
        return 0
    configs = {
        "no callback": lambda i: [],
        "HealthCallback": lambda i: [HealthCallback(os.path.join(root, f"health{i}"), verbose=False)],
        "HealthCallback(measure_input=False)": lambda i: [
            HealthCallback(os.path.join(root, f"noinput{i}"), verbose=False, measure_input=False)
        ],
        "TensorBoard(update_freq=1)": lambda i: [
            keras.callbacks.TensorBoard(os.path.join(root, f"tb{i}"), update_freq=1)
        ],
    }
    per_step: dict[str, list[float]] = {name: [] for name in configs}
    for round_index in range(args.rounds):
        for name in rng.permutation(list(configs)):  # (in a fixed order each config has one place in the round)
            make = configs[name]
            keras.utils.set_random_seed(round_index)
            timer = EpochTimer()
            with strategy.scope():
                model = small_cnn(args.jit, args.mlp, args.deep)
            callbacks = [timer.first, *make(round_index), timer.last]
            model.fit(x, y, batch_size=BATCH, epochs=1 + args.epochs, verbose=0, callbacks=callbacks)
            per_step[name].append(float(np.sum(timer.seconds[1:])) / (args.epochs * (SAMPLES // BATCH)) * 1000)
    base = np.array(per_step["no callback"])
    flags = (("tf_keras", args.tf_keras), ("jit_compile=True", args.jit), ("MirroredStrategy x2", args.mirrored))
    mode = " ".join(m for m, on in flags if on)
    print(
        f"{model_name(args)} {mode}, batch {BATCH}, {SAMPLES // BATCH} steps/epoch, {args.rounds} rounds x {args.epochs} epochs"
    )
    for name, values in per_step.items():
        ratios = np.array(values) / base
        q25, q50, q75 = np.percentile(ratios, [25, 50, 75])
        print(f"{name:36} {np.median(values):7.3f} ms/step  ratio {q50:.3f}x  (IQR {q25:.3f}-{q75:.3f})")
    probe = np.array(per_step["HealthCallback"]) / np.array(per_step["HealthCallback(measure_input=False)"])
    q25, q50, q75 = np.percentile(probe, [25, 50, 75])
    print(f"{'input-wait probe alone':36} {'':7} {'':8} ratio {q50:.3f}x  (IQR {q25:.3f}-{q75:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
