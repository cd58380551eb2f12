"""What `HealthCallback(baseline=...)` costs at each epoch end, side by side in one process: the same
MLP trained with and without a baseline, alternately (so a busy machine slows both alike), timing
every `on_epoch_end` of the callback and, inside it, the comparison with the baseline alone.

The first epoch end of a fit reads and diagnoses the baseline (once per fit); the others only judge
the run so far against it at the same step. Usage: python bench/baseline_per_epoch.py [--epochs 20]
[--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SAMPLES = 4000


def train(log_dir: str, epochs: int, baseline: str | None) -> list[float]:
    """Trains one run; the seconds each of its epoch ends took in the callback."""
    import keras
    import numpy as np

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 20)).astype("float32")
    y = np.argmax(np.tanh(x @ rng.normal(size=(20, 16))) @ rng.normal(size=(16, 4)), axis=1)
    model = keras.Sequential(
        [keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4, activation="softmax")]
    )
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    health = HealthCallback(log_dir, verbose=False, baseline=baseline)
    seconds: list[float] = []
    inner = health.on_epoch_end

    def timed(epoch: int, logs: Any = None) -> None:
        started = time.perf_counter()
        inner(epoch, logs)
        seconds.append(time.perf_counter() - started)

    health.on_epoch_end = timed  # type: ignore[method-assign]
    model.fit(x, y, epochs=epochs, batch_size=32, validation_split=0.2, verbose=0, callbacks=[health])
    keras.backend.clear_session()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from tb_trainhealth.callback.baseline import BaselineWatch

    checks: list[float] = []
    inner = BaselineWatch.epoch_end

    def timed_check(self: BaselineWatch, *a: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(self, *a)
        finally:
            checks.append(time.perf_counter() - started)

    BaselineWatch.epoch_end = timed_check  # type: ignore[method-assign]
    root = tempfile.mkdtemp(prefix="baseline_per_epoch_")
    baseline = os.path.join(root, "baseline")
    train(baseline, args.epochs, None)
    without: list[float] = []
    with_baseline: list[float] = []
    first: list[float] = []
    first_checks: list[float] = []
    for repeat in range(args.repeats):
        without += train(os.path.join(root, f"plain_{repeat}"), args.epochs, None)[1:]
        start = len(checks)
        ends = train(os.path.join(root, f"compared_{repeat}"), args.epochs, baseline)
        first.append(ends[0])
        with_baseline += ends[1:]
        first_checks.append(checks[start])
        del checks[start]  # (the first check reads the baseline: counted apart)

    def ms(values: list[float]) -> str:
        return f"median {1000 * statistics.median(values):6.2f} ms  max {1000 * max(values):6.2f} ms"

    print(f"{args.repeats} fits of {args.epochs} epochs each way, epoch ends after the first:")
    print(f"  epoch end without baseline:     {ms(without)}")
    print(f"  epoch end with baseline:        {ms(with_baseline)}")
    print(f"  the comparison in it alone:     {ms(checks)}")
    print(f"  first epoch end with baseline:  {ms(first)}  (reads and diagnoses the baseline, once per fit)")
    print(f"  the first comparison alone:     {ms(first_checks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
