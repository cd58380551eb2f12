"""TensorBoard's own Scalars and Time Series dashboards show a HealthCallback-only run's loss curve,
and a run that Keras' TensorBoard callback writes into too gets no second copy of its series."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from tensorboard import context as tb_context
from tensorboard_process import get_json, running_tensorboard, wait_for

from tb_trainhealth import HealthCallback
from tb_trainhealth.contract import tags
from tb_trainhealth.read.logdir import open_logdir

EPOCH_LOGS = {"epoch/loss", "epoch/accuracy", "epoch/val_loss", "epoch/val_accuracy"}


def train(log_dir: str, *extra_callbacks) -> None:
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).random((256, 8), dtype=np.float32)
    y = (x.sum(axis=1) > 4).astype("int32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    callbacks = [HealthCallback(log_dir, verbose=False), *extra_callbacks]
    model.fit(x, y, epochs=2, batch_size=32, validation_split=0.25, verbose=0, callbacks=callbacks)


def scalar_tags(logdir: str) -> dict[str, dict]:
    provider = open_logdir(logdir)
    listing = provider.list_scalars(tb_context.RequestContext(), experiment_id="", plugin_name="scalars")
    return {run: dict(found) for run, found in listing.items()}


@pytest.fixture(scope="module")
def health_only_logdir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("dashboards")
    train(str(root / "health_only"))
    return str(root)


@pytest.mark.parametrize("load_fast", [False, True], ids=["python-ingester", "rust-data-server"])
def test_a_health_callback_only_run_has_its_loss_in_the_scalars_dashboard(health_only_logdir, load_fast):
    with running_tensorboard(health_only_logdir, load_fast=load_fast) as url:
        listing = wait_for(lambda: get_json(url + "/data/plugin/scalars/tags").get("health_only"), timeout=90)
        assert {"step/loss", "step/grad_norm", "step/learning_rate", *EPOCH_LOGS} <= set(listing or {})
        assert get_json(url + "/data/plugins_listing")["scalars"]["enabled"]  # not INACTIVE
        points = get_json(url + "/data/plugin/scalars/scalars?run=health_only&tag=step/loss")
        assert [p[1] for p in points] == list(range(1, 13))  # every step (6 per epoch), as Keras counts them
        assert all(np.isfinite(p[2]) for p in points)


def test_the_plain_scalars_are_the_values_the_health_tags_hold(health_only_logdir):
    """Same values as ours; and the readers do not take them for a loss curve of their own."""
    from conftest import read_logdir

    provider = open_logdir(health_only_logdir)
    ctx = tb_context.RequestContext()

    def values(plugin: str, tag: str) -> list[tuple[int, float]]:
        read = provider.read_scalars(
            ctx, experiment_id="", plugin_name=plugin, downsample=1000, run_tag_filter=_filter("health_only", tag)
        )
        return [(p.step, p.value) for p in read["health_only"][tag]]

    signals = read_logdir(health_only_logdir)["health_only"]
    ours = list(zip(signals.series["loss"].steps.tolist(), signals.series["loss"].values.tolist()))
    plain = values("scalars", "step/loss")
    assert [step for step, _ in plain] == [step for step, _ in ours]  # every step of a short run
    np.testing.assert_allclose([v for _, v in plain], [v for _, v in ours], rtol=1e-6)
    assert values("scalars", "epoch/val_loss") == values(tags.PLUGIN_NAME, tags.epoch_tag("val_loss"))
    assert signals.axis == "step" and len(signals.series["loss"]) == 12


def _filter(run: str, tag: str):
    from tensorboard.data import provider as tb_provider

    return tb_provider.RunTagFilter(runs=[run], tags=[tag])


@pytest.mark.parametrize("update_freq", ["epoch", 1])
def test_no_second_copy_of_what_keras_tensorboard_writes_into_the_same_run(tmp_path, update_freq):
    train(str(tmp_path / "run"), keras.callbacks.TensorBoard(log_dir=str(tmp_path / "run"), update_freq=update_freq))
    listing = scalar_tags(str(tmp_path))
    ours = set(listing["run"])
    assert not ours & EPOCH_LOGS and "epoch_loss" in listing["run/train"]  # Keras' epoch logs only
    assert {"step/grad_norm", "step/learning_rate"} <= ours  # Keras writes neither per step
    assert ("step/loss" in ours) == (update_freq == "epoch")  # batch_loss is Keras' when it writes per batch


def test_a_keras_tensorboard_of_another_run_changes_nothing(tmp_path):
    train(str(tmp_path / "run"), keras.callbacks.TensorBoard(log_dir=str(tmp_path / "elsewhere"), update_freq=1))
    assert {"step/loss", *EPOCH_LOGS} <= set(scalar_tags(str(tmp_path))["run"])
