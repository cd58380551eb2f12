"""Serialized `Summary` protos for the step probe's rows, built from byte templates.

A window of rows becomes one `Summary` per step (every value of that step in one event),
handed to TensorFlow's summary writer as raw bytes (`WriteRawProtoSummary`): one op per row
instead of a dozen summary ops and conditionals per row, each run on the writer thread,
beside the training on the same cores. Each value is a constant head (its tag,
metadata, and the tensor's dtype and shape, laid out as protobuf serializes them) followed
by the tensor's float32 bytes, the layout TensorFlow's own `WriteSummary` produces
(`tensor_content`), so every TensorBoard reader reads them alike.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

_FIELD_SUMMARY_VALUE = 1  # Summary.value
_FIELD_TAG, _FIELD_TENSOR, _FIELD_METADATA = 1, 8, 9  # Summary.Value
_FIELD_TENSOR_CONTENT = 4  # TensorProto.tensor_content
_LENGTH_DELIMITED = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(field: int) -> bytes:
    return _varint(field << 3 | _LENGTH_DELIMITED)


def _field(field: int, data: bytes) -> bytes:
    return _key(field) + _varint(len(data)) + data


def value_head(tag: str, metadata: bytes | None, shape: tuple[int, ...]) -> bytes:
    """The bytes of one `Summary.value` entry up to its float32 data, which follows it.

    metadata: a serialized SummaryMetadata, or None (see `Column`); shape: () for a scalar, (n,) for a vector."""
    count = int(np.prod(shape, dtype=np.int64))
    tensor_head = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=size) for size in shape]
        ),
    ).SerializeToString()
    tensor = tensor_head + _key(_FIELD_TENSOR_CONTENT) + _varint(4 * count)  # + the data
    described = _field(_FIELD_METADATA, metadata) if metadata is not None else b""
    value = (
        _field(_FIELD_TAG, tag.encode()) + described + _key(_FIELD_TENSOR) + _varint(len(tensor) + 4 * count) + tensor
    )
    return _key(_FIELD_SUMMARY_VALUE) + _varint(len(value) + 4 * count) + value


@dataclasses.dataclass(frozen=True)
class Column:
    """One tag's values in a window of rows.

    Only the first value of a tag in an event file needs its metadata: TensorBoard's loaders
    keep the first one they see per tag (TensorFlow 1's FileWriter stripped the others), and
    leaving it out of the rest makes the file smaller and faster to load (the metadata is
    most of a scalar value's bytes).
    `first_head` (with metadata, None: the tag was written before) goes on the first row present."""

    tag: str
    head: bytes  # value_head without metadata
    values: np.ndarray  # [rows] or [rows, n]
    present: np.ndarray | None = None  # which rows have a value (None: all)
    first_head: bytes | None = None


def row_summaries(rows: int, columns: list[Column]) -> list[bytes]:
    """One serialized Summary per row."""
    parts: list[list[bytes]] = [[] for _ in range(rows)]
    for column in columns:
        data = np.ascontiguousarray(column.values, "<f4").reshape(rows, -1)
        size = 4 * data.shape[1]
        blob = data.tobytes()
        present = range(rows) if column.present is None else np.flatnonzero(column.present).tolist()
        for n, i in enumerate(present):
            head = column.first_head if n == 0 and column.first_head is not None else column.head
            parts[i].append(head + blob[i * size : (i + 1) * size])
    return [b"".join(row) for row in parts]
