"""Writes realistic tb-trainhealth logdirs fast, without TensorFlow (for tests and benchmarks).

Each run is laid out as HealthCallback writes it (one event per step holding all of that step's
values): per-step loss, gradient norm, step time and input wait as one row vector (loss and
gradient norm also as plain scalars for TensorBoard's Scalars dashboard, on
`tags.plain_scalar_steps`), the learning rate every 100 steps, a
per-layer gradient-norm vector every `layer_every` steps and a weight-norm vector on the steps
the callback samples them (`row_layout.sample_interval`);
epoch losses, run info and discrete events of several kinds as events of their own.
Records are framed by hand (with google-crc32c's C checksum when installed): TensorBoard's
EventFileWriter checksums in pure Python and would take minutes per 100,000-step run.

Usage: python bench/synthetic_logs.py LOGDIR --runs 50 --steps 20000 --layers 10 --events 200
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import sys
import time
import types

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tb_trainhealth.callback.step.row_layout import sample_interval
from tb_trainhealth.contract import tags
from tb_trainhealth.read import event_files

EVENT_KINDS = ("nonfinite", "oom", "activations")
LEARNING_RATE_EVERY = 100


class RecordFile:
    """A TFRecord file of Event protos (the format every TensorBoard reader expects)."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.synthetic"
        self._file = open(os.path.join(directory, name), "wb")  # noqa: SIM115 (closed by close())
        self._pending: list[bytes] = []

    def write(self, event: event_pb2.Event) -> None:
        self._pending.append(event_files.framed(event.SerializeToString()))
        if len(self._pending) >= 4096:
            self.flush()

    def flush(self) -> None:
        self._file.write(b"".join(self._pending))
        self._file.flush()
        self._pending.clear()

    def close(self) -> None:
        self.flush()
        self._file.close()


def _tensor(array: np.ndarray) -> tensor_pb2.TensorProto:
    if array.dtype == object:  # one string
        return tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(), string_val=[array.item()]
        )
    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in array.shape]
    return tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims),
        tensor_content=np.ascontiguousarray(array, np.float32).tobytes(),
    )


def _value(tag: str, metadata, array) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=_tensor(np.asarray(array)))


def _event(step: int, values: list[summary_pb2.Summary.Value]) -> event_pb2.Event:
    return event_pb2.Event(step=step, wall_time=1.7e9 + step * 0.01, summary=summary_pb2.Summary(value=values))


def _record(step: int, tag: str, payload) -> event_pb2.Event:
    value = _value(tag, tags.record_metadata(), np.array(json.dumps(payload).encode(), dtype=object))
    return _event(step, [value])


def synthetic_event(kind: str, step: int, names: list[str]) -> dict:
    """One discrete event of `kind` as the callback records it."""
    if kind == "nonfinite":
        return {"kind": kind, "where": "gradients", "step": step, "layers": [names[step % len(names)]], "count": 1.0}
    if kind == "oom":
        return {"kind": kind, "step": step, "epoch": 0, "batch_size": 64, "next_batch_size": 32, "memory_mb": 900.0}
    layers = {name: {"dead": 0.01, "saturated": 0.0, "activation": "relu"} for name in names[:3]}
    return {"kind": "activations", "step": step, "epoch": 0, "layers": layers}


