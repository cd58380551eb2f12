"""Distribution strategies, XLA and mixed precision: the probe reports the gradients actually
applied, once per step, whatever runs the step."""

from __future__ import annotations

import json
import os

import numpy as np
from conftest import ROOT, read_logdir, run_python

from tb_trainhealth.contract import series as sig

SCRIPT = os.path.join(ROOT, "tests", "distributed_training.py")


def mirrored_run(tmp_path, mode: str):
    proc = run_python(SCRIPT, str(tmp_path / "run"), mode)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reference = json.loads(proc.stdout.strip().splitlines()[-1])
    return read_logdir(str(tmp_path))["run"], reference


def test_mirrored_strategy_records_the_all_reduced_gradients_once_per_step(tmp_path):
    run, reference = mirrored_run(tmp_path, "clean")
    norms, losses = run.get(sig.GRAD_NORM), run.get(sig.LOSS)
    steps = list(range(1, len(reference["grad_norm"]) + 1))
    assert list(norms.steps) == steps and list(losses.steps) == steps  # one row per step, not per replica
    np.testing.assert_allclose(norms.values, reference["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(losses.values, reference["loss"], rtol=1e-5)
    layers = run.layer_series[sig.LAYER_GRAD_NORM]
    np.testing.assert_allclose(np.sqrt((layers.values**2).sum(axis=1)), norms.values, rtol=1e-5)
    # The host-side checks see the whole batch, put back together from the replicas' shards.
    (statistics,) = [e for e in run.events if getattr(e, "check", None) == "label_statistics"]
    assert sum(statistics.class_counts) == len(reference["grad_norm"]) * 16
    assert [e.step for e in run.events if e.kind == "activations"] == [len(reference["grad_norm"])]


def test_nan_on_one_replica_is_found_and_attributed_to_it(tmp_path):
    run, _ = mirrored_run(tmp_path, "nan_on_replica_1")
    (first,) = [e for e in run.events if e.kind == "nonfinite" and e.where == "gradients"]
    assert first.step == 3 and first.replicas == (1,)
    proc = run_python("-m", "tb_trainhealth.cli", "diagnose", str(tmp_path), "--json")
    assert proc.returncode == 1, proc.stderr
    (finding,) = [f for f in json.loads(proc.stdout)["runs"][0]["findings"] if f["code"] == "nonfinite"]
    assert finding["step"] == 3 and "only replica(s) 1" in finding["detail"]


X = np.random.default_rng(1).normal(size=(320, 8)).astype("float32")
Y = (X[:, 0] - X[:, 1] > 0).astype("int32")


def fit_small(log_dir: str, weights: list | None = None, **compile_kwargs):
    """A small classifier, fitted deterministically (no shuffling, fixed initial weights)."""
    import keras

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(2, dtype="float32"),  # float32 logits, as the mixed precision guide says
        ]
    )
    if weights is not None:
        model.set_weights(weights)
    model.compile(
        keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True), **compile_kwargs
    )
    model.fit(
        X, Y, batch_size=32, epochs=2, shuffle=False, verbose=0, callbacks=[HealthCallback(log_dir, verbose=False)]
    )
    return model


def assert_same_signals(run, reference, rtol: float) -> None:
    for name in (sig.LOSS, sig.GRAD_NORM):
        np.testing.assert_array_equal(run.get(name).steps, reference.get(name).steps)
        np.testing.assert_allclose(run.get(name).values, reference.get(name).values, rtol=rtol)
    for name in (sig.LAYER_GRAD_NORM, sig.LAYER_WEIGHT_NORM):
        np.testing.assert_array_equal(run.layer_series[name].steps, reference.layer_series[name].steps)
        np.testing.assert_allclose(run.layer_series[name].values, reference.layer_series[name].values, rtol=rtol)


def test_xla_compiled_step_gives_the_same_signals(tmp_path):
    fit_small(str(tmp_path / "plain"))
    fit_small(str(tmp_path / "xla"), jit_compile=True)
    runs = read_logdir(str(tmp_path))
    assert len(runs["xla"].get(sig.GRAD_NORM)) == 20
    assert_same_signals(runs["xla"], runs["plain"], rtol=1e-4)


def test_mixed_precision_norms_are_unscaled_and_the_loss_scale_is_recorded(tmp_path):
    """Same seed, same initial weights: float16 compute moves the norms by float16 rounding only,
    while the scaled gradients LossScaleOptimizer hands `apply` are 32768x larger."""
    import keras

    fit_small(str(tmp_path / "fp32"))
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = fit_small(str(tmp_path / "mixed"))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    runs = read_logdir(str(tmp_path))
    assert runs["mixed"].info.loss_scale
    assert_same_signals(runs["mixed"], runs["fp32"], rtol=2e-2)
    scale = runs["mixed"].get(sig.LOSS_SCALE)
    assert scale.steps[0] == 1 and scale.values[0] == model.optimizer.initial_scale
    assert scale.values[-1] == float(model.optimizer.dynamic_scale.numpy())
    assert runs["fp32"].get(sig.LOSS_SCALE) is None
