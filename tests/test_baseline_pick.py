"""Which run "the best earlier run of this model" is, and how the tab overlays two runs: on runs
built in memory (real runs through the route: tests/test_route_answers.py)."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.compare.baseline_pick import best_earlier_run, same_model
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.contract.run_settings import RunSettings
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
        settings=RunSettings(layers, {"learning_rate": 0.001}),
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


def test_overlay_is_per_step_when_steps_mean_the_same_and_per_epoch_when_the_batch_changed():
    run, baseline = _layered("run", list(range(1, 101)), [1.0, 1.0]), _layered("base", list(range(1, 101)), [1.0, 1.0])
    same = overlay(run, baseline, 42)
    assert (same.x, same.loss, same.parted_at) == ("step", sig.LOSS, 42)
    assert set(same.run) == set(same.baseline) == {sig.LOSS, sig.EPOCH_VAL_LOSS}
    bigger_batch = _layered("base", list(range(1, 51)), [1.0, 1.0], axis_epoch_steps=(25, 50))
    epochs = overlay(run, bigger_batch, 42)  # step 42 of the run is in its first epoch (steps 1-50)
    assert (epochs.x, epochs.loss, epochs.parted_at) == ("epoch", sig.EPOCH_LOSS, 1)
    assert epochs.run[sig.EPOCH_LOSS].steps.tolist() == epochs.baseline[sig.EPOCH_VAL_LOSS].steps.tolist() == [1, 2]
    assert overlay(run, bigger_batch, 51).parted_at == 2 and overlay(run, bigger_batch, None).parted_at is None
