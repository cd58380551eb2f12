"""Does adding HealthCallback change what a training program does? (issue 53, part 1)

Runs each program twice with the same seed, plain and with `HealthCallback` on every fit, and
compares what `fit` saw: every number of every epoch's logs (loss, metrics, validation) to float
tolerance, and whether the program crashed (the exception's type). Where the callback cannot
measure without changing the fit, it must leave that part out (`part_not_recorded`), never the
reverse.

The programs are the ways people change a model between fits (trainable flipped with and without
compiling, a new optimizer, `compile` between fits, a second fit, learning-rate callbacks,
`steps_per_epoch` / `initial_epoch`, a custom `train_step`, a subclassed model), the same on
tf_keras (in a subprocess with `TF_USE_LEGACY_KERAS=1`), the demo's scenarios
(`demo/scenarios.py`) and the real-bug zoo (`bench/real_bugs`, buggy and fixed).

    python bench/transparency.py                    # everything
    python bench/transparency.py --groups changes tf_keras
    python bench/transparency.py --only unfreeze_nested_without_compile
    python bench/transparency.py --control --only demo/rnn_clipped   # both runs plain

Prints one line per program and "identical: N of M; crashes caused by the callback: K"; exit 1
when any program differs.

Measured 2026-12-07 on 2 busy CPU cores (Keras 3.15, tf_keras 2.21):
- `--groups changes tf_keras`: identical: 30 of 30; crashes caused by the callback: 0 (5 min).
  Before the step probe stopped retracing a step Keras reuses (issue 53), the six programs that
  flip `trainable` without compile: identical 0 of 6, 3 crashes caused by the callback.
  `unfreeze_callback_first_then_plain` (the callback on the first fit only, the base unfrozen, a
  plain fit) differed until the probe handed back Keras' train function traced as Keras' first one
  would have been (callback/step/keras_step_as_traced.py): `--groups changes tf_keras` then gave
  identical: 32 of 32; crashes caused by the callback: 0 (3 min on 2 cores, 2026-12-07).
- `--groups demo`: identical: 27 of 30; crashes caused by the callback: 0 (about 15 min).
  healthy_pipeline and bad_pipeline differ plain against plain too (`--control`: a stateful random
  flip in a parallel `map`). rnn_clipped differs with the callback, reproducibly, in the last bits
  at first (val_loss 0.0627501011 plain, 0.0627501309 after epoch 0) and 28% by epoch 7 (a loss
  near zero amplifies it); one epoch of it is bit-identical with `measure_input=False`, or without
  `validation_split` (no ragged last batch), and differs with every other part off: the input
  probe changed the float rounding of a fit with a ragged last batch (Keras' one-step function
  traced for the first batch's shape: a mean over 19 rows as a multiply by 1/19). Fixed 2026-12-08
  (input_probe.py traces it for the dataset's spec first): `--groups changes tf_keras demo` gave
  identical: 60 of 62; crashes caused by the callback: 0 (4 min on 2 busy cores); the two that
  differ, healthy_pipeline and bad_pipeline, differ plain against plain (`--control`: 0 of 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Per-epoch numbers must agree this closely (the existing keeps-training-intact tests use 1e-5).
RTOL, ATOL = 1e-5, 1e-7
GROUPS = ("changes", "tf_keras", "demo", "real_bugs")

K: Any = None  # the Keras the programs use: keras (Keras 3), or tf_keras in the subprocess


def _keras() -> Any:
    global K
    if K is None:
        if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
            import tf_keras as K_
        else:
            import keras as K_
        K = K_
    return K


# -- what one run saw --------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    epochs: list[dict[str, float]]  # every epoch's logs, across the program's fits
    crash: str | None  # the exception's type, or None


class EpochLogs:
    """Mixed into a plain Keras callback or into HealthCallback: keeps each epoch's logs."""

    def __init__(self, sink: list[dict[str, float]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._sink = sink

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        parent = getattr(super(), "on_epoch_end", None)
        if parent is not None:
            parent(epoch, logs)
        self._sink.append({k: float(v) for k, v in sorted((logs or {}).items()) if _is_number(v)})


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


class Run:
    """One run of a program: `callbacks()` is what the program passes to each fit."""

    def __init__(self, probed: bool, log_dir: str) -> None:
        self.probed, self.log_dir, self.epochs = probed, log_dir, []
        self._fits = 0

    def callbacks(self) -> list[Any]:
        self._fits += 1
        return [self.callback()]

    def callback(self) -> Any:
        keras = _keras()
        if not self.probed:
            return type("Plain", (EpochLogs, keras.callbacks.Callback), {})(self.epochs)
        from tb_trainhealth import HealthCallback

        probed = type("Probed", (EpochLogs, HealthCallback), {})
        return probed(self.epochs, log_dir=self.log_dir, verbose=False)


def run_once(program: Callable[[Run], Any], probed: bool) -> Outcome:
    with tempfile.TemporaryDirectory() as log_dir:
        run = Run(probed, os.path.join(log_dir, "run"))
        crash = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                program(run)
            except Exception as err:  # the program's own crash is part of what is compared
                crash = type(err).__name__
        return Outcome(run.epochs, crash)


def differences(plain: Outcome, probed: Outcome, second: str = "with the callback") -> list[str]:
    """What differs between the plain run and the second one (`second`: how it is called)."""
    why = []
    if plain.crash != probed.crash:
        why.append(f"crash {plain.crash} plain, {probed.crash} {second}")
    if len(plain.epochs) != len(probed.epochs):
        why.append(f"{len(plain.epochs)} epochs plain, {len(probed.epochs)} {second}")
    for epoch, (a, b) in enumerate(zip(plain.epochs, probed.epochs)):
        if a.keys() != b.keys():
            why.append(f"epoch {epoch}: logs {sorted(a)} vs {sorted(b)}")
            continue
        for key in a:
            x, y = a[key], b[key]
            same = (math.isnan(x) and math.isnan(y)) or x == y or abs(x - y) <= ATOL + RTOL * abs(x)
            if not same:
                why.append(f"epoch {epoch} {key}: {x:.7g} plain, {y:.7g} {second}")
    return why[:3]


# -- the ways people change a model between fits ---------------------------------------------


def _data(n: int = 256, features: int = 8, classes: int = 3, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    y = (x[:, :classes].argmax(axis=1) + (rng.uniform(size=n) < 0.1)).astype("int32") % classes
    return x, y


def _nested() -> Any:
    keras = _keras()
    base = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu")], name="base")
    return keras.Sequential([keras.Input((8,)), base, keras.layers.Dense(3)])


def _mlp(dropout: float = 0.0) -> Any:
    keras = _keras()
    layers = [keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="hidden")]
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    return keras.Sequential([*layers, keras.layers.Dense(3, name="out")])


def _loss() -> Any:
    return _keras().losses.SparseCategoricalCrossentropy(from_logits=True)


def _compile(model: Any, optimizer: Any = "adam", **kwargs: Any) -> None:
    model.compile(optimizer, _loss(), metrics=["accuracy"], **kwargs)


def _fit(model: Any, run: Run, epochs: int = 2, **kwargs: Any) -> Any:
    x, y = _data()
    kwargs.setdefault("batch_size", 32)
    return model.fit(x, y, epochs=epochs, verbose=0, shuffle=False, callbacks=run.callbacks(), **kwargs)


def _set_base_trainable(model: Any, value: bool) -> None:
    for layer in model.layers[0].layers:
        layer.trainable = value


def unfreeze_nested_without_compile(run: Run) -> None:
    """The issue's program: freeze a nested base, fit, unfreeze without compiling, fit again."""
    model = _nested()
    _set_base_trainable(model, False)
    _compile(model)
    _fit(model, run)
    _set_base_trainable(model, True)
    _fit(model, run)


def unfreeze_nested_plain_first(run: Run) -> None:
    """The same, the first fit without any callback."""
    model = _nested()
    _set_base_trainable(model, False)
    _compile(model)
    x, y = _data()
    model.fit(x, y, epochs=1, verbose=0, shuffle=False)
    _set_base_trainable(model, True)
    _fit(model, run)


def unfreeze_callback_first_then_plain(run: Run) -> None:
    """The callback on the first fit only: the second, plain, must run as if it had never been there."""
    model = _nested()
    _set_base_trainable(model, False)
    _compile(model)
    _fit(model, run)
    _set_base_trainable(model, True)
    x, y = _data()
    history = model.fit(x, y, epochs=2, verbose=0, shuffle=False)
    run.epochs.extend({"loss": float(v)} for v in history.history["loss"])


def unfreeze_with_compile(run: Run) -> None:
    model = _nested()
    _set_base_trainable(model, False)
    _compile(model)
    _fit(model, run)
    _set_base_trainable(model, True)
    _compile(model, _keras().optimizers.Adam(1e-4))
    _fit(model, run)


def freeze_without_compile(run: Run) -> None:
    """Freeze after a fit without compiling: Keras goes on training the frozen layer."""
    model = _mlp()
    _compile(model)
    _fit(model, run)
    model.get_layer("hidden").trainable = False
    _fit(model, run)


def freeze_with_compile(run: Run) -> None:
    model = _mlp()
    _compile(model)
    _fit(model, run)
    model.get_layer("hidden").trainable = False
    _compile(model)
    _fit(model, run)


def flip_twice_without_compile(run: Run) -> None:
    model = _mlp()
    _compile(model)
    _fit(model, run, epochs=1)
    model.get_layer("hidden").trainable = False
    _fit(model, run, epochs=1)
    model.get_layer("hidden").trainable = True
    _fit(model, run, epochs=1)


def new_optimizer_between_fits(run: Run) -> None:
    model = _mlp()
    _compile(model, _keras().optimizers.SGD(0.05))
    _fit(model, run)
    _compile(model, _keras().optimizers.Adam(1e-3))
    _fit(model, run)


def same_optimizer_compiled_again(run: Run) -> None:
    model = _mlp()
    optimizer = _keras().optimizers.Adam(1e-3)
    _compile(model, optimizer)
    _fit(model, run)
    _compile(model, optimizer)
    _fit(model, run)


def second_fit(run: Run) -> None:
    model = _mlp(dropout=0.2)
    _compile(model)
    _fit(model, run, validation_split=0.25)
    _fit(model, run, validation_split=0.25)


def learning_rate_callbacks(run: Run) -> None:
    keras = _keras()
    model = _mlp()
    _compile(model, keras.optimizers.SGD(0.1))
    x, y = _data()
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr)
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, factor=0.5, min_delta=1.0)
    model.fit(x, y, epochs=3, verbose=0, shuffle=False, callbacks=[schedule, plateau, *run.callbacks()])


