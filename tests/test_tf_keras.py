"""Legacy Keras 2 (`tf_keras`, `TF_USE_LEGACY_KERAS=1`) and MultiWorkerMirroredStrategy: the
same probes as on Keras 3, and on several workers one run written by the chief. Each training
runs in its own process (the Keras is chosen before TensorFlow starts; workers are processes)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, read_logdir, run_python

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Severity

# Found, not imported: tf_keras starts TensorFlow, which belongs in the training subprocesses.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras not installed")
# (the message only: importing the write side here would start TensorFlow in the test process)
PREFLIGHT_KERAS_3_ONLY = "preflight needs a Keras 3 model; it is not available for tf_keras"

SINGLE = os.path.join(ROOT, "tests", "tf_keras_training.py")
WORKER = os.path.join(ROOT, "tests", "multi_worker_training.py")
WORKER_TIMEOUT = 300


def findings(logdir: str) -> dict[str, list[dict]]:
    proc = run_python("-m", "tb_trainhealth.cli", "diagnose", logdir, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return {run["run"]: run["findings"] for run in json.loads(proc.stdout)["runs"]}


def test_tf_keras_healthy_run_records_every_probe_and_stays_quiet(tmp_path):
    proc = run_python(SINGLE, str(tmp_path / "run"), "clean")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is slow compared to the batch time" not in proc.stderr  # tf_keras' hook timing stays quiet
    reference = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.stderr.count(PREFLIGHT_KERAS_3_ONLY) == 1 and PREFLIGHT_KERAS_3_ONLY in reference["preflight_error"]
    run = read_logdir(str(tmp_path))["run"]
    steps = list(range(1, len(reference["grad_norm"]) + 1))
    np.testing.assert_array_equal(run.get(sig.GRAD_NORM).steps, steps)
    np.testing.assert_allclose(run.get(sig.GRAD_NORM).values, reference["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(run.get(sig.LOSS).values, reference["loss"], rtol=1e-5)
    waits = run.get(sig.INPUT_WAIT_MS).values  # timed inside the compiled step (input_probe.GraphTimedFetch)
    assert len(waits) == len(steps) and run.info.input_wait_measured
    assert np.isfinite(waits).all() and (waits >= 0).all() and np.median(waits) < 50, waits
    assert run.info.input.type == "tf.data" and run.info.learning_rate == pytest.approx(0.1)
    kinds = {e.kind for e in run.events}
    assert {"activations", "lint", "fit_end"} <= kinds, kinds  # activation probe, first-batch lint
    (found,) = findings(str(tmp_path)).values()
    assert all(Severity.parse(f["severity"]) < Severity.WARNING for f in found), found


@pytest.mark.parametrize("mode", ["unbuilt", "unbuilt_dict"])
def test_tf_keras_model_built_only_in_its_first_step_is_probed(tmp_path, mode):
    """A Sequential without an input shape, or a subclassed model of a dict of inputs, has no
    variables at `on_train_begin` on tf_keras."""
    proc = run_python(SINGLE, str(tmp_path / "run"), mode)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "probe disabled" not in proc.stderr, proc.stderr[-3000:]
    steps = json.loads(proc.stdout.strip().splitlines()[-1])["steps"]
    run = read_logdir(str(tmp_path))["run"]
    np.testing.assert_array_equal(run.get(sig.GRAD_NORM).steps, list(range(1, steps + 1)))
    assert len(run.info.layers) == 2


def test_tf_keras_nan_is_found_and_traced_to_the_input(tmp_path):
    proc = run_python(SINGLE, str(tmp_path / "run"), "nan")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_logdir(str(tmp_path))["run"]
    (origin,) = [e for e in run.events if e.kind == "nan_origin"]
    assert origin.step == 3 and origin.where == "input" and origin.position == (5, 2)
    (finding,) = [f for f in findings(str(tmp_path))["run"] if f["code"] == "nonfinite"]
    assert finding["severity"] == "critical" and finding["step"] == 3


@pytest.mark.parametrize("mode", ["clean", "nan_on_replica_1"])
def test_tf_keras_mirrored_strategy_records_the_all_reduced_gradients(tmp_path, mode):
    """tests/distributed_training.py (2 logical CPUs) on tf_keras: the norms of the gradients
    applied, one row per step, and a NaN named by the replica it came in on."""
    script = os.path.join(ROOT, "tests", "distributed_training.py")
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}
    proc = subprocess.run(
        [sys.executable, script, str(tmp_path / "run"), mode],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reference = json.loads(proc.stdout.strip().splitlines()[-1])
    run = read_logdir(str(tmp_path))["run"]
    norms = run.get(sig.GRAD_NORM)
    assert list(norms.steps) == list(range(1, len(reference["grad_norm"]) + 1))
    np.testing.assert_allclose(norms.values, reference["grad_norm"], rtol=1e-5)  # (NaN where both are NaN)
    if mode == "nan_on_replica_1":
        (first,) = [e for e in run.events if e.kind == "nonfinite" and e.where == "gradients"]
        assert first.step == 3 and first.replicas == (1,) and run.info.replicas_per_worker is None


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def multi_worker_run(log_dir: str, mode: str) -> list[subprocess.CompletedProcess]:
    """Two workers of one MultiWorkerMirroredStrategy on loopback; both must end."""
    ports = [str(p) for p in _free_ports(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, WORKER, log_dir, str(task), *ports, mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for task in (0, 1)
    ]
    results = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=WORKER_TIMEOUT)
            results.append(subprocess.CompletedProcess(worker.args, worker.returncode, out, err))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    return results


def test_multi_worker_chief_writes_one_run_with_the_all_reduced_gradients(tmp_path):
    chief, other = multi_worker_run(str(tmp_path / "run"), "clean")
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-2000:] + other.stderr[-2000:]
    reference = json.loads(chief.stdout.strip().splitlines()[-1])
    assert os.listdir(tmp_path) == ["run"]
    assert len([f for f in os.listdir(tmp_path / "run") if "tfevents" in f]) == 1  # the chief's only
    run = read_logdir(str(tmp_path))["run"]
    steps = list(range(1, len(reference["grad_norm"]) + 1))
    assert run.info.replicas_per_worker == 1
    np.testing.assert_array_equal(run.get(sig.GRAD_NORM).steps, steps)  # one row per step, not per worker
    np.testing.assert_allclose(run.get(sig.GRAD_NORM).values, reference["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(run.get(sig.LOSS).values, reference["loss"], rtol=1e-5)
    (found,) = findings(str(tmp_path)).values()
    assert all(Severity.parse(f["severity"]) < Severity.WARNING for f in found), found


def test_multi_worker_nan_on_one_workers_data_is_attributed_to_that_worker(tmp_path):
    chief, other = multi_worker_run(str(tmp_path / "run"), "nan_on_worker_1")
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-2000:] + other.stderr[-2000:]
    run = read_logdir(str(tmp_path))["run"]
    (first,) = [e for e in run.events if e.kind == "nonfinite" and e.where == "gradients"]
    assert first.step == 3 and first.replicas == (1,)
    (finding,) = [f for f in findings(str(tmp_path))["run"] if f["code"] == "nonfinite"]
    assert finding["step"] == 3 and "only replica(s) 1" in finding["detail"]
    assert run.info.replicas_per_worker == 1 and "on worker(s) 1" in finding["detail"]


def test_multi_worker_crash_is_recorded_by_the_worker_that_crashed(tmp_path):
    chief, other = multi_worker_run(str(tmp_path / "run"), "crash_on_worker_1")
    assert other.returncode != 0 and "corrupt record" in other.stderr
    runs = read_logdir(str(tmp_path))
    (crash,) = [e for e in runs["run/worker_1"].events if e.kind == "crash"]
    assert crash.step == 3 and crash.error_type == "InvalidArgumentError" and "corrupt record" in crash.message
    by_run = findings(str(tmp_path))
    assert [f["code"] for f in by_run["run/worker_1"]] == ["training_crash"]
    if chief.returncode != 0:  # the chief's collective is aborted once the peer is gone
        assert any(f["code"] == "training_crash" for f in by_run["run"])


def test_keras_3_models_never_import_tf_keras_and_callbacks_speak_both_protocols(tmp_path):
    """In this process (Keras 3): which Keras a model belongs to is read from its class, and the
    callbacks answer tf_keras' CallbackList questions the way its own Callback base would."""
    import keras

    from tb_trainhealth.callback.frameworks.which_keras import is_tf_keras, keras_of
    from tb_trainhealth.callback.health_callback import HealthCallback
    from tb_trainhealth.callback.training import _EpochTracker

    imported_before = "tf_keras" in sys.modules
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert not is_tf_keras(model) and keras_of(model) is keras
    health = HealthCallback(str(tmp_path / "run"))
    assert health._implements_train_batch_hooks() and health._implements_test_batch_hooks()
    assert not health._implements_predict_batch_hooks() and health._supports_tf_logs
    assert _EpochTracker(0, None, None)._implements_train_batch_hooks()  # (it counts the steps that fit, issue 58)
    assert imported_before or "tf_keras" not in sys.modules


