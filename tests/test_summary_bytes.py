"""The step rows' hand-built Summary bytes read as the Summary protos they stand for."""

from __future__ import annotations

import glob

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import summary_pb2
from tensorboard.util import tensor_util

from tb_trainhealth.callback.record import summary_bytes
from tb_trainhealth.contract import tags

METADATA = tags.scalar_metadata().SerializeToString()


def _expected_value(tag: str, metadata: bytes, array: np.ndarray) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(
        tag=tag,
        metadata=summary_pb2.SummaryMetadata.FromString(metadata),
        tensor=tensor_util.make_tensor_proto(array.astype(np.float32)),
    )


@pytest.mark.parametrize("shape", [(), (1,), (3,), (200,)])  # 200 floats: multi-byte lengths
def test_a_value_parses_as_the_summary_value_it_stands_for(shape):
    array = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    tag = "health/" + "x" * 150  # a tag longer than 127 bytes: a two-byte length
    data = summary_bytes.value_head(tag, METADATA, shape) + array.tobytes()
    (value,) = summary_pb2.Summary.FromString(data).value
    expected = _expected_value(tag, METADATA, array)
    assert (value.tag, value.metadata) == (expected.tag, expected.metadata)
    np.testing.assert_array_equal(tensor_util.make_ndarray(value.tensor), array)
    assert tensor_util.make_ndarray(value.tensor).shape == shape


def test_rows_hold_their_columns_and_sparse_ones_only_where_present():
    loss = np.array([1.0, np.nan, 3.0], np.float32)
    norms = np.arange(6, dtype=np.float32).reshape(3, 2)
    lr_present = np.array([False, True, True])

    def column(tag, shape, values, present=None):
        head = summary_bytes.value_head(tag, None, shape)
        return summary_bytes.Column(tag, head, values, present, summary_bytes.value_head(tag, METADATA, shape))

    columns = [
        column("loss", (), loss),
        column("lr", (), np.array([0.1, 0.1, 0.2]), lr_present),
        column("norms", (2,), norms),
    ]
    rows = [summary_pb2.Summary.FromString(b) for b in summary_bytes.row_summaries(3, columns)]
    assert [[v.tag for v in row.value] for row in rows] == [
        ["loss", "norms"],
        ["loss", "lr", "norms"],
        ["loss", "lr", "norms"],
    ]
    # the metadata on each tag's first value only
    assert [[v.HasField("metadata") for v in row.value] for row in rows] == [
        [True, True],
        [False, True, False],
        [False] * 3,
    ]
    values = [{v.tag: tensor_util.make_ndarray(v.tensor) for v in row.value} for row in rows]
    np.testing.assert_array_equal([v["loss"] for v in values], loss)
    np.testing.assert_array_equal(np.stack([v["norms"] for v in values]), norms)
    np.testing.assert_allclose([values[1]["lr"], values[2]["lr"]], [0.1, 0.2], rtol=1e-6)


def test_health_writer_writes_one_event_per_row_that_tensorboard_reads(tmp_path):
    """Read as TensorBoard's Python loader reads it (the data server: test_tensorboard_e2e)."""
    from tb_trainhealth.callback.record.health_writer import HealthWriter

    writer = HealthWriter(str(tmp_path))
    steps = np.array([5, 6, 7])
    weights = np.full((3, 2), np.nan, np.float32)
    weights[1] = [4.0, 5.0]
    writer.write_rows(
        steps,
        {tags.TAG_LOSS: np.array([0.5, 0.4, 0.3]), tags.TAG_GRAD_NORM: np.array([1.0, np.nan, 3.0])},
        {tags.TAG_LEARNING_RATE: np.array([0.01, np.nan, np.nan]), tags.TAG_STEP_TIME_MS: np.array([np.nan, 9, 8])},
        {
            tags.TAG_LAYER_GRAD_NORM: (np.ones((3, 2), np.float32), None),
            tags.TAG_LAYER_WEIGHT_NORM: (weights, np.array([False, True, False])),
        },
        plain={tags.TAG_LOSS: "step/loss"},
    )
    writer.close()
    (path,) = glob.glob(str(tmp_path / "*tfevents*"))
    events = [e for e in event_file_loader.EventFileLoader(path).Load() if e.HasField("summary")]
    assert [e.step for e in events] == [5, 6, 7]
    by_step = {
        e.step: {
            v.tag: (v.metadata.plugin_data.plugin_name, tensor_util.make_ndarray(v.tensor)) for v in e.summary.value
        }
        for e in events
    }
    assert set(by_step[5]) == {tags.TAG_ROW, "step/loss", tags.TAG_LEARNING_RATE, tags.TAG_LAYER_GRAD_NORM}
    assert set(by_step[6]) == {tags.TAG_ROW, "step/loss", tags.TAG_LAYER_GRAD_NORM, tags.TAG_LAYER_WEIGHT_NORM}
    # metadata once per tag and file: on its first value
    assert by_step[5]["step/loss"][0] == tags.SCALARS_PLUGIN_NAME and by_step[6]["step/loss"][0] == ""
    assert by_step[6][tags.TAG_LAYER_WEIGHT_NORM][0] == tags.PLUGIN_NAME
    assert by_step[5][tags.TAG_ROW][0] == tags.PLUGIN_NAME
    # the row's columns: loss, gradient norm, step time, input wait (NaN: not measured)
    np.testing.assert_allclose(by_step[7][tags.TAG_ROW][1], [0.3, 3.0, 8.0, np.nan], rtol=1e-6)
    np.testing.assert_allclose(by_step[6][tags.TAG_ROW][1], [0.4, np.nan, 9.0, np.nan], rtol=1e-6)
    np.testing.assert_array_equal(by_step[6][tags.TAG_LAYER_WEIGHT_NORM][1], [4.0, 5.0])


def test_plain_scalars_are_thinned_after_the_first_steps_but_not_nan_the_newest_or_sparse_ones(tmp_path):
    from tb_trainhealth.callback.record.health_writer import HealthWriter

    writer = HealthWriter(str(tmp_path))
    steps = np.arange(tags.SCALARS_DENSE_STEPS - 4, tags.SCALARS_DENSE_STEPS + 26)
    lr = np.full(len(steps), np.nan)
    lr[[0, 7]] = [0.1, 0.2]  # a change on step 1003: not a multiple of SCALARS_EVERY
    loss = np.linspace(1, 2, len(steps))
    loss[17] = np.nan  # step 1013
    writer.write_rows(
        steps,
        {tags.TAG_LOSS: loss, tags.TAG_GRAD_NORM: np.ones(len(steps))},
        {tags.TAG_LEARNING_RATE: lr},
        {tags.TAG_LAYER_GRAD_NORM: (np.ones((len(steps), 2), np.float32), None)},
        plain={tags.TAG_LOSS: "step/loss", tags.TAG_LEARNING_RATE: "step/learning_rate"},
    )
    writer.close()
    (path,) = glob.glob(str(tmp_path / "*tfevents*"))
    by_tag: dict[str, list[int]] = {}
    for event in event_file_loader.EventFileLoader(path).Load():
        for value in event.summary.value:
            by_tag.setdefault(value.tag, []).append(event.step)
    assert by_tag[tags.TAG_ROW] == steps.tolist()  # ours: every step
    dense = tags.SCALARS_DENSE_STEPS
    assert by_tag["step/loss"] == [*range(dense - 4, dense + 1), dense + 10, dense + 13, dense + 20, dense + 25]
    assert by_tag["step/learning_rate"] == [dense - 4, dense + 3]