def learning_rate_schedule(run: Run) -> None:
    keras = _keras()
    model = _mlp()
    _compile(model, keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(1e-2, 5, 0.9)))
    _fit(model, run, epochs=3)


def steps_per_epoch_and_initial_epoch(run: Run) -> None:
    import tensorflow as tf

    model = _mlp()
    _compile(model)
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)
    model.fit(dataset, epochs=2, steps_per_epoch=5, verbose=0, callbacks=run.callbacks())
    model.fit(dataset, epochs=4, initial_epoch=2, steps_per_epoch=5, verbose=0, callbacks=run.callbacks())


def _custom_step_model() -> Any:
    keras = _keras()
    import tensorflow as tf

    class CustomStep(keras.Model):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = self.compute_loss_value(x, y)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.tracker.update_state(loss)
            return {"loss": self.tracker.result()}

        def compute_loss_value(self, x, y):
            return tf.reduce_mean(_loss()(y, self(x, training=True)))

        @property
        def metrics(self):
            return [self.tracker]

    inputs = keras.Input((8,))
    outputs = keras.layers.Dense(3)(keras.layers.Dense(16, activation="relu", name="hidden")(inputs))
    model = CustomStep(inputs, outputs)
    model.tracker = keras.metrics.Mean(name="loss")
    return model


