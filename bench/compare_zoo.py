"""Run pairs for `tb-trainhealth compare`: the evidence for its noise model and its culprit ranking.

Four healthy set-ups (MLP and CNN classifiers, a GRU sequence classifier, an MLP regression), each
trained over seeds (the noise model: how far two seeds of one set-up differ), then once per seed
with one setting changed: changes that hurt (a learning rate 1000x off, Adadelta's default rate,
linear activations, zero initializers, dropout 0.9, L2 of 1, the whole data set as one batch, one
epoch, EarlyStopping that stops at once, 60% of the labels wrong, 3% of the data, a class lost by
a filter) and changes that do not (another seed, Nadam, batch 64, lr x2, mild dropout, a
sensible EarlyStopping, bias removed before BatchNorm). Each changed run is compared with the
baseline of the OTHER seed, as a user compares with an earlier run.

A harmful change counts only where it did hurt, in numbers, on both seeds (accuracy 10+ points
lower, or a loss 2x higher); the others are listed. Prints the seed-to-seed gaps (the noise model),
then the rates: harmful changes named first or second with verdict "worse", and benign changes
called "worse". Usage: python bench/compare_zoo.py [--seeds 2] [--only mlp] [--keep DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import itertools
import math
import os
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

HIDDEN = 64
SAMPLES = 3000
VALIDATION_SPLIT = 0.2
NOISE_SEEDS = 4  # baselines trained for the noise model (the pairs use the first --seeds of them)


@dataclasses.dataclass(frozen=True)
class Setup:
    name: str
    classifier: bool
    epochs: int
    batch_size: int = 32
    learning_rate: float = 1e-3


SETUPS = (
    Setup("mlp", classifier=True, epochs=12),
    Setup("cnn", classifier=True, epochs=10),
    Setup("gru", classifier=True, epochs=10, learning_rate=3e-3),
    Setup("regression", classifier=False, epochs=15),
)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One setting changed; `culprits`: the setting names (or their last part) that name it."""

    name: str
    harmful: bool
    culprits: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # set-ups it applies to (empty: all)


VARIANTS = (
    Variant("lr_tiny", True, ("learning_rate",)),
    Variant("lr_huge", True, ("learning_rate",)),
    Variant("adadelta", True, ("optimizer",)),
    Variant("linear", True, ("activation",), only=("mlp", "regression", "cnn")),
    Variant("zeros_init", True, ("kernel_initializer",), only=("mlp", "regression", "cnn")),
    Variant("dropout_09", True, ("rate",), only=("mlp", "regression")),
    Variant("l2_heavy", True, ("kernel_regularizer",), only=("mlp", "regression", "cnn")),
    Variant("full_batch", True, ("batch_size", "steps_per_epoch")),
    Variant("one_epoch", True, ("epochs",)),
    Variant("stop_at_once", True, ("patience", "min_delta", "EarlyStopping.patience", "callbacks")),
    Variant("noisy_labels", True, ("train_labels", "label_distribution")),
    Variant("tiny_subset", True, ("train_samples", "train_inputs", "train_labels")),
    Variant(
        "class_dropped",
        True,
        ("label_distribution", "train_samples", "train_labels", "train_inputs"),
        only=("mlp", "cnn", "gru"),
    ),
    Variant("seed", False),
    Variant("nadam", False),
    Variant("batch_64", False),
    Variant("lr_x2", False),
    Variant("dropout_02", False, only=("mlp", "regression")),
    Variant("early_stopping", False),
    Variant("no_bias_before_bn", False, only=("cnn",)),
)


