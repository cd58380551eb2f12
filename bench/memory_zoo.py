"""Memory zoo: real training runs whose host memory leaks, levels off, or stays flat, each
diagnosed by `memory_growth` (the evidence for rules/memory.py's thresholds, issue 58).

- steady leaks: a callback keeping a tensor from every batch (three slopes), one keeping every
  batch's predictions, a growing Python list, one keeping each epoch's predictions (growth at
  epoch ends), and issue 58's case (a short run that keeps 4 MiB a step until its planned end).
  Each is a warning with a projection.
- levelling-off growth: a bounded deque of recent batches' tensors, a memo filled during the
  first epoch, a tf.data `cache()` of a mapped dataset, growth that saturates. Never a warning.
- healthy long-ish runs: an MLP, a CNN, a tf.data pipeline with validation. Never a warning.

Most leaks are the first 1200 steps of a run planned for many more (the bench stops them, as
the callback's live diagnosis sees a run in progress): a leak's danger is in the long run.
Every run is a subprocess (its memory is its own) with HealthCallback recording host RSS.

Usage:
    python bench/memory_zoo.py                 # every run; prints the counts at the end
    python bench/memory_zoo.py --only deque    # runs whose name contains "deque"
    python bench/memory_zoo.py --keep /tmp/zoo # keep the logs (tensorboard --logdir /tmp/zoo)

Exit status: 0 when every steady leak is a warning and nothing else is, else 1.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

LEAK, LEVEL, HEALTHY = "steady leak", "levelling-off", "healthy"
MIB_ROWS = 256  # rows of 1024 float32: 1 MiB


def _data(n: int, features: int = 16, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("float32")


def _mlp(features: int = 16):
    import keras

    model = keras.Sequential(
        [keras.Input((features,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1, "sigmoid")]
    )
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy", metrics=["accuracy"])
    return model


def _stop_after(steps: int):
    import keras

    class StopAfter(keras.callbacks.Callback):
        """The first `steps` steps of a longer planned run (as a live diagnosis sees it)."""

        def __init__(self):
            super().__init__()
            self.seen = 0

        def on_train_batch_end(self, batch, logs=None):
            self.seen += 1
            if self.seen >= steps:
                self.model.stop_training = True

    return StopAfter()


def _keeper(mib_per_step: float, maxlen: int | None = None, keep_while=None):
    """A callback keeping a tensor of `mib_per_step` MiB from every batch (in a deque of `maxlen`,
    or only while `keep_while(step)`)."""
    import keras
    import tensorflow as tf

    rows = max(1, round(mib_per_step * MIB_ROWS))

    class KeepsBatches(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.kept, self.step = collections.deque(maxlen=maxlen), 0

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if keep_while is None or keep_while(self.step):
                # (tf.fill, not tf.random: each seeded eager random call caches a kernel and leaks too)
                self.kept.append(tf.fill([rows, 1024], float(batch)) + 1.0)

    return KeepsBatches()


def _fit(model, x, y, log_dir, callbacks=(), **kwargs):
    from tb_trainhealth import HealthCallback

    kwargs.setdefault("batch_size", 32)
    model.fit(x, y, verbose=0, callbacks=[HealthCallback(log_dir), *callbacks], **kwargs)


def leak_tensors(mib_per_step: float):
    def run(log_dir):
        x, y = _data(8000)  # 250 steps an epoch, 40 epochs planned, the first 1200 steps run
        _fit(_mlp(), x, y, log_dir, [_keeper(mib_per_step), _stop_after(1200)], epochs=40)

    return run


def leak_predictions(log_dir):
    """A callback keeping the model's hidden features of a held-out batch after every batch."""
    import keras

    x, y = _data(8000)
    probe = _data(4096, seed=1)[0]

    wide = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(64)])
    model = keras.Sequential([wide, keras.layers.Dense(1, "sigmoid")])
    model.compile("adam", "binary_crossentropy")

    class KeepsFeatures(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.history = []

        def on_train_batch_end(self, batch, logs=None):
            self.history.append(wide(probe, training=False))  # 4096 x 64 float32: 1 MiB a step

    _fit(model, x, y, log_dir, [KeepsFeatures(), _stop_after(1200)], epochs=40)


def leak_python_list(log_dir):
    """A callback appending a Python list of floats every batch (~0.6 MiB)."""
    import keras

    class KeepsRows(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.rows = []

        def on_train_batch_end(self, batch, logs=None):
            self.rows.append([float(batch) + k for k in range(20_000)])

    x, y = _data(8000)
    _fit(_mlp(), x, y, log_dir, [KeepsRows(), _stop_after(1200)], epochs=40)


def leak_per_epoch(log_dir):
    """A callback keeping 120 MiB of predictions at every epoch end (200 steps an epoch)."""
    import keras
    import tensorflow as tf

    class KeepsEpochOutputs(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.kept = []

        def on_epoch_end(self, epoch, logs=None):
            self.kept.append(tf.fill([120 * MIB_ROWS, 1024], float(epoch)) + 1.0)

    x, y = _data(6400)
    _fit(_mlp(), x, y, log_dir, [KeepsEpochOutputs(), _stop_after(1200)], epochs=300)


def leak_to_planned_end(log_dir):
    """Issue 58's case: a short run (2 epochs of 200 steps) keeping 6 MiB a step to its end
    (2.3 GiB): ten such runs fill 24 GiB."""
    x, y = _data(6400)
    _fit(_mlp(), x, y, log_dir, [_keeper(6.0)], epochs=2)


def level_deque(log_dir):
    """The last 500 batches' tensors (1 MiB each) in a bounded deque: grows, then flat."""
    x, y = _data(8000)
    _fit(_mlp(), x, y, log_dir, [_keeper(1.0, maxlen=500), _stop_after(1200)], epochs=40)


def level_saturating(log_dir):
    """Keeps a batch's tensor with a chance that decays with the step: growth that saturates."""
    import numpy as np

    rng = np.random.default_rng(0)
    x, y = _data(8000)
    keep = _keeper(2.0, keep_while=lambda step: rng.random() < math.exp(-step / 250))
    _fit(_mlp(), x, y, log_dir, [keep, _stop_after(1200)], epochs=40)


def level_epoch_memo(log_dir):
    """A memo keyed by the batch index: filled during the first epoch, reused after."""
    import keras
    import tensorflow as tf

    class Memo(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.memo = {}

        def on_train_batch_end(self, batch, logs=None):
            if batch not in self.memo:
                self.memo[batch] = tf.fill([MIB_ROWS // 2, 1024], float(batch)) + 1.0

    x, y = _data(19200)  # 600 steps an epoch
    _fit(_mlp(), x, y, log_dir, [Memo()], epochs=2)


def level_tf_data_cache(log_dir):
    """`cache()` after a map that widens each sample to 2048 floats: ~150 MiB filled in epoch 1 of 2."""
    import keras
    import tensorflow as tf

    x, y = _data(19200)
    widen = keras.layers.Dense(2048, use_bias=False)
    widen.build((None, 16))
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(lambda a, b: (tf.concat([a, tf.tanh(widen(a[None])[0])], 0), b))
        .cache()
        .batch(64)
        .prefetch(2)
    )
    _fit(_mlp(16 + 2048), ds, None, log_dir, epochs=2, batch_size=None)


def healthy_mlp(log_dir):
    x, y = _data(16000)
    _fit(_mlp(), x, y, log_dir, epochs=3, validation_split=0.1)


def healthy_cnn(log_dir):
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6400, 16, 16, 1)).astype("float32")
    y = (x[:, :8].mean(axis=(1, 2, 3)) > x[:, 8:].mean(axis=(1, 2, 3))).astype("int32")
    model = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    _fit(model, x, y, log_dir, epochs=4)


def healthy_tf_data(log_dir):
    import tensorflow as tf

    x, y = _data(20000)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=0).batch(32).prefetch(tf.data.AUTOTUNE)
    val = tf.data.Dataset.from_tensor_slices(_data(2000, seed=2)).batch(256)
    _fit(_mlp(), ds, None, log_dir, epochs=2, batch_size=None, validation_data=val)


RUNS = {
    "leak_tensors_0.25MiB": (LEAK, leak_tensors(0.25)),
    "leak_tensors_0.5MiB": (LEAK, leak_tensors(0.5)),
    "leak_tensors_1MiB": (LEAK, leak_tensors(1.0)),
    "leak_predictions": (LEAK, leak_predictions),
    "leak_python_list": (LEAK, leak_python_list),
    "leak_per_epoch": (LEAK, leak_per_epoch),
    "leak_to_planned_end": (LEAK, leak_to_planned_end),
    "level_deque": (LEVEL, level_deque),
    "level_saturating": (LEVEL, level_saturating),
    "level_epoch_memo": (LEVEL, level_epoch_memo),
    "level_tf_data_cache": (LEVEL, level_tf_data_cache),
    "healthy_mlp": (HEALTHY, healthy_mlp),
    "healthy_cnn": (HEALTHY, healthy_cnn),
    "healthy_tf_data": (HEALTHY, healthy_tf_data),
}


def _train_one(name: str, log_dir: str) -> None:
    import keras

    keras.utils.set_random_seed(0)
    RUNS[name][1](log_dir)


def _diagnose(log_dir: str):
    from tb_trainhealth import engine
    from tb_trainhealth.read.logdir import open_logdir
    from tb_trainhealth.read.reader import SignalReader

    reader = SignalReader(open_logdir(log_dir))
    return [f for group in reader.groups() for f in engine.diagnose(reader.read(group))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="")
    parser.add_argument("--keep", default=None)
    parser.add_argument("--rediagnose", action="store_true", help="diagnose the logs in --keep again, no training")
    parser.add_argument("--one", nargs=2, metavar=("NAME", "LOG_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _train_one(*args.one)
        return 0
    from tb_trainhealth.findings import Severity

    root = args.keep or tempfile.mkdtemp(prefix="memory_zoo_")
    names = [n for n in RUNS if not args.only or any(part in n for part in args.only.split(","))]
    warned: dict[str, list[str]] = collections.defaultdict(list)
    total: collections.Counter = collections.Counter()
    for name in names:
        kind = RUNS[name][0]
        log_dir = os.path.join(root, name)
        start = time.time()
        command = [sys.executable, os.path.abspath(__file__), "--one", name, log_dir]
        proc = subprocess.run(["true"] if args.rediagnose else command, capture_output=True, text=True)
        seconds = time.time() - start
        total[kind] += 1
        if proc.returncode != 0:
            print(f"{name} [{kind}]: FAILED to train ({seconds:.0f} s)\n{proc.stderr[-2000:]}")
            if kind != LEAK:
                warned[kind].append(name + " (failed)")
            continue
        findings = _diagnose(log_dir)
        growth = [f for f in findings if f.code == "memory_growth"]
        loud = [f for f in findings if f.severity >= Severity.WARNING]
        is_warned = any(f.severity >= Severity.WARNING for f in growth)
        if is_warned:
            warned[kind].append(name)
        print(
            f"{name} [{kind}] {seconds:.0f} s: "
            + ("; ".join(f"{f.severity.label} {f.title}" for f in growth) or "quiet")
        )
        for f in growth:
            print(f"    {f.detail}")
            for item in f.evidence.facts:
                print(f"      {item.label}: {item.value}")
        for f in loud:
            if f.code != "memory_growth":
                print(f"    also {f.severity.label} {f.code}: {f.title}")
    print()
    print(f"steady leaks warned {len(warned[LEAK])} of {total[LEAK]}")
    print(f"levelling-off warned {len(warned[LEVEL])} of {total[LEVEL]}" + _names(warned[LEVEL]))
    print(f"healthy warned {len(warned[HEALTHY])} of {total[HEALTHY]}" + _names(warned[HEALTHY]))
    print(f"logs: {root}")
    ok = len(warned[LEAK]) == total[LEAK] and not warned[LEVEL] and not warned[HEALTHY]
    return 0 if ok else 1


def _names(names: list[str]) -> str:
    return f" ({', '.join(names)})" if names else ""


if __name__ == "__main__":
    sys.exit(main())
