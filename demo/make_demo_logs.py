"""Writes the demo logdir: one healthy run per model family, one run per training problem,
a crash, a run that survives out-of-memory errors with tb_trainhealth.fit, a run that
has only a preflight (a set-up found broken before any training step), and a good run with
its later copy whose learning rate has a typo (compared with it by HealthCallback(baseline=...)).

Usage: python demo/make_demo_logs.py [LOGDIR]   (default: demo_logs; about a minute on 2 cores)
Then:  tb-trainhealth diagnose demo_logs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

WIDTH = 25  # one column for the run names: the longest, plus one


def quiet_tensorflow_start() -> None:
    """Starts TensorFlow without its start-up lines (oneDNN, CUDA drivers): TensorFlow's C++ code
    writes them to file descriptor 2 before any log level applies, so they go to /dev/null, the
    one time. And the demo's deliberately broken runs make Keras warn (an input that runs out of
    data, shuffle=True on a dataset): the demo diagnoses them itself, so Keras' UserWarnings go."""
    warnings.filterwarnings("ignore", category=UserWarning, module="keras")
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf

        tf.constant(0.0) + 1  # sets up the devices: the CUDA probe's lines come here
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def preflight_only(run_dir: str) -> None:
    """A classifier whose encoder is cut off by a stop_gradient and whose learning rate is 1e-7:
    tb_trainhealth.preflight finds both in seconds, before the long run would have started."""
    import keras
    import numpy as np
    import tensorflow as tf

    import tb_trainhealth

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 20)).astype("float32")
    y = np.argmax(x @ rng.normal(size=(20, 10)), axis=1)
    inputs = keras.Input((20,))
    encoded = keras.layers.Dense(64, activation="relu", name="encoder")(inputs)
    frozen_by_mistake = keras.layers.Lambda(tf.stop_gradient, name="stop_gradient")(encoded)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax", name="classifier")(frozen_by_mistake))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-7), loss="sparse_categorical_crossentropy")
    tb_trainhealth.preflight(model, x, y, log_dir=run_dir)


def baseline_pair(logdir: str) -> tuple[str, str]:
    """A good run and the same script a week later with a typo in the learning rate's exponent
    (1e-6 for 1e-3), trained with HealthCallback(baseline=the good run): `compare` and the tab's
    "Compare with..." name the learning rate."""
    import keras
    import numpy as np

    from tb_trainhealth import HealthCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 20)).astype("float32")
    y = np.argmax(np.tanh(x @ rng.normal(size=(20, 16))) @ rng.normal(size=(16, 4)), axis=1)
    good, typo = os.path.join(logdir, "last_good_run"), os.path.join(logdir, "lr_exponent_typo")
    for run_dir, rate, baseline in ((good, 1e-3, None), (typo, 1e-6, good)):
        shutil.rmtree(run_dir, ignore_errors=True)
        keras.utils.set_random_seed(1)
        model = keras.Sequential(
            [keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4, activation="softmax")]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
        callback = HealthCallback(run_dir, baseline=baseline, verbose=False)
        model.fit(x, y, epochs=8, batch_size=32, validation_split=0.2, verbose=0, callbacks=[callback])
    return good, typo


def main(argv: list[str]) -> int:
    logdir = argv[1] if len(argv) > 1 else "demo_logs"
    quiet_tensorflow_start()
    from scenarios import SCENARIOS  # (imports TensorFlow: after its start-up is quiet)

    for scenario in SCENARIOS:
        run_dir = os.path.join(logdir, scenario.name)
        shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, not a second one appended
        started = time.perf_counter()
        scenario.train(run_dir)
        print(f"{scenario.name:{WIDTH}} {time.perf_counter() - started:5.1f}s -> {run_dir}")
    # Out of memory needs a capped address space: its own process (see tests/oom_training.py).
    started = time.perf_counter()
    run_dir = os.path.join(logdir, "oom_retry")
    shutil.rmtree(run_dir, ignore_errors=True)
    oom_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oom_training.py")
    subprocess.run([sys.executable, oom_script, run_dir, "256"], check=True, capture_output=True)  # output kept back
    print(f"{'oom_retry':{WIDTH}} {time.perf_counter() - started:5.1f}s -> {run_dir}")
    started = time.perf_counter()
    run_dir = os.path.join(logdir, "preflight_only")
    shutil.rmtree(run_dir, ignore_errors=True)
    preflight_only(run_dir)
    print(f"{'preflight_only':{WIDTH}} {time.perf_counter() - started:5.1f}s -> {run_dir}")
    started = time.perf_counter()
    good, typo = baseline_pair(logdir)
    print(f"{'last_good_run + typo':{WIDTH}} {time.perf_counter() - started:5.1f}s -> {good}, {typo}")
    print(f"\nNow run:  tb-trainhealth diagnose {logdir}")
    print(f"     and:  tb-trainhealth compare {typo} {good}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
