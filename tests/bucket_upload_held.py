"""A fit into a bucket whose uploads are held up: `python bucket_upload_held.py LOG_DIR slow|hang SECONDS`.

slow: every upload (fsspec's put_file) waits until the fit is over, SECONDS at most, then goes. Prints JSON: how long each HealthCallback epoch end and event-record write took and
whether an upload was held meanwhile, and whether the hold ran out before the fit ended.
hang: every upload waits forever; the last upload's deadline at exit is SECONDS. Prints, as
JSON lines, when the fit ended and, from an exit hook that runs after tb-trainhealth's, when
that one returned.
"""

import atexit
import json
import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Registered before tb-trainhealth's own exit hook, so run after it.
atexit.register(lambda: print(json.dumps({"exit_hooks_done": time.time()}), flush=True))

import fsspec
import keras
import numpy as np

from tb_trainhealth import HealthCallback
from tb_trainhealth.callback.record import bucket_mirror, health_writer

held = threading.Event()  # an upload has started
fit_over = threading.Event()
ran_out = []  # an upload that the hold let go before the fit ended


def hold(put_file, forever: bool, seconds: float):
    def held_put_file(*args, **kwargs):
        held.set()
        if forever:
            threading.Event().wait()
        if not fit_over.wait(seconds):
            ran_out.append(True)
        return put_file(*args, **kwargs)

    return held_put_file


calls = []


def timed(what: str, method):
    def call(*args, **kwargs):
        upload_held = held.is_set() and not fit_over.is_set()
        start = time.monotonic()
        try:
            return method(*args, **kwargs)
        finally:
            calls.append({"call": what, "seconds": time.monotonic() - start, "upload_held": upload_held})

    return call


class FitOver(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        fit_over.set()


def main(log_dir: str, mode: str, seconds: str) -> None:
    # fsspec keeps one filesystem per scheme and options: the one the uploads go through.
    filesystem = fsspec.core.url_to_fs(log_dir)[0]
    filesystem.put_file = hold(filesystem.put_file, mode == "hang", float(seconds))
    if mode == "hang":
        bucket_mirror.FINAL_UPLOAD_SECONDS = float(seconds)
    health_writer.HealthWriter.write_json = timed("write_json", health_writer.HealthWriter.write_json)
    keras.utils.set_random_seed(0)
    x = np.random.rand(256, 8).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    x[200:208] = np.nan  # events to write at the epoch ends
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    callback = HealthCallback(log_dir=log_dir, verbose=False)
    callback.on_epoch_end = timed("on_epoch_end", callback.on_epoch_end)
    callback.on_train_end = timed("on_train_end", callback.on_train_end)
    model.fit(x, y, batch_size=32, epochs=4, verbose=0, callbacks=[callback, FitOver()])
    if mode == "hang":
        print(json.dumps({"fit_ended": time.time()}), flush=True)
    else:
        print(json.dumps({"calls": calls, "held": held.is_set(), "ran_out": bool(ran_out)}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
