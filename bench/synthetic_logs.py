"""Writes realistic tb-trainhealth logdirs fast, without TensorFlow (for tests and benchmarks).

Each run has the callback's tags: per-step loss, gradient norm, learning rate and step
time, per-layer gradient/weight norm vectors, epoch losses, run info and events.
Usage: python bench/synthetic_logs.py LOGDIR --runs 50 --steps 20000 --layers 10 --events 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tb_trainhealth import schema


def _value(tag: str, metadata, array) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor_util.make_tensor_proto(array))


def write_run(
    path: str,
    steps: int,
    layers: int = 10,
    events: int = 0,
    steps_per_epoch: int = 500,
    layer_every: int = 1,
    seed: int = 0,
    diverge_at: int | None = None,
) -> None:
    """One run: a healthy-looking loss curve (diverging from `diverge_at`), and `events` NaN events."""
    rng = np.random.default_rng(seed)
    scalar_md, tensor_md, record_md = schema.scalar_metadata(), schema.tensor_metadata(), schema.record_metadata()
    writer = EventFileWriter(path, max_queue_size=1000, flush_secs=3600)
    t = np.arange(1, steps + 1)
    loss = (0.2 + 2.0 * np.exp(-t / (steps / 6))) * np.exp(0.1 * rng.normal(size=steps))
    if diverge_at is not None:
        loss[diverge_at:] *= np.exp(np.linspace(0, 5, steps - diverge_at))
    grad = 1.0 + 0.2 * rng.random(steps)
    names = [f"dense_{i}" for i in range(layers)]
    info = {"schema": schema.SCHEMA_VERSION, "layers": [{"name": n, "params": 1000} for n in names], "start_step": 0}
    event_steps = set(np.linspace(1, steps, events, dtype=int).tolist()) if events else set()
    writer.add_event(
        event_pb2.Event(
            step=0,
            wall_time=0.0,
            summary=summary_pb2.Summary(
                value=[_value(schema.TAG_RUN_INFO, record_md, np.array(json.dumps(info).encode(), dtype=object))]
            ),
        )
    )
    for i, step in enumerate(t.tolist()):
        values = [
            _value(schema.TAG_LOSS, scalar_md, np.float32(loss[i])),
            _value(schema.TAG_GRAD_NORM, scalar_md, np.float32(grad[i])),
            _value(schema.TAG_LEARNING_RATE, scalar_md, np.float32(1e-3)),
            _value(schema.TAG_STEP_TIME_MS, scalar_md, np.float32(10 + rng.random())),
        ]
        if step % layer_every == 0:
            norms = (grad[i] / np.sqrt(layers) * (1 + 0.1 * np.arange(layers))).astype(np.float32)
            values.append(_value(schema.TAG_LAYER_GRAD_NORM, tensor_md, norms))
            values.append(_value(schema.TAG_LAYER_WEIGHT_NORM, tensor_md, np.full(layers, 3.0, np.float32)))
        if step % steps_per_epoch == 0:
            values.append(
                _value(
                    schema.epoch_tag("loss"),
                    scalar_md,
                    np.float32(np.median(loss[max(0, i - steps_per_epoch) : i + 1])),
                )
            )
        if step in event_steps:
            event = {
                "kind": "nonfinite",
                "where": "gradients",
                "step": step,
                "layers": [names[step % layers]],
                "count": 1.0,
            }
            values.append(_value(schema.TAG_EVENTS, record_md, np.array(json.dumps([event]).encode(), dtype=object)))
        writer.add_event(event_pb2.Event(step=step, wall_time=float(step), summary=summary_pb2.Summary(value=values)))
    writer.close()


def main() -> int:
    if "tensorflow" not in sys.modules:  # writing needs no TensorFlow: skip its 2 s import
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--events", type=int, default=0)
    parser.add_argument("--layer-every", type=int, default=10)
    args = parser.parse_args()
    for r in range(args.runs):
        write_run(
            os.path.join(args.logdir, f"run_{r:03d}"),
            args.steps,
            layers=args.layers,
            events=args.events,
            layer_every=args.layer_every,
            seed=r,
            diverge_at=args.steps // 2 if r % 5 == 0 else None,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
