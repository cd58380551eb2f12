"""A real out-of-memory training run, for tests: the address space is capped so big batches fail.

Usage: python tests/oom_training.py LOG_DIR MIN_BATCH_SIZE [arrays|dataset] [EPOCHS GROW_BACK_AFTER]
Allocations beyond the cap raise ResourceExhaustedError at once (nothing is touched);
oneDNN is off because some of its kernels crash the process (SIGSEGV) instead of raising.
"""

from __future__ import annotations

import os
import resource
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ADDRESS_SPACE_LIMIT = 4 * 2**30

import keras
import numpy as np

import tb_trainhealth


def main(log_dir: str, min_batch_size: int, kind: str = "arrays", epochs: str = "2", grow_back_after: str = "") -> None:
    grow = {"grow_back_after": int(grow_back_after)} if grow_back_after else {}
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(8192, 16)).astype("float32")
    y = x[:, :1].copy()
    # A wide hidden layer: 8192 x 65536 float32 activations (2 GiB, plus their gradients) cannot fit.
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(65536, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    if kind == "dataset":  # an already-batched tf.data pipeline: re-batched on retry
        import tensorflow as tf

        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8192)
        history = tb_trainhealth.fit(
            model, data, log_dir=log_dir, epochs=int(epochs), verbose=0, min_batch_size=min_batch_size, **grow
        )
    else:
        history = tb_trainhealth.fit(
            model,
            x,
            y,
            log_dir=log_dir,
            batch_size=8192,
            epochs=int(epochs),
            verbose=0,
            min_batch_size=min_batch_size,
            **grow,
        )
    print("EPOCHS", len(history.history["loss"]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