def make_data(setup: Setup) -> tuple[Any, Any]:
    """A fixed, learnable, nonlinear task per set-up (the same data for every seed)."""
    import numpy as np

    rng = np.random.default_rng(1234)
    if setup.name == "cnn":
        x = rng.normal(0, 0.5, size=(SAMPLES, 16, 16, 1)).astype("float32")
        y = rng.integers(0, 4, SAMPLES)
        for i, label in enumerate(y):  # a bright 4x4 blob in the label's quadrant
            row, col = (label // 2) * 8 + rng.integers(0, 4), (label % 2) * 8 + rng.integers(0, 4)
            x[i, row : row + 4, col : col + 4, 0] += 1.5
        return x, y
    if setup.name == "gru":
        x = rng.normal(size=(SAMPLES, 20, 2)).astype("float32")
        # The sign of a sum over time. (An interaction of two sums was tried first: whether a GRU
        # learned it in 10 epochs depended on the seed, 2 of 4 seeds at chance: no baseline.)
        y = (x[:, :, 0].sum(1) > 0).astype("int64")
        return x, y
    x = rng.normal(size=(SAMPLES, 20)).astype("float32")
    w1, w2 = rng.normal(size=(20, 16)), rng.normal(size=(16, 4))
    hidden = np.tanh(x @ w1)  # saturating: far from linear
    if setup.classifier:
        return x, np.argmax(hidden @ w2 + 0.3 * rng.normal(size=(SAMPLES, 4)), 1)
    return x, (np.sin(hidden @ w2[:, 0] * 2) + (hidden @ w2[:, 1]) ** 2 + 0.1 * rng.normal(size=SAMPLES)).astype(
        "float32"
    )


def train(setup: Setup, variant: str, seed: int, log_dir: str) -> None:
    import keras
    import numpy as np

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(seed)
    x, y = make_data(setup)
    split = int(len(x) * (1 - VALIDATION_SPLIT))
    x_train, y_train, x_val, y_val = x[:split], y[:split], x[split:], y[split:]
    if variant == "noisy_labels":
        flip = np.random.default_rng(seed).random(len(y_train)) < 0.6
        y_train = y_train.copy()
        if setup.classifier:
            y_train[flip] = np.random.default_rng(seed + 1).integers(0, int(y.max()) + 1, flip.sum())
        else:
            y_train[flip] = np.random.default_rng(seed + 1).permutation(y_train[flip])
    if variant == "class_dropped":  # a filter that lost one class of the training set
        keep = y_train != 0
        x_train, y_train = x_train[keep], y_train[keep]
    if variant == "tiny_subset":
        x_train, y_train = x_train[: len(x_train) * 3 // 100], y_train[: len(y_train) * 3 // 100]
    activation = "linear" if variant == "linear" else "relu"
    initializer = "zeros" if variant == "zeros_init" else "glorot_uniform"
    regularizer = keras.regularizers.L2(1.0) if variant == "l2_heavy" else None
    rate = {"dropout_09": 0.9, "dropout_02": 0.2}.get(variant, 0.1)
    dense = dict(activation=activation, kernel_initializer=initializer, kernel_regularizer=regularizer)
    classes = int(y.max()) + 1 if setup.classifier else 1
    head = "softmax" if setup.classifier else "linear"
    if setup.name == "cnn":
        layers = [
            keras.Input(x.shape[1:]),
            keras.layers.Conv2D(16, 3, use_bias=variant != "no_bias_before_bn", name="conv_a"),
            keras.layers.BatchNormalization(),
            keras.layers.Activation(activation),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 3, name="conv_b", **dense),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(classes, activation=head),
        ]
    elif setup.name == "gru":
        layers = [keras.Input(x.shape[1:]), keras.layers.GRU(24), keras.layers.Dense(classes, activation=head)]
    else:
        layers = [
            keras.Input(x.shape[1:]),
            keras.layers.Dense(HIDDEN, **dense),
            keras.layers.Dropout(rate),
            keras.layers.Dense(HIDDEN, **dense),
            keras.layers.Dense(classes, activation=head),
        ]
    model = keras.Sequential(layers)
    rate_scale = {"lr_tiny": 1e-3, "lr_huge": 300.0, "lr_x2": 2.0}.get(variant, 1.0)
    if variant == "adadelta":
        optimizer = keras.optimizers.Adadelta()
    elif variant == "nadam":
        optimizer = keras.optimizers.Nadam(setup.learning_rate)
    else:
        optimizer = keras.optimizers.Adam(setup.learning_rate * rate_scale)
    if setup.classifier:
        loss = keras.losses.SparseCategoricalCrossentropy()
        metrics = ["accuracy"]
    else:
        loss, metrics = "mse", []
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    callbacks: list[Any] = [HealthCallback(log_dir, verbose=False)]
    if variant == "stop_at_once":
        callbacks.append(keras.callbacks.EarlyStopping(monitor="val_loss", patience=0, min_delta=1.0))
    if variant == "early_stopping":
        callbacks.append(keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True))
    batch = {"full_batch": len(x_train), "batch_64": 64}.get(variant, setup.batch_size)
    epochs = 1 if variant == "one_epoch" else setup.epochs
    model.fit(
        x_train,
        y_train,
        batch_size=batch,
        epochs=epochs,
        validation_data=(x_val, y_val),
        verbose=0,
        callbacks=callbacks,
    )
    keras.backend.clear_session()


