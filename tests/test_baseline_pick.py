"""Which run "the best earlier run of this model" is, and how the tab overlays two runs: on runs
built in memory (real runs through the route: tests/test_route_answers.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_trainhealth.compare.baseline_pick import (
    MARKER,
    best_earlier_run,
    marked_good,
    named_choice,
    pick_baseline,
    same_architecture,
    same_model,
    why_none_is_earlier,
)
from tb_trainhealth.compare.comparison import Comparison
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.contract.run_settings import RunSettings
from tb_trainhealth.findings import Evidence, Finding, Severity
from tb_trainhealth.plugin.compare_curves import layer_grad_ratio, overlay
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

MLP = (("dense", "Dense"), ("dense_1", "Dense"))


def run_of(
    name: str,
    last_write: float | None,
    val_accuracy: float | None = None,
    val_loss: float | None = None,
    loss: float | None = None,
    layers: tuple[tuple[str, str], ...] = MLP,
    model: str | None = "sequential",
    settings: dict | None = None,
) -> RunSignals:
    """A run whose per-epoch curves end at the given values (absent where None)."""
    epochs = np.array([50, 100, 150])
    series = {}
    for key, end in ((sig.EPOCH_VAL_ACCURACY, val_accuracy), (sig.EPOCH_VAL_LOSS, val_loss), (sig.EPOCH_LOSS, loss)):
        if end is not None:
            series[key] = Series.of(epochs, [end * 0.5, end * 2.0, end])  # the best is not the last
    return RunSignals(
        name,
        series=series,
        layers=[LayerInfo(layer) for layer, _ in layers],
        info=RunInfo(model=model),
        settings=RunSettings(layers, {"learning_rate": 0.001, **(settings or {})}),
        last_write=last_write,
    )


def test_the_best_final_validation_accuracy_among_earlier_runs_of_the_same_model_wins():
    run = run_of("now", 100.0, val_accuracy=0.3)
    candidates = [
        run,
        run_of("good", 10.0, val_accuracy=0.9),
        run_of("better", 20.0, val_accuracy=0.95),
        run_of("later", 200.0, val_accuracy=0.99),  # after the run: not a baseline for it
        run_of("same_time", 100.0, val_accuracy=0.99),
        run_of("unknown_time", None, val_accuracy=0.99),
        run_of("other_model", 5.0, val_accuracy=0.99, layers=(("conv2d", "Conv2D"), ("dense", "Dense"))),
        run_of("no_accuracy", 5.0, val_loss=0.01),  # an accuracy decides over a loss
    ]
    assert best_earlier_run(run, candidates) == "better"
    assert best_earlier_run(run_of("now", None, val_accuracy=0.3), candidates) is None


def test_without_accuracies_the_lowest_validation_loss_then_the_lowest_training_loss():
    run = run_of("now", 100.0)
    by_val_loss = [run_of("a", 1.0, val_loss=0.5, loss=0.01), run_of("b", 2.0, val_loss=0.2, loss=0.9)]
    assert best_earlier_run(run, by_val_loss) == "b"
    by_loss = [run_of("a", 1.0, loss=0.5), run_of("b", 2.0, loss=0.2), run_of("c", 3.0, loss=float("nan"))]
    assert best_earlier_run(run, by_loss) == "b"
    assert best_earlier_run(run, [run_of("c", 3.0, loss=float("nan")), run_of("d", 3.0)]) is None


def test_a_per_step_loss_ends_at_its_tails_median_not_its_last_noisy_step():
    def stepped(name: str, last: float, level: float) -> RunSignals:
        values = np.full(100, level)
        values[-1] = last
        return RunSignals(name, series={sig.LOSS: Series.of(np.arange(100), values)}, layers=[LayerInfo("d")],
                          info=RunInfo(model="sequential"), last_write=1.0)  # fmt: skip

    run = RunSignals("now", layers=[LayerInfo("d")], info=RunInfo(model="sequential_3"), last_write=9.0)
    assert best_earlier_run(run, [stepped("lucky_last_batch", 0.01, 0.8), stepped("steady", 0.9, 0.3)]) == "steady"


def test_runs_recorded_without_layer_classes_match_by_model_name_and_layer_count():
    plain = {"layers": ()}
    assert same_model(run_of("a", 1.0, model="sequential", **plain), run_of("b", 1.0, model="sequential_7", **plain))
    assert not same_model(run_of("a", 1.0, model="sequential", **plain), run_of("b", 1.0, model="functional", **plain))
    three = run_of("c", 1.0, layers=(("x", "Dense"),) * 3)
    three.settings = RunSettings()  # three trainable layers, no classes recorded
    assert not same_model(three, run_of("b", 1.0, **plain))
    assert not same_model(run_of("a", 1.0, model=None, **plain), run_of("b", 1.0, model=None, **plain))


# What the callback records of an MNIST-sized MLP: the input shape and the last Dense's units (classes).
MNIST = {"input_shape": "(28, 28)", "dense.units": 64, "dense_1.units": 10}


def test_a_run_of_another_input_shape_or_number_of_classes_is_another_model():
    run = run_of("now", 100.0, val_accuracy=0.3, settings=MNIST)
    cifar = run_of("cifar", 10.0, val_accuracy=0.99, settings={**MNIST, "input_shape": "(32, 32)"})
    binary = run_of("binary", 20.0, val_accuracy=0.98, settings={**MNIST, "dense_1.units": 1})
    wider = run_of("wider", 30.0, val_accuracy=0.5, settings={**MNIST, "dense.units": 256})  # a hidden layer
    unrecorded = run_of("unrecorded", 40.0, val_accuracy=0.4, settings={})  # recorded neither: not checked
    assert not same_model(cifar, run) and not same_model(binary, run)
    assert same_model(wider, run) and same_model(unrecorded, run)
    assert same_architecture(cifar, run) and same_architecture(binary, run)  # layers still match by position
    choice = pick_baseline(run, [run, cifar, binary, wider, unrecorded])
    assert (choice.baseline, choice.rule) == ("wider", "best")
    assert choice.model == {"layers": ["Dense", "Dense"], "model": "sequential", "input_shape": "(28, 28)",
                            "output_units": 10}  # fmt: skip
    assert "input_shape (28, 28)" in choice.why and "output units 10" in choice.why


def test_where_no_earlier_run_is_of_the_same_model_the_closest_are_named_with_what_differs():
    run = run_of("now", 100.0, val_accuracy=0.3, settings=MNIST)
    cifar = run_of("cifar", 10.0, val_accuracy=0.99, settings={**MNIST, "input_shape": "(32, 32)"})
    both = run_of("both", 20.0, val_accuracy=0.99, settings={**MNIST, "input_shape": "(32, 32)", "dense_1.units": 1})
    conv = run_of("conv", 30.0, val_accuracy=0.99, layers=(("conv2d", "Conv2D"), ("dense_1", "Dense")), settings=MNIST)
    later = run_of("later", 200.0, val_accuracy=0.99, settings=MNIST)  # the same model, but later
    choice = pick_baseline(run, [both, cifar, conv, later])
    assert (choice.baseline, choice.rule) == (None, "none")
    assert [name for name, _ in choice.closest] == ["conv", "cifar", "both"]  # fewest differences, then latest
    assert dict(choice.closest)["cifar"] == ("input_shape (32, 32) vs this run's (28, 28)",)
    assert dict(choice.closest)["both"][1] == "output units 1 vs this run's 10"
    assert dict(choice.closest)["conv"] == ("layer classes differ (layer 1: Conv2D vs this run's Dense)",)
    assert choice.why.startswith("no earlier run of the same model")
    assert "cifar: input_shape (32, 32) vs this run's (28, 28)" in choice.why
    assert choice.why == why_none_is_earlier(run, [both, cifar, conv, later])
    alone = pick_baseline(run, [later])
    assert alone.closest == () and alone.why.endswith("no run ended before this one")


def _warning(code: str = "overfitting") -> Finding:
    return Finding(code, Severity.WARNING, None, code, "", Evidence(series=()))


def test_a_run_marked_good_comes_first_then_runs_without_a_warning():
    three = {"dense_1.units": 3}
    run = run_of("now", 100.0, val_accuracy=0.3, settings=three)
    best, clean, marked = (run_of(name, when, val_accuracy=accuracy, settings=three)
                           for name, when, accuracy in (("best", 10.0, 0.95), ("clean", 20.0, 0.9), ("marked", 30.0, 0.5)))  # fmt: skip
    other_model = run_of("other", 40.0, val_accuracy=0.2, settings={"dense_1.units": 7})
    candidates = [run, best, clean, marked, other_model]
    findings = {"best": [_warning()], "clean": [], "marked": [_warning()], "other": []}
    today = pick_baseline(run, candidates)
    assert (today.baseline, today.rule) == ("best", "best")  # findings unknown: the best metric
    info_only = {"best": [dataclasses.replace(_warning(), severity=Severity.INFO)]}
    assert pick_baseline(run, candidates, info_only).rule == "no_warnings"
    assert pick_baseline(run, candidates, info_only).baseline == "best"
    clean_pick = pick_baseline(run, candidates, findings)
    assert (clean_pick.baseline, clean_pick.rule) == ("clean", "no_warnings")
    marked_pick = pick_baseline(run, candidates, findings, marked={"marked", "other"})  # another model: never
    assert (marked_pick.baseline, marked_pick.rule) == ("marked", "marked_good") and MARKER in marked_pick.why
    assert best_earlier_run(run, candidates, findings, marked={"other"}) == "clean"
    all_warned = {name: [_warning()] for name in ("best", "clean", "marked")}
    assert pick_baseline(run, candidates, all_warned).rule == "none"  # a broken run is no baseline
    assert pick_baseline(run, candidates, all_warned, marked={"marked"}).baseline == "marked"  # ...unless marked
    assert pick_baseline(run, [run_of("unranked", 10.0, settings=three)], marked={"unranked"}).baseline == "unranked"


def test_a_named_baseline_says_whether_it_is_of_the_same_model(tmp_path):
    run = run_of("now", 100.0, settings=MNIST)
    same = named_choice(run, run_of("same", 1.0, settings=MNIST))
    assert (same.baseline, same.rule, same.differs) == ("same", "named", ())
    other = named_choice(run, run_of("other", 1.0, settings={**MNIST, "dense_1.units": 2}))
    assert other.differs == ("output units 2 vs this run's 10",) and "not the same model" in other.why
    assert other.to_json()["differs"] == ["output units 2 vs this run's 10"] and other.to_json()["closest"] == []
    for run_dir in ("a", "b/c", "d"):
        (tmp_path / run_dir).mkdir(parents=True)
    (tmp_path / "b" / "c" / MARKER).touch()
    (tmp_path / "d" / "GOOD").touch()  # not the marker
    assert marked_good(str(tmp_path), ["a", "b/c", "d"]) == {"b/c"}
    assert marked_good("gs://bucket/logs", ["a"]) == set()


def _layered(name: str, steps: list[int], per_layer: list[float], layers=MLP, axis_epoch_steps=(50, 100)) -> RunSignals:
    rows = np.tile(per_layer, (len(steps), 1))
    return RunSignals(
        name,
        series={
            sig.LOSS: Series.of(steps, np.linspace(2, 1, len(steps))),
            sig.EPOCH_LOSS: Series.of(axis_epoch_steps, [1.5, 1.0]),
            sig.EPOCH_VAL_LOSS: Series.of(axis_epoch_steps, [1.6, 1.1]),
        },
        layer_series={sig.LAYER_GRAD_NORM: LayerSeries.of(steps, rows, len(per_layer))},
        layers=[LayerInfo(layer) for layer, _ in layers],
        settings=RunSettings(layers, {}),
    )


def test_layer_gradient_ratios_match_layers_by_position_and_use_the_shared_steps_only():
    renamed = (("dense_4", "Dense"), ("dense_5", "Dense"))  # the same model, numbered by another process
    run = _layered("run", list(range(1, 101)), [2.0, 0.5], layers=renamed)
    run.layer_series[sig.LAYER_GRAD_NORM].values[80:] = 1000.0  # after the baseline's last step: not compared
    baseline = _layered("base", list(range(1, 81)), [1.0, 1.0])
    rows = layer_grad_ratio(run, baseline)
    assert [(r["layer"], r["baseline_layer"]) for r in rows] == [("dense_4", "dense"), ("dense_5", "dense_1")]
    assert [r["ratio"] for r in rows] == [2.0, 0.5] and [r["run"] for r in rows] == [2.0, 0.5]
    other = _layered("other", list(range(1, 81)), [1.0, 1.0, 1.0], layers=(*MLP, ("dense_2", "Dense")))
    by_name = layer_grad_ratio(_layered("run", list(range(1, 81)), [2.0, 0.5]), other)  # not the same model
    assert [(r["baseline_layer"], r["ratio"]) for r in by_name] == [("dense", 2.0), ("dense_1", 0.5)]
    unknown = layer_grad_ratio(_layered("run", [1, 2], [2.0, 0.5], layers=renamed), other)
    assert [(r["baseline_layer"], r["run"], r["ratio"]) for r in unknown] == [(None, 2.0, None), (None, 0.5, None)]
    baseline.layer_series = {}
    assert [(r["run"], r["ratio"]) for r in layer_grad_ratio(run, baseline)] == [(None, None), (None, None)]


def _parted(step: int | None) -> Comparison:
    """A comparison whose runs parted at `step` (judged on nothing: no deciding metric)."""
    return dataclasses.replace(Comparison.without_baseline("run", ""), parted_at_step=step)


def test_overlay_is_per_step_when_steps_mean_the_same_and_per_epoch_when_the_batch_changed():
    run, baseline = _layered("run", list(range(1, 101)), [1.0, 1.0]), _layered("base", list(range(1, 101)), [1.0, 1.0])
    same = overlay(run, baseline, _parted(42))
    assert (same.x, same.loss, same.parted_at) == ("step", sig.LOSS, 42)
    assert set(same.run) == set(same.baseline) == {sig.LOSS, sig.EPOCH_VAL_LOSS}
    bigger_batch = _layered("base", list(range(1, 51)), [1.0, 1.0], axis_epoch_steps=(25, 50))
    epochs = overlay(run, bigger_batch, _parted(42))  # step 42 of the run is in its first epoch (steps 1-50)
    assert (epochs.x, epochs.loss, epochs.parted_at) == ("epoch", sig.EPOCH_LOSS, 1)
    assert epochs.run[sig.EPOCH_LOSS].steps.tolist() == epochs.baseline[sig.EPOCH_VAL_LOSS].steps.tolist() == [1, 2]
    assert overlay(run, bigger_batch, _parted(51)).parted_at == 2
    assert overlay(run, bigger_batch, _parted(None)).parted_at is None