def custom_train_step(run: Run) -> None:
    model = _custom_step_model()
    model.compile(_keras().optimizers.Adam(1e-3))
    _fit(model, run)
    _fit(model, run)


def custom_train_step_unfrozen_without_compile(run: Run) -> None:
    model = _custom_step_model()
    model.get_layer("hidden").trainable = False
    model.compile(_keras().optimizers.Adam(1e-3))
    _fit(model, run)
    model.get_layer("hidden").trainable = True
    _fit(model, run)


def subclassed_model(run: Run) -> None:
    keras = _keras()

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(16, activation="relu")
            self.out = keras.layers.Dense(3)

        def call(self, x, training=False):
            return self.out(self.hidden(x))

    model = Subclassed()
    _compile(model)
    _fit(model, run)
    model.hidden.trainable = False
    _fit(model, run)


CHANGES: dict[str, Callable[[Run], Any]] = {
    f.__name__: f
    for f in (
        unfreeze_nested_without_compile,
        unfreeze_nested_plain_first,
        unfreeze_callback_first_then_plain,
        unfreeze_with_compile,
        freeze_without_compile,
        freeze_with_compile,
        flip_twice_without_compile,
        new_optimizer_between_fits,
        same_optimizer_compiled_again,
        second_fit,
        learning_rate_callbacks,
        learning_rate_schedule,
        steps_per_epoch_and_initial_epoch,
        custom_train_step,
        custom_train_step_unfrozen_without_compile,
        subclassed_model,
    )
}


def _seeded(program: Callable[[Run], Any], seed: int = 0) -> Callable[[Run], Any]:
    def seeded(run: Run) -> Any:
        _keras().utils.set_random_seed(seed)
        return program(run)

    return seeded


