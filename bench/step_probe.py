"""Cost of the in-step probe alone (the gradient/weight reductions inside the compiled step,
plus reading the row buffer back every 32 steps), under plain execution, XLA or
MirroredStrategy: Keras' own train function of two identical models, one with the probe
installed, in alternating blocks of 50 steps on one pipeline (machine noise hits both alike), in a
new random order each round (a fixed order biased the model run second by ~1%).
Prints the median per-step times and the median of the per-round ratios; a third model carries the
probe without the first-NaN replay (`localize_nan=False`), so the replay's share shows apart.
Usage: python bench/step_probe.py [--rounds 10] [--jit] [--mirrored] [--mlp | --deep] [--tf-keras]
(--mlp: bench/overhead.py's tiny MLP; --deep: its 41-layer MLP, where the costs per variable
show; --tf-keras: legacy Keras 2 and its probe).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import tensorflow as tf
from overhead import BATCH, TF_KERAS, keras, model_name, small_cnn, strategy_for  # (overhead picks the Keras)

from tb_trainhealth.callback.step.step_probe import StepProbe
from tb_trainhealth.callback.step.tf_keras_step_probe import TfKerasStepProbe

STEPS_PER_BLOCK = 50
READ_EVERY = 32


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--jit", action="store_true")
    parser.add_argument("--mirrored", action="store_true")
    parser.add_argument("--mlp", action="store_true")
    parser.add_argument("--deep", action="store_true")
    parser.add_argument("--tf-keras", action="store_true")
    args = parser.parse_args()
    strategy = strategy_for(args.mirrored)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * 100, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, BATCH * 100).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(tf.data.AUTOTUNE)
    iterator = iter(strategy.experimental_distribute_dataset(dataset) if args.mirrored else dataset)
    models, probes = {}, {}
    for name in ("plain step", "step with probe", "without replay"):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            models[name] = small_cnn(args.jit, args.mlp, args.deep)
        models[name].fit(x[:BATCH], y[:BATCH], verbose=0)  # builds what Keras builds before a step
        if name != "plain step":
            probe_class = TfKerasStepProbe if TF_KERAS else StepProbe
            probes[name] = probe_class(models[name], capacity=2 * READ_EVERY, localize_nan=name == "step with probe")
            probes[name].install()
        models[name].make_train_function()
        models[name].train_function(iterator)  # trace before timing
    per_step: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name in rng.permutation(list(models)):
            model = models[name]
            start = time.perf_counter()
            for step in range(1, STEPS_PER_BLOCK + 1):
                logs = model.train_function(iterator)
                if name in probes and step % READ_EVERY == 0:
                    probes[name].read_rows(0)
            float(logs["loss"])  # wait for the last step
            per_step[name].append((time.perf_counter() - start) / STEPS_PER_BLOCK * 1000)
    mode = " ".join(m for m, on in (("jit_compile=True", args.jit), ("MirroredStrategy x2", args.mirrored)) if on)
    keras_name = "tf_keras" if TF_KERAS else "Keras 3"
    print(
        f"{model_name(args)} ({keras_name}) {mode}, batch {BATCH}, {args.rounds} rounds x {STEPS_PER_BLOCK} steps per model"
    )
    for name, values in per_step.items():
        print(f"{name:16} {np.median(values):7.3f} ms/step")
    for name in ("step with probe", "without replay"):
        ratios = np.array(per_step[name]) / np.array(per_step["plain step"])
        q25, q50, q75 = np.percentile(ratios, [25, 50, 75])
        print(f"{name} / plain step: ratio {q50:.3f}x (IQR {q25:.3f}-{q75:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
