"""A fit long enough for its store to go away and come back meanwhile:
`python bucket_outage_training.py LOG_DIR|plain`.

Each epoch end prints `epoch N` (the test takes the store away and back by them) and waits
EPOCH_PAUSE s; at the end one JSON line holds the per-epoch losses. `plain`: no HealthCallback, the
losses to compare with.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

from tb_trainhealth import HealthCallback

EPOCHS = 30
EPOCH_PAUSE = 0.5


def main(log_dir: str) -> None:
    keras.utils.set_random_seed(0)
    x = np.random.rand(256, 8).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")

    def said(epoch: int, logs: dict) -> None:
        print(f"epoch {epoch + 1}", flush=True)
        time.sleep(EPOCH_PAUSE)

    callbacks = [keras.callbacks.LambdaCallback(on_epoch_end=said)]
    if log_dir != "plain":
        callbacks.append(HealthCallback(log_dir=log_dir, verbose=False))
    history = model.fit(x, y, batch_size=32, epochs=EPOCHS, verbose=0, callbacks=callbacks)
    print(json.dumps({"losses": history.history["loss"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