def _train_job(job: tuple[str, str, int, str]) -> tuple[str, str, int, float]:
    setup_name, variant, seed, log_dir = job
    setup = next(s for s in SETUPS if s.name == setup_name)
    started = time.perf_counter()
    train(setup, variant, seed, log_dir)
    return setup_name, variant, seed, time.perf_counter() - started


def curve_gap(run_dir: str, baseline_dir: str) -> tuple[float, int]:
    """How far apart two runs' training-loss curves land, as `compare` draws and parts them (the
    per-step loss smoothed): the largest factor between them along the shared steps, and where."""
    import numpy as np

    from tb_trainhealth.compare.curves import smoothed
    from tb_trainhealth.compare.runs import diagnosed_directory
    from tb_trainhealth.contract import series as sig

    ours, theirs = (smoothed(diagnosed_directory(d, "run").signals.series[sig.LOSS]) for d in (run_dir, baseline_dir))
    n = min(len(ours), len(theirs))
    gaps = np.abs(np.log(ours.values[:n]) - np.log(theirs.values[:n]))
    return float(np.exp(gaps.max())), int(ours.steps[int(gaps.argmax())])


def deciding_value(comparison: Any, names: tuple[str, ...] = ("val_accuracy", "val_loss")) -> tuple[str, float, float]:
    """(metric, baseline, run) of the first of `names` both runs have, final values."""
    for name in names:
        for pair in comparison.metrics:
            if pair.name == name:
                return name, pair.baseline_final, pair.run_final
    return "?", math.nan, math.nan


def hurt(comparison: Any) -> bool:
    """Did the change hurt, in numbers: accuracy 10+ points lower, or a loss 2x higher (or NaN)."""
    name, baseline, run = deciding_value(comparison)
    if name == "val_accuracy":
        return baseline - run >= 0.10
    return not math.isfinite(run) or run >= 2 * baseline


