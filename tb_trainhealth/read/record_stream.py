"""The summary values of a local event file, decoded a batch of records at a time with NumPy.

A training run writes the same event over and over: one per step, the same tags, metadata and
tensor shapes, only the step, the wall time and the numbers differ. So records are grouped by
length, one record of a group is parsed (its wire format walked, and `event_pb2` for what it
means), and every record of the group whose bytes equal it outside those fields (the step's
varint, the wall time's 8 bytes, each value's float bytes) is decoded with array operations.
Records that match no such template (JSON records, a run's first events, anything unusual)
are parsed one by one with `event_pb2`. Either way each value's meaning is what the protobuf
parser says it is: the templates only skip parsing what is byte for byte the same.

What a file holds that this does not decode (a bad length checksum, a record cut short, a
record that is not an Event) raises NotSimple: the caller reads such a run with TensorBoard's
own loader instead.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, types_pb2
from tensorboard.util import tensor_util

from tb_trainhealth.read import event_files

_LENGTH = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")
_HEADER_BYTES = 12  # length (8) and its masked CRC (4)
_FOOTER_BYTES = 4  # the data's masked CRC
# Templates tried per record length before the rest of that length is parsed one by one.
TEMPLATES_PER_LENGTH = 8
# Float tensors decoded from their bytes; anything else goes through `tensor_util.make_ndarray`.
_FLOAT_DTYPES = {types_pb2.DT_FLOAT: np.dtype("<f4"), types_pb2.DT_DOUBLE: np.dtype("<f8")}


class NotSimple(Exception):
    """The file holds something this reader leaves to TensorBoard's own loader."""


@dataclasses.dataclass
class Part:
    """Some values of one tag, all decoded the same way: `order` is each value's place in the file
    (record index * 1000 + the value's index in its event, so values sort as they were written)."""

    order: np.ndarray  # int64
    steps: np.ndarray  # int64
    walls: np.ndarray  # float64
    first_value: Any  # the Summary.Value of the first of them (its metadata, its kind)
    dtype: np.dtype | None  # float values: their dtype (native byte order); None: `protos`
    shape: tuple[int, ...] = ()
    protos: list[Any] | None = None  # TensorProtos (not float) or arrays, one per value
    _rows: Any = None  # (buffer, starts of the records' data, start, end) of the values' bytes
    _numbers: np.ndarray | None = None  # float values decoded already

    def numbers(self, index: np.ndarray) -> np.ndarray:
        """The float values at positions `index` of this part (n x *shape)."""
        if self._numbers is not None:
            return self._numbers[index]
        buffer, starts, start, end = self._rows
        rows = np.lib.stride_tricks.sliding_window_view(buffer, end - start)[starts[index] + start]
        return (
            np.ascontiguousarray(rows)
            .view(self.dtype.newbyteorder("<"))
            .reshape((len(index), *self.shape))
            .astype(self.dtype)
        )


def record_offsets(data: memoryview | bytes) -> tuple[np.ndarray, np.ndarray]:
    """(start of each record's data, its length) for a whole file; NotSimple where the framing
    breaks (a length that fails its checksum, a file that ends inside a record)."""
    starts: list[int] = []
    good_headers: set[tuple[int, int]] = set()
    unpack, size, pos = _HEADER.unpack_from, len(data), 0
    add = starts.append
    while pos + _HEADER_BYTES <= size:
        header = unpack(data, pos)
        if header not in good_headers:  # records of one kind repeat their length: checked once
            if event_files._masked_crc(_LENGTH.pack(header[0])) != header[1]:
                raise NotSimple("a record's length fails its checksum")
            good_headers.add(header)
        add(pos)
        pos += header[0] + (_HEADER_BYTES + _FOOTER_BYTES)
    if pos != size:
        raise NotSimple("the file ends inside a record")
    offsets = np.array([*starts, size], np.int64)
    return offsets[:-1] + _HEADER_BYTES, np.diff(offsets) - (_HEADER_BYTES + _FOOTER_BYTES)


@dataclasses.dataclass
class FileValues:
    parts: dict[str, list[Part]]  # by tag
    records: int
    first_wall_time: float | None  # the first record's (a run's start time), None: no record


