"""What re-reading a growing run in a bucket costs: requests and bytes per reload.

TensorBoard re-reads its logdir every 30 s (the Health tab polls as often). Against each
emulator (moto's S3 server, gcp-storage-emulator) behind a counting proxy, a run's event file
grows by --rows rows per round and is uploaded whole, as HealthCallback's uploads do
(`bucket_mirror`); the reader is the plugin's and the CLI's Python loader (`LiveLogdir`) in
TensorBoard's TensorFlow stub, as in a TensorBoard without TensorFlow (docs/object-storage.md).
Each round prints the requests and the bytes the reload downloaded: event-file bytes, and all.

    python bench/bucket_reload.py [--scheme s3 gs] [--rounds 4] [--rows 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.modules["tensorflow"] = None  # as in a TensorBoard without TensorFlow: the stub reads buckets
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from bucket_emulators import counting_proxy, environment, running_emulator

TAGS = [f"health/layer_{i}/grad_norm" for i in range(10)]


def _grow(writer, first_step: int, rows: int) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    for step in range(first_step, first_step + rows):
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=1.0 / (step + 1)) for tag in TAGS]
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0e9 + step, summary=summary_pb2.Summary(value=values)))
    writer.flush()


def measure(scheme: str, rounds: int, rows: int) -> list[dict]:
    """One dict per reload: the bytes the file grew by, the requests and bytes the reload cost."""
    with running_emulator(scheme) as emulator, counting_proxy(emulator.endpoint) as (endpoint, traffic):
        env = {**emulator.env, **{k: endpoint for k, v in emulator.env.items() if v == emulator.endpoint}}
        with environment(env), tempfile.TemporaryDirectory() as local:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            from tb_trainhealth.read.logdir import LiveLogdir

            bucket = emulator.filesystem()
            writer = EventFileWriter(os.path.join(local, "run1"))
            name = os.path.basename(_event_file(local))
            remote = f"{emulator.url('logs/run1').split('://', 1)[1]}/{name}"
            _grow(writer, 0, rows)
            bucket.put_file(_event_file(local), remote)
            live = LiveLogdir(emulator.url("logs"))
            results, size = [], os.path.getsize(_event_file(local))
            for round_ in range(rounds):
                grown = 0
                if round_ % 2:  # odd rounds: the run grew; even ones: nothing new since the last reload
                    _grow(writer, (round_ + 1) * rows, rows)
                    grown = os.path.getsize(_event_file(local)) - size
                    size += grown
                    bucket.put_file(_event_file(local), remote)
                traffic.clear()
                live.reload()
                results.append({
                    "scheme": scheme, "round": round_, "file_bytes": size, "grown_bytes": grown,
                    "requests": len(traffic.requests), "bytes": traffic.total_bytes(),
                    "event_file_bytes": traffic.object_bytes("tfevents"),
                })  # fmt: skip
            writer.close()
            return results


def _event_file(local: str) -> str:
    (name,) = os.listdir(os.path.join(local, "run1"))
    return os.path.join(local, "run1", name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", nargs="+", default=["s3", "gs"], choices=["s3", "gs"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=200, help="steps of 10 scalars added per growing round")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [row for scheme in args.scheme for row in measure(scheme, args.rounds, args.rows)]
    if args.json:
        print(json.dumps(results))
        return
    print(f"{'scheme':6} {'round':>5} {'file B':>8} {'grew B':>7} {'requests':>8} {'bytes':>8} {'event-file B':>12}")
    for r in results:
        print(f"{r['scheme']:6} {r['round']:>5} {r['file_bytes']:>8} {r['grown_bytes']:>7} {r['requests']:>8} "
              f"{r['bytes']:>8} {r['event_file_bytes']:>12}")  # fmt: skip


if __name__ == "__main__":
    main()
