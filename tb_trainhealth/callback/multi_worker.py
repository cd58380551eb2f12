"""Who writes under a multi-worker strategy (tf_keras' MultiWorkerMirroredStrategy).

Every worker runs the same `fit` with its own HealthCallback, and every worker must trace the
same instrumented step (its all-reduce is a collective: a worker without it would hang the
others). The all-reduced gradients, hence the norms, are the same on every worker, so only
the chief writes the run (`strategy.extended.should_save_summary`, as Keras' own TensorBoard
callback decides): one run in the log dir. The other workers keep their records in memory,
and write a run of their own, `<log_dir>/worker_<index>`, only when their training crashes or
stalls (the chief's run does not see another worker's exception, nor where it hangs).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    task_type: str
    task_id: int
    chief: bool

    def own_log_dir(self, log_dir: str) -> str:
        """This worker's own run, next to the chief's (any `tf.io.gfile` path)."""
        return f"{log_dir.rstrip('/')}/{self.task_type}_{self.task_id}"


def worker_role(model: Any) -> WorkerRole | None:
    """This process's role when `model` trains under a strategy spanning several workers, else None."""
    strategy = getattr(model, "distribute_strategy", None)
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return None
    tasks = sum(len(addresses) for addresses in resolver.cluster_spec().as_dict().values())
    if tasks < 2:
        return None
    chief = bool(getattr(strategy.extended, "should_save_summary", True))
    return WorkerRole(str(resolver.task_type), int(resolver.task_id or 0), chief)


def replicas_per_worker(model: Any) -> int | None:
    """Replicas on each worker under a multi-worker strategy (None otherwise): replica r of the
    sync group trains on worker r // replicas_per_worker (TensorFlow numbers them worker by worker)."""
    if worker_role(model) is None:
        return None
    devices = getattr(model.distribute_strategy.extended, "worker_devices", ()) or ()
    return max(len(devices), 1)