def read_file(path: str) -> FileValues:
    """Every summary value of the event file at `path`, by tag, in parts (values in file order
    once sorted by `Part.order`)."""
    with open(path, "rb") as f:
        data = f.read()
    starts, lengths = record_offsets(data)
    first = None
    if len(starts):
        first = _parse_event(data[starts[0] : starts[0] + lengths[0]]).wall_time
    return FileValues(decode(data, starts, lengths), len(starts), first)


def decode(data: bytes, starts: np.ndarray | None = None, lengths: np.ndarray | None = None) -> dict[str, list[Part]]:
    """The summary values of a whole file's bytes (`record_offsets`' framing, if not given)."""
    if starts is None or lengths is None:
        starts, lengths = record_offsets(data)
    buffer = np.frombuffer(data, np.uint8)
    out: dict[str, list[Part]] = {}
    slow: list[int] = []
    for length in np.unique(lengths).tolist():
        indices = np.flatnonzero(lengths == length)
        for _ in range(TEMPLATES_PER_LENGTH):
            if len(indices) < 2:
                break
            decoded = _decode_template(data, buffer, starts, indices, int(length), out)
            if decoded is None:  # the first is parsed one by one, the next one tried as a template
                slow.append(int(indices[0]))
                indices = indices[1:]
            else:
                indices = decoded
        slow.extend(indices.tolist())
    for index in sorted(slow):
        _decode_one(data[starts[index] : starts[index] + lengths[index]], index, out)
    return out


# -- one record at a time -------------------------------------------------------------
def _parse_event(raw: bytes) -> event_pb2.Event:
    try:
        return event_pb2.Event.FromString(raw)
    except DecodeError as err:
        raise NotSimple(f"a record is not an Event: {err}") from err


def _decode_one(raw: bytes, index: int, out: dict[str, list[Part]]) -> None:
    event = _parse_event(raw)
    if not event.HasField("summary"):
        return
    for position, value in enumerate(event.summary.value):
        kind = value.WhichOneof("value")
        if kind == "tensor" and value.tensor.dtype in _FLOAT_DTYPES:
            dtype = _FLOAT_DTYPES[value.tensor.dtype].newbyteorder("=")
            numbers = tensor_util.make_ndarray(value.tensor).astype(dtype)
            part = Part(*_one(index, position, event), value, dtype, numbers.shape, _numbers=numbers[None])
        elif kind == "tensor":
            part = Part(*_one(index, position, event), value, None, protos=[value.tensor])
        elif kind == "simple_value":
            part = Part(*_one(index, position, event), value, np.dtype(np.float32),
                        _numbers=np.array([value.simple_value], np.float32))  # fmt: skip
        else:
            continue  # images, histograms, audio: no plugin this package reads
        out.setdefault(value.tag, []).append(part)


def _one(index: int, position: int, event: event_pb2.Event) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.array([index * 1000 + position], np.int64)
    return order, np.array([event.step], np.int64), np.array([event.wall_time], np.float64)


# -- many records with one template -------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise NotSimple("a varint runs past its record")
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return result, pos