def write_run(
    path: str,
    steps: int,
    layers: int = 10,
    events: int = 0,
    steps_per_epoch: int = 500,
    layer_every: int = 1,
    seed: int = 0,
    diverge_at: int | None = None,
    event_kinds: tuple[str, ...] = ("nonfinite",),
) -> None:
    """One run: a healthy-looking loss curve (diverging from `diverge_at`), and `events`
    discrete events spread evenly over the steps, cycling through `event_kinds`."""
    rng = np.random.default_rng(seed)
    scalar_md, tensor_md, plain_md = tags.scalar_metadata(), tags.tensor_metadata(), tags.plain_scalar_metadata()
    t = np.arange(1, steps + 1)
    loss = (0.2 + 2.0 * np.exp(-t / (steps / 6))) * np.exp(0.1 * rng.normal(size=steps))
    if diverge_at is not None:
        loss[diverge_at:] *= np.exp(np.linspace(0, 5, steps - diverge_at))
    grad = 1.0 + 0.2 * rng.random(steps)
    step_ms = 10 + rng.random(steps)
    wait_ms = 0.1 * rng.random(steps)
    names = [f"dense_{i}" for i in range(layers)]
    spread = (1 + 0.1 * np.arange(layers)) / np.sqrt(layers)
    weights = np.full(layers, 3.0, np.float32)
    event_at = dict(zip(np.linspace(1, steps, events, dtype=int).tolist(), range(events))) if events else {}
    out = RecordFile(path)
    described: set[str] = set()
    info = {"schema": tags.SCHEMA_VERSION, "layers": [{"name": n, "params": 1000} for n in names], "start_step": 0}
    out.write(_record(0, tags.TAG_RUN_INFO, info))
    for i, step in enumerate(t.tolist()):
        # One event per step holding all its values, as HealthCallback writes its rows.
        values = [_value(tags.TAG_ROW, tensor_md, np.array([loss[i], grad[i], step_ms[i], wait_ms[i]], np.float32))]
        if tags.plain_scalar_steps(step):
            values.append(_value(tags.SCALARS_STEP_TAGS[tags.TAG_LOSS], plain_md, np.float32(loss[i])))
            values.append(_value(tags.SCALARS_STEP_TAGS[tags.TAG_GRAD_NORM], plain_md, np.float32(grad[i])))
        if step % LEARNING_RATE_EVERY == 1:
            values.append(_value(tags.TAG_LEARNING_RATE, scalar_md, np.float32(1e-3)))
        if step % layer_every == 0:
            values.append(_value(tags.TAG_LAYER_GRAD_NORM, tensor_md, grad[i] * spread))
        if step % sample_interval(step) == 0:
            values.append(_value(tags.TAG_LAYER_WEIGHT_NORM, tensor_md, weights))
        for value in values:  # the metadata only with each tag's first value in the file
            if value.tag in described:
                value.ClearField("metadata")
            described.add(value.tag)
        out.write(_event(step, values))
        if step % steps_per_epoch == 0:
            epoch_loss = np.float32(np.median(loss[max(0, i - steps_per_epoch) : i + 1]))
            out.write(_event(step, [_value(tags.epoch_tag("loss"), scalar_md, epoch_loss)]))
        if step in event_at:
            kind = event_kinds[event_at[step] % len(event_kinds)]
            out.write(_record(step, tags.TAG_EVENTS, [synthetic_event(kind, step, names)]))
    out.close()


def _write_one(job: tuple) -> None:
    write_run(*job[:-1], **job[-1])


def write_logdir(
    logdir: str, runs: int, steps: int, layers: int, events: int, layer_every: int = 1, processes: int = 2
) -> None:
    """`runs` runs (every fifth diverging halfway), written in parallel; existing runs are kept."""
    jobs = [
        (
            os.path.join(logdir, f"run_{r:03d}"),
            steps,
            {
                "layers": layers,
                "events": events,
                "layer_every": layer_every,
                "seed": r,
                "diverge_at": steps // 2 if r % 5 == 0 else None,
                "event_kinds": EVENT_KINDS,
            },
        )
        for r in range(runs)
        if not os.path.isdir(os.path.join(logdir, f"run_{r:03d}"))
    ]
    with multiprocessing.Pool(processes) as pool:
        pool.map(_write_one, jobs, chunksize=1)


def main() -> int:
    if "tensorflow" not in sys.modules:  # writing needs no TensorFlow: skip its 2 s import
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--events", type=int, default=0)
    parser.add_argument("--layer-every", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    write_logdir(args.logdir, args.runs, args.steps, args.layers, args.events, args.layer_every)
    print(f"wrote {args.runs} run(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