def test_multi_worker_hang_on_one_worker_is_recorded_by_that_worker(tmp_path):
    """Worker 1 waits 8 s for its third batch: it records where (its input) in its own run; the
    chief, held in the all-reduce meanwhile, records its own stall in the run."""
    chief, other = multi_worker_run(str(tmp_path / "run"), "stall_on_worker_1")
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-2000:] + other.stderr[-2000:]
    runs = read_logdir(str(tmp_path))
    stalls = [e for e in runs["run/worker_1"].events if e.kind == "stall"]
    assert any(stall.step == 2 and stall.phase == "input" for stall in stalls), stalls
    assert any(e.kind == "stall" for e in runs["run"].events)
    assert runs["run"].get(sig.GRAD_NORM) is not None and len(runs["run"].get(sig.GRAD_NORM)) == 6


TRACES = """
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf
from tb_trainhealth import HealthCallback
keras = tf.keras
x = np.random.default_rng(0).normal(size=(96, 6)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
out = {}
for name, callbacks in (("bare", []), ("health", [HealthCallback(sys.argv[1], verbose=False)])):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    step, count = model.train_step, [0]
    def counting(data, step=step, count=count):
        count[0] += 1
        return step(data)
    model.train_step = counting
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=callbacks).history
    out[name] = {"traces": count[0], "history": history}
print(json.dumps(out))
"""


