"""RunInfo: the model description written once per `fit` under `tags.TAG_RUN_INFO`."""

from __future__ import annotations

import dataclasses
from typing import Any

from tb_trainhealth.contract import payload


@dataclasses.dataclass(frozen=True)
class LayerInfo:
    """A layer with trainable weights, in the order of the per-layer vectors' values."""

    name: str = "?"
    params: int = 0


@dataclasses.dataclass(frozen=True)
class InputSource:
    """What `fit` trained on: "tf.data", "arrays", "PyDataset", "generator", ..."""

    type: str = "?"
    workers: int | None = None  # PyDataset only
    use_multiprocessing: bool | None = None


@dataclasses.dataclass(frozen=True)
class CallbackInfo:
    """Another callback of the same fit: what the user already does (no fix suggests it again)."""

    name: str = "?"  # class name: "EarlyStopping", "ReduceLROnPlateau", ...
    restore_best_weights: bool | None = None  # EarlyStopping


@dataclasses.dataclass(frozen=True)
class RunInfo:
    schema: int | None = None
    model: str | None = None
    optimizer: str | None = None
    loss: str | None = None  # as compiled: a name, a class name or a function name
    loss_scale: bool = False  # mixed precision's LossScaleOptimizer
    layers: tuple[LayerInfo, ...] = ()
    steps_per_execution: int = 1
    input_wait_measured: bool = False
    input: InputSource | None = None
    start_step: int = 0
    learning_rate: float | None = None  # at the start of the fit (a schedule's first value)
    clips_gradients: bool = False  # the optimizer has clipnorm, global_clipnorm or clipvalue
    callbacks: tuple[CallbackInfo, ...] = ()
    # The stall watchdog ran: a run without it is never judged `ended_abruptly`.
    watchdog: bool = False
    stall_after: float | None = None  # as the user set it; None: the default allowance
    # Under a multi-worker strategy (MultiWorkerMirroredStrategy), replicas per worker: replicas
    # are numbered worker by worker, so replica r trains on worker r // replicas_per_worker.
    replicas_per_worker: int | None = None
    # The step this fit would end at (start_step + epochs x steps per epoch), where fit knows it,
    # and what the process may hold in host memory: `memory_growth` projects a climb onto both.
    planned_end_step: int | None = None
    host_memory_limit_mb: float | None = None

    def has_callback(self, name: str) -> bool:
        return any(callback.name == name for callback in self.callbacks)

    def to_json(self) -> dict[str, Any]:
        return payload.to_json(self)

    @classmethod
    def parse(cls, raw: Any) -> RunInfo:
        """Never fails on a JSON object: each unusable field keeps its default."""
        return payload.parse(cls, raw)