# -- the demo's scenarios and the real-bug zoo -------------------------------------------------


def demo_programs() -> dict[str, Callable[[Run], Any]]:
    """Each scenario trains with `demo.scenarios.HealthCallback`: swapped for this run's callback."""
    from demo import scenarios

    def program(scenario: Any) -> Callable[[Run], Any]:
        def train(run: Run) -> Any:
            original = scenarios.HealthCallback
            scenarios.HealthCallback = lambda log_dir=None, **kwargs: run.callback()
            try:
                return scenario.train(run.log_dir, seed=0)
            finally:
                scenarios.HealthCallback = original

        return train

    return {f"demo/{s.name}": program(s) for s in scenarios.SCENARIOS}


def real_bug_programs() -> dict[str, Callable[[Run], Any]]:
    from bench.real_bug_zoo import all_cases

    def program(case: Any, buggy: bool) -> Callable[[Run], Any]:
        return lambda run: case.run(buggy, 0, run.callbacks())

    return {
        f"real_bugs/{case.name}/{'buggy' if buggy else 'fixed'}": program(case, buggy)
        for case in all_cases()
        for buggy in (True, False)
    }


def programs(groups: tuple[str, ...]) -> dict[str, Callable[[Run], Any]]:
    chosen: dict[str, Callable[[Run], Any]] = {}
    if "changes" in groups:
        chosen.update({name: _seeded(f) for name, f in CHANGES.items()})
    if "demo" in groups:
        chosen.update(demo_programs())
    if "real_bugs" in groups:
        chosen.update(real_bug_programs())
    return chosen


# -- running and counting ----------------------------------------------------------------------


def compare(name: str, program: Callable[[Run], Any], control: bool = False) -> dict[str, Any]:
    """`control`: the second run plain too (what differs then is the program's own nondeterminism)."""
    started = time.perf_counter()
    plain, probed = run_once(program, probed=False), run_once(program, probed=not control)
    return {
        "program": name,
        "differences": differences(plain, probed, "plain again" if control else "with the callback"),
        "crash_plain": plain.crash,
        "crash_probed": probed.crash,
        "epochs": len(plain.epochs),
        "seconds": round(time.perf_counter() - started, 1),
    }


def tf_keras_results(names: list[str] | None, control: bool = False) -> list[dict[str, Any]]:
    """The model-change programs on tf_keras, in a subprocess (Keras is chosen at import)."""
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    command = [sys.executable, os.path.abspath(__file__), "--groups", "changes", "--json"]
    if names:
        command += ["--only", *names]
    if control:
        command.append("--control")
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        return [{"program": "tf_keras", "differences": [f"subprocess failed: {done.stderr[-500:]}"]}]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for result in results:
        result["program"] = f"tf_keras/{result['program']}"
    return results


def run(
    groups: tuple[str, ...],
    only: list[str] | None = None,
    control: bool = False,
    echo: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    chosen = programs(groups)
    if only:
        chosen = {name: p for name, p in chosen.items() if name in only}
    results = []
    for name, program in chosen.items():
        results.append(compare(name, program, control))
        if echo:
            echo(results[-1])
    if "tf_keras" in groups:
        changes = [name for name in only or CHANGES if name in CHANGES]
        if changes:
            for result in tf_keras_results(changes, control):
                results.append(result)
                if echo:
                    echo(result)
    return results


def summary(results: list[dict[str, Any]]) -> str:
    identical = sum(not r["differences"] for r in results)
    caused = sum(1 for r in results if r.get("crash_probed") and not r.get("crash_plain"))
    return f"identical: {identical} of {len(results)}; crashes caused by the callback: {caused}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", nargs="+", choices=GROUPS, default=list(GROUPS))
    parser.add_argument("--only", nargs="+", help="program names (a tf_keras program by its Keras 3 name)")
    parser.add_argument("--json", action="store_true", help="one JSON list on the last line")
    parser.add_argument(
        "--control", action="store_true", help="both runs plain: which programs differ without the callback"
    )
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("tb_trainhealth").setLevel(logging.ERROR)

    def line(r: dict[str, Any]) -> None:
        verdict = "same" if not r["differences"] else "DIFFERENT: " + "; ".join(r["differences"])
        crash = f" (crashes: {r['crash_plain']})" if r.get("crash_plain") else ""
        print(f"{r['program']:<60} {verdict}{crash}  [{r.get('seconds', '-')} s]", flush=True)

    results = run(tuple(args.groups), args.only, args.control, None if args.json else line)
    print(json.dumps(results) if args.json else summary(results))
    return 0 if all(not r["differences"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