def test_tf_keras_fresh_model_with_compiled_metrics_is_traced_once_with_the_same_metrics(tmp_path):
    """tf_keras alone traces a fresh model's step twice (its first trace creates the compiled
    metrics' variables); with the callback they are built before it: one trace, same values."""
    proc = run_python("-c", TRACES, str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bare"]["traces"] == 2 and out["health"]["traces"] == 1
    assert set(out["health"]["history"]) == set(out["bare"]["history"]) == {"loss", "accuracy"}
    for key, values in out["bare"]["history"].items():
        np.testing.assert_allclose(out["health"]["history"][key], values, rtol=1e-6)


ACROSS_SPECS = """
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf
from tb_trainhealth import HealthCallback
keras = tf.keras
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 6)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
fixed = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True)  # batch dim 16: a new spec
out = {}
for name in ("bare", "timed", "untimed"):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    def callbacks(fit):
        log_dir = os.path.join(sys.argv[1], f"{name}{fit}")
        return [] if name == "bare" else [HealthCallback(log_dir, verbose=False, measure_input=name == "timed")]
    losses = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=callbacks(0)).history["loss"]
    losses += model.fit(fixed, epochs=2, verbose=0, callbacks=callbacks(1)).history["loss"]
    losses += model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=callbacks(2)).history["loss"]
    out[name] = {"loss": losses, "weights": [w.ravel().tolist() for w in model.get_weights()]}
print(json.dumps(out))
"""


def test_tf_keras_steps_called_through_their_trace_train_as_without_the_callback(tmp_path):
    """The callback calls tf_keras' compiled step through the trace it made (`ConcreteCall`), timed
    or not: fits on a second input spec and back train exactly as the same fits without it."""
    proc = run_python("-c", ACROSS_SPECS, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("timed", "untimed"):
        np.testing.assert_allclose(out[name]["loss"], out["bare"]["loss"], rtol=1e-6)
        for got, want in zip(out[name]["weights"], out["bare"]["weights"]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