def names_culprit(comparison: Any, variant: Variant, top: int = 2) -> bool:
    from tb_trainhealth.compare import culprit

    named = comparison.changes[:top]
    return any(c.setting in variant.culprits or culprit.key_of(c.setting) in variant.culprits for c in named)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", default=None, help="set-ups whose name contains this")
    parser.add_argument("--keep", default=None, help="write the runs here (default: a temporary directory)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from tb_trainhealth.compare.runs import compare_directories

    root = args.keep or tempfile.mkdtemp(prefix="compare_zoo_")
    setups = [s for s in SETUPS if not args.only or args.only in s.name]
    jobs = [
        (s.name, "baseline", seed, os.path.join(root, s.name, f"baseline_{seed}"))
        for s in setups
        for seed in range(max(NOISE_SEEDS, args.seeds))
    ]
    for setup, variant, seed in itertools.product(setups, VARIANTS, range(args.seeds)):
        if not variant.only or setup.name in variant.only:
            jobs.append((setup.name, variant.name, seed, os.path.join(root, setup.name, f"{variant.name}_{seed}")))
    jobs = [job for job in jobs if not os.path.isdir(job[3])]
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.workers) as pool:
        for setup_name, variant, seed, seconds in pool.map(_train_job, jobs):
            print(f"trained {setup_name:10} {variant:18} seed={seed} {seconds:5.1f}s", flush=True)
    print(f"trained {len(jobs)} runs in {time.perf_counter() - started:.0f}s under {root}\n")

    print("noise model: seed-to-seed gaps of the baselines (final / best)")
    for setup in setups:
        gaps = []
        for a, b in itertools.combinations(range(NOISE_SEEDS), 2):
            comparison = compare_directories(
                os.path.join(root, setup.name, f"baseline_{a}"), os.path.join(root, setup.name, f"baseline_{b}")
            )
            gaps.append(
                (
                    comparison.verdict.value,
                    *[
                        (p.name, p.baseline_final - p.run_final, p.baseline_best - p.run_best)
                        for p in comparison.metrics[:2]
                    ],
                )
            )
        for gap in gaps:
            print(f"  {setup.name:10} {gap[0]:7} " + "  ".join(f"{n}: {f:+.3f} / {b:+.3f}" for n, f, b in gap[1:]))
    print("curve noise: the largest factor between two seeds' smoothed training-loss curves (CURVE_NOISE)")
    for setup in setups:
        folder = os.path.join(root, setup.name)
        found = [curve_gap(os.path.join(folder, f"baseline_{a}"), os.path.join(folder, f"baseline_{b}"))
                 for a, b in itertools.combinations(range(NOISE_SEEDS), 2)]  # fmt: skip
        factor, step = max(found)
        print(f"  {setup.name:10} {factor:.3f}x (at step {step}); pairs: " + " ".join(f"{f:.2f}" for f, _ in found))

    print("\npairs (run seed s against the baseline of the other seed):")
    found = harmful = benign = false_alarms = 0
    unconfirmed = []
    for setup in setups:
        for variant in VARIANTS:
            if variant.only and setup.name not in variant.only:
                continue
            results = []
            for seed in range(args.seeds):
                other = (seed + 1) % max(args.seeds, 2)
                comparison = compare_directories(
                    os.path.join(root, setup.name, f"{variant.name}_{seed}"),
                    os.path.join(root, setup.name, f"baseline_{other}"),
                )
                results.append(comparison)
            for comparison in results:
                metric, base, run = deciding_value(comparison)
                top = ", ".join(c.setting for c in comparison.changes[:2]) or "-"
                line = (
                    f"  {setup.name:10} {variant.name:18} {comparison.verdict.value:7} {metric} {base:.3f} -> "
                    f"{run:.3f}  parted={comparison.parted_at_step}  top: {top}"
                )
                if variant.harmful and not all(hurt(c) for c in results):
                    print(line + "  (did not hurt on every seed: not counted)")
                    continue
                if variant.harmful:
                    harmful += 1
                    ok = comparison.verdict.value == "worse" and names_culprit(comparison, variant)
                    found += ok
                    print(line + ("" if ok else "  <- MISSED"))
                else:
                    benign += 1
                    alarm = comparison.verdict.value == "worse"
                    false_alarms += alarm
                    print(line + ("  <- FALSE ALARM" if alarm else ""))
            if variant.harmful and not all(hurt(c) for c in results):
                unconfirmed.append(f"{setup.name}/{variant.name}")
    print(f"\nunconfirmed harmful changes (did not hurt on every seed): {', '.join(unconfirmed) or 'none'}")
    print(
        f"harmful pairs named first or second with verdict worse: {found} of {harmful}"
        f" ({100 * found / max(harmful, 1):.0f}%)"
    )
    print(f"benign pairs called worse: {false_alarms} of {benign}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