def _fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field of the message in data[start:end];
    for a length-delimited field, start:end is its payload."""
    fields = []
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(data, pos)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == 2:
            length, pos = _varint(data, pos)
            after = pos + length
        else:
            raise NotSimple(f"wire type {wire}")
        if after > end:
            raise NotSimple("a field runs past its message")
        fields.append((number, wire, pos, after))
        pos = after
    return fields


@dataclasses.dataclass
class _Template:
    mask: np.ndarray  # bool per byte: True where records may differ
    step: tuple[int, int]
    wall: tuple[int, int] | None
    values: list[tuple[Any, int, int, np.dtype, tuple[int, ...]]]  # (Summary.Value, start, end, dtype, shape)


def _template(raw: bytes) -> _Template | None:
    """Where records like `raw` may differ, and what those bytes mean; None: no template."""
    event = _parse_event(raw)
    mask = np.zeros(len(raw), bool)
    top = _fields(raw, 0, len(raw))
    numbers = [f[0] for f in top]
    if numbers.count(2) != 1 or numbers.count(1) > 1 or numbers.count(5) != 1:
        return None
    step = wall = None
    summary = None
    for number, wire, start, end in top:
        if number == 1 and wire == 1:
            wall = (start, end)
        elif number == 2 and wire == 0:
            step = (start, end)
        elif number == 5 and wire == 2:
            summary = (start, end)
        else:
            return None  # anything else in an event with a summary: parsed one by one
    if step is None or summary is None:
        return None
    values = []
    value_fields = _fields(raw, *summary)
    if len(value_fields) != len(event.summary.value):
        return None
    for (number, wire, start, end), value in zip(value_fields, event.summary.value):
        if number != 1 or wire != 2:
            return None
        inner = _fields(raw, start, end)
        kinds = [f for f in inner if f[0] in (2, 8)]
        if len(kinds) != 1 or len({f[0] for f in inner}) != len(inner):
            return None
        number, wire, start, end = kinds[0]
        if number == 2 and wire == 5:
            values.append((value, start, end, np.dtype("<f4"), ()))
            continue
        tensor = value.tensor
        dtype = _FLOAT_DTYPES.get(tensor.dtype)
        content = [f for f in _fields(raw, start, end) if f[0] == 4 and f[1] == 2]
        shape = tuple(d.size for d in tensor.tensor_shape.dim)
        if dtype is None or len(content) != 1 or any(n < 0 for n in shape):
            return None
        _, _, start, end = content[0]
        if end - start != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            return None
        values.append((value, start, end, dtype, shape))
    mask[step[0] : step[1]] = True
    if wall is not None:
        mask[wall[0] : wall[1]] = True
    for _, start, end, _, _ in values:
        mask[start:end] = True
    return _Template(mask, step, wall, values)


def _decode_template(
    data: bytes, buffer: np.ndarray, starts: np.ndarray, indices: np.ndarray, length: int, out: dict
) -> np.ndarray | None:
    """Decode the records at `indices` (all `length` bytes) that match the first one's template;
    returns the indices of those that do not (None: the first makes no template)."""
    first = int(starts[indices[0]])
    template = _template(data[first : first + length])
    if template is None:
        return None
    record_starts = starts[indices]
    reference = buffer[first : first + length]
    fixed = _runs(~template.mask)
    # One gather of each record's bytes up to the last that is not a value's (a memcpy per record).
    span = max(end for _, end in [*fixed, template.step, template.wall or (0, 0)])
    head = np.lib.stride_tricks.sliding_window_view(buffer, span)[record_starts]
    matches = np.ones(len(indices), bool)
    for start, end in fixed:  # the bytes every record of the template shares
        matches &= _same_bytes(np.ascontiguousarray(head[:, start:end]), reference[start:end])
    step_bytes = head[:, template.step[0] : template.step[1]]
    matches &= np.all(step_bytes[:, :-1] >= 0x80, axis=1) & (step_bytes[:, -1] < 0x80)
    if not matches[0]:
        return None  # cannot happen (the first matches itself): parsed one by one
    step_bytes, taken, record_starts = step_bytes[matches], indices[matches], record_starts[matches]
    steps = np.zeros(len(taken), np.uint64)
    for k in range(step_bytes.shape[1]):
        steps |= (step_bytes[:, k].astype(np.uint64) & np.uint64(0x7F)) << np.uint64(7 * k)
    steps = steps.view(np.int64)
    head = head[matches]
    if template.wall is not None:
        wall_bytes = head[:, template.wall[0] : template.wall[1]]
        walls = np.ascontiguousarray(wall_bytes).view("<f8").ravel().astype(np.float64)
    else:
        walls = np.zeros(len(taken), np.float64)
    for position, (value, start, end, dtype, shape) in enumerate(template.values):
        out.setdefault(value.tag, []).append(
            Part(
                taken * 1000 + position,
                steps,
                walls,
                value,
                dtype.newbyteorder("="),
                shape,
                _rows=(buffer, record_starts, start, end),
            )
        )
    return indices[~matches]


def _same_bytes(rows: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Which rows (n x k bytes, contiguous) equal `reference`: one memcmp per row."""
    kind = np.dtype(f"V{rows.shape[1]}")
    return rows.view(kind).ravel() == np.ascontiguousarray(reference).view(kind)[0]


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of True in `flags`."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))
