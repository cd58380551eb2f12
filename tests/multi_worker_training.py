"""One worker of a real MultiWorkerMirroredStrategy run on loopback (tf_keras, the Keras
whose `fit` supports that strategy), with HealthCallback; for tests, which start two.

Each worker reads its own data (`distribute_datasets_from_function`), so which worker sees
which rows is known exactly; the chief also computes the single-device reference of the same
steps (both workers' halves of each global batch, the same initial weights).

Usage: python tests/multi_worker_training.py LOG_DIR TASK_INDEX PORT0 PORT1 [clean|nan_on_worker_1|crash_on_worker_1|stall_on_worker_1]
The chief prints, as its last line, JSON: the reference's per-step global gradient norm and loss.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

GLOBAL_BATCH, STEPS, NAN_STEP = 16, 6, 3
STALL_SECONDS, STALL_AFTER = 8.0, 2.0


def configure(task: int, ports: list[str]) -> None:
    workers = [f"localhost:{port}" for port in ports]
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": task}})


def worker_data(worker: int, mode: str):
    """This worker's rows: STEPS half-batches; on worker 1, NaN in step NAN_STEP's half."""
    import numpy as np

    rng = np.random.default_rng(worker)
    half = GLOBAL_BATCH // 2
    x = rng.normal(size=(half * STEPS, 4)).astype("float32")
    y = rng.integers(0, 3, half * STEPS).astype("int32")
    if worker == 1 and mode == "nan_on_worker_1":
        x[half * (NAN_STEP - 1) + 2, 0] = np.nan
    return x, y


def main(log_dir: str, task: str, port0: str, port1: str, mode: str = "clean") -> None:
    configure(int(task), [port0, port1])
    import tensorflow as tf

    from tb_trainhealth import HealthCallback

    keras = tf.keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    worker = int(task)
    x, y = worker_data(worker, mode)
    half = GLOBAL_BATCH // 2

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(context.get_per_replica_batch_size(GLOBAL_BATCH))
        if mode == "crash_on_worker_1" and worker == 1:  # a broken record in its third batch
            data = data.enumerate().map(broken_after(NAN_STEP - 1))
        if mode == "stall_on_worker_1" and worker == 1:  # its third batch takes STALL_SECONDS to read
            data = data.enumerate().map(slow_at(NAN_STEP - 1))
        return data

    def slow_at(batch: int):
        def sleep(index):
            if int(index) == batch:
                time.sleep(STALL_SECONDS)
            return index

        def read(index, batch_data):
            with tf.control_dependencies([tf.py_function(sleep, [index], tf.int64)]):
                return tf.nest.map_structure(tf.identity, batch_data)

        return read

    def broken_after(batches: int):
        def check(index, batch):
            with tf.control_dependencies(
                [tf.debugging.assert_less(index, tf.constant(batches, tf.int64), "corrupt record")]
            ):
                return tf.nest.map_structure(tf.identity, batch)

        return check

    def model():
        return keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(8), keras.layers.Dense(3)]
        )

    tf.keras.utils.set_random_seed(0)  # the same initial weights on both workers
    with strategy.scope():
        net = model()
        net.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    weights = net.get_weights()
    data = strategy.distribute_datasets_from_function(dataset_fn)
    stall_after = STALL_AFTER if mode == "stall_on_worker_1" else None
    health = HealthCallback(log_dir, verbose=False, stall_after=stall_after)
    net.fit(data, epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[health])
    if worker == 0:
        other_x, other_y = worker_data(1, mode)
        print(json.dumps(reference(model(), weights, (x, y), (other_x, other_y), half)))


def reference(net, weights: list, first: tuple, second: tuple, half: int) -> dict[str, list[float]]:
    """The same steps on one device: each global batch is both workers' halves."""
    import numpy as np
    import tensorflow as tf
    from reference_steps import reference_steps

    net.set_weights(weights)
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rows = [slice(step * half, (step + 1) * half) for step in range(STEPS)]
    batches = ((np.concatenate([first[0][r], second[0][r]]), np.concatenate([first[1][r], second[1][r]])) for r in rows)
    return reference_steps(net, optimizer, loss_fn, batches)


if __name__ == "__main__":
    main(*sys.argv[1:])
