"""Builds RunSignals from any TensorBoard DataProvider (the plugin's, or the CLI's over a logdir).

Runs are grouped the way Keras lays them out: `keras.callbacks.TensorBoard(log_dir=D)`
writes `D/train` and `D/validation`, HealthCallback writes `D` itself; all three are
one training run named `D`. Loss curves are taken from our own tags when present,
else from Keras' (`epoch_loss`, `batch_loss`) or plain `tf.summary.scalar` tags.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import time
from typing import Any

import numpy as np
from tensorboard import context as tb_context
from tensorboard.data import provider as tb_provider

from tb_trainhealth import engine, schema
from tb_trainhealth import signals as sig
from tb_trainhealth.findings import Finding, run_status
from tb_trainhealth.signals import Layer, LayerSeries, RunSignals, Series

logger = logging.getLogger(__name__)

KERAS_SUBRUNS = ("train", "validation")
SCALARS_PLUGIN = "scalars"
# Points per series handed to the rules, by the CLI and the plugin alike, so a diagnosis
# never depends on where it is looked at. Rules are built to work on downsampled series;
# discrete events are separate records and never downsampled.
DEFAULT_DOWNSAMPLE = 5000

# Keras' names for classification accuracy in `logs` (one is enough).
ACCURACY_KEYS = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy")
OUR_SCALARS = {
    schema.TAG_LOSS: sig.LOSS,
    schema.TAG_GRAD_NORM: sig.GRAD_NORM,
    schema.TAG_LEARNING_RATE: sig.LEARNING_RATE,
    schema.TAG_STEP_TIME_MS: sig.STEP_TIME_MS,
    schema.TAG_INPUT_WAIT_MS: sig.INPUT_WAIT_MS,
    schema.TAG_NONFINITE_COUNT: sig.NONFINITE_COUNT,
    schema.TAG_LOSS_SCALE: sig.LOSS_SCALE,
    schema.TAG_HOST_MEMORY_MB: sig.HOST_MEMORY_MB,
    schema.TAG_DEVICE_MEMORY_MB: sig.DEVICE_MEMORY_MB,
    schema.epoch_tag("loss"): sig.EPOCH_LOSS,
    schema.epoch_tag("val_loss"): sig.EPOCH_VAL_LOSS,
    **{schema.epoch_tag(key): sig.EPOCH_ACCURACY for key in ACCURACY_KEYS},
    **{schema.epoch_tag("val_" + key): sig.EPOCH_VAL_ACCURACY for key in ACCURACY_KEYS},
}
OUR_LAYER_TENSORS = {
    schema.TAG_LAYER_GRAD_NORM: sig.LAYER_GRAD_NORM,
    schema.TAG_LAYER_WEIGHT_NORM: sig.LAYER_WEIGHT_NORM,
    schema.TAG_LAYER_UPDATE_RATIO: sig.LAYER_UPDATE_RATIO,
    schema.TAG_LAYER_GRAD_NONFINITE: sig.LAYER_GRAD_NONFINITE,
}
# Loss tags written by Keras' TensorBoard callback or by hand with tf.summary.scalar.
TRAIN_LOSS_TAGS = {
    "epoch_loss": sig.EPOCH_LOSS,
    "batch_loss": sig.BATCH_LOSS,
    "loss": sig.LOSS,
    "train_loss": sig.LOSS,
    "training_loss": sig.LOSS,
    "train/loss": sig.LOSS,
    "loss/train": sig.LOSS,
    "val_loss": sig.EPOCH_VAL_LOSS,
    "epoch_val_loss": sig.EPOCH_VAL_LOSS,
    "validation_loss": sig.EPOCH_VAL_LOSS,
    "val/loss": sig.EPOCH_VAL_LOSS,
    "loss/validation": sig.EPOCH_VAL_LOSS,
}
VALIDATION_LOSS_TAGS = {"epoch_loss": sig.EPOCH_VAL_LOSS, "loss": sig.EPOCH_VAL_LOSS}


@dataclasses.dataclass
class RunGroup:
    """One training run: its own TensorBoard run plus Keras' train/validation sub-runs."""

    name: str
    members: dict[str, str]  # role ("main", "train", "validation") -> TensorBoard run name


@dataclasses.dataclass
class Diagnosis:
    """One run's diagnosis, as the CLI and the tab show it."""

    group: RunGroup
    signals: RunSignals
    findings: list[Finding]
    errors: list[str]
    fingerprint: tuple[int, float]

    @property
    def status(self) -> str:
        return run_status(self.findings)


def group_runs(run_names: list[str], standalone: frozenset[str] = frozenset()) -> list[RunGroup]:
    """Group Keras' `train`/`validation` sub-runs under their parent; runs in `standalone`
    (written by HealthCallback, even into a directory named `train`) stay runs of their own."""
    groups: dict[str, dict[str, str]] = {}
    for run in run_names:
        parent, base = posixpath.split(run) if run != "." else ("", run)
        if base in KERAS_SUBRUNS and run not in standalone:
            groups.setdefault(parent or ".", {})[base] = run
        else:
            groups.setdefault(run, {})["main"] = run
    return [RunGroup(name, members) for name, members in sorted(groups.items())]


class SignalReader:
    """Reads RunSignals for run groups through one DataProvider; one listing per call of `groups`."""

    def __init__(
        self,
        data_provider: tb_provider.DataProvider,
        experiment_id: str = "",
        ctx: Any = None,
        downsample: int = DEFAULT_DOWNSAMPLE,
        listing_ttl: float = 0.0,
    ):
        """listing_ttl: reuse the tag listing for this many seconds (the plugin's routes for one
        page refresh share it; TensorBoard itself only reloads data every few seconds)."""
        self._provider = data_provider
        self._listing_ttl = listing_ttl
        self._listed_at = -float("inf")
        self._groups: list[RunGroup] = []
        self._experiment_id = experiment_id
        self._ctx = ctx if ctx is not None else tb_context.RequestContext()
        self._downsample = downsample
        self._ours_scalars: dict[str, dict[str, Any]] = {}
        self._ours_tensors: dict[str, dict[str, Any]] = {}
        self._ours_records: dict[str, dict[str, Any]] = {}
        self._plain_scalars: dict[str, dict[str, Any]] = {}

    def groups(self) -> list[RunGroup]:
        """List the runs (refreshing what is known about their tags, at most every listing_ttl s)."""
        now = time.monotonic()
        if now - self._listed_at < self._listing_ttl:
            return self._groups
        kwargs = {"experiment_id": self._experiment_id}
        self._ours_scalars = self._provider.list_scalars(self._ctx, plugin_name=schema.PLUGIN_NAME, **kwargs)
        self._ours_tensors = self._provider.list_tensors(self._ctx, plugin_name=schema.PLUGIN_NAME, **kwargs)
        self._ours_records = self._provider.list_tensors(self._ctx, plugin_name=schema.RECORDS_PLUGIN_NAME, **kwargs)
        self._plain_scalars = self._provider.list_scalars(self._ctx, plugin_name=SCALARS_PLUGIN, **kwargs)
        ours = frozenset(self._ours_scalars) | frozenset(self._ours_tensors) | frozenset(self._ours_records)
        names = ours | set(self._plain_scalars)
        self._groups = [g for g in group_runs(sorted(names), standalone=ours) if self._relevant(g)]
        self._listed_at = now
        return self._groups

    def _relevant(self, group: RunGroup) -> bool:
        """Runs with our data or with a loss curve; other tools' runs are not ours to judge."""
        for run in group.members.values():
            if run in self._ours_scalars or run in self._ours_tensors or run in self._ours_records:
                return True
            if set(self._plain_scalars.get(run, {})) & set(TRAIN_LOSS_TAGS):
                return True
        return False

    def last_step(self, group: RunGroup) -> tuple[int, float]:
        """A cheap fingerprint of how far a group's data goes (max step, max wall time)."""
        step, wall = -1, 0.0
        for run in group.members.values():
            for listing in (self._ours_scalars, self._ours_tensors, self._ours_records, self._plain_scalars):
                for ts in listing.get(run, {}).values():
                    step, wall = max(step, ts.max_step), max(wall, ts.max_wall_time)
        return step, wall

    def diagnose(self, group: RunGroup) -> Diagnosis:
        """Read and diagnose one run; a run that cannot be read gets an error, never an exception."""
        fingerprint = self.last_step(group)
        try:
            signals = self.read(group)
            findings = engine.diagnose(signals)
            errors = list(signals.errors)
        except Exception as err:  # one bad run never hides the others
            logger.debug("could not diagnose run %r", group.name, exc_info=True)
            signals, findings, errors = RunSignals(group.name), [], [f"could not read run: {err}"]
        return Diagnosis(group, signals, findings, errors, fingerprint)

    def read(self, group: RunGroup) -> RunSignals:
        run = RunSignals(run=group.name)
        main = group.members.get("main")
        if main is not None:
            self._read_ours(main, run)
        for role, run_name in group.members.items():
            tag_map = VALIDATION_LOSS_TAGS if role == "validation" else TRAIN_LOSS_TAGS
            self._read_plain(run_name, tag_map, run)
        return run

    # -- our plugin's data --------------------------------------------------------------
    def _check_versions(self, run_name: str, run: RunSignals) -> bool:
        listings = [
            ts
            for listing in (self._ours_scalars, self._ours_tensors, self._ours_records)
            for ts in listing.get(run_name, {}).values()
        ]
        for ts in listings:
            try:
                schema.parse_plugin_content(ts.plugin_content)
            except schema.SchemaError as err:
                run.errors.append(str(err))
                return False
        return bool(listings)

    def _read_ours(self, run_name: str, run: RunSignals) -> None:
        if not self._check_versions(run_name, run):
            return
        run.has_health_data = True
        scalar_tags = [t for t in self._ours_scalars.get(run_name, {}) if t in OUR_SCALARS]
        for tag, points in self._read_scalars(schema.PLUGIN_NAME, run_name, scalar_tags).items():
            if points:
                run.series[OUR_SCALARS[tag]] = Series.of([p.step for p in points], [p.value for p in points])
        records = self._read_tensors(schema.RECORDS_PLUGIN_NAME, self._ours_records, run_name)
        for point in records.get(schema.TAG_RUN_INFO, [])[-1:]:
            run.info = _json_payload(point.numpy, run) or {}
        run.layers = [
            Layer(str(layer.get("name", "?")), int(layer.get("params", 0)))
            for layer in run.info.get("layers", [])
            if isinstance(layer, dict)
        ]
        seen: set[str] = set()  # an event written twice (a resumed writer) counts once
        for point in records.get(schema.TAG_EVENTS, []):
            payload = _json_payload(point.numpy, run)
            for event in payload if isinstance(payload, list) else []:
                key = json.dumps(event, sort_keys=True) if isinstance(event, dict) else None
                if key is not None and key not in seen:
                    seen.add(key)
                    run.events.append(event)
        tensors = self._read_tensors(schema.PLUGIN_NAME, self._ours_tensors, run_name)
        for tag, name in OUR_LAYER_TENSORS.items():
            points = [p for p in tensors.get(tag, []) if np.shape(p.numpy) == (len(run.layers),)]
            if points and run.layers:
                run.layer_series[name] = LayerSeries.of(
                    [p.step for p in points], np.stack([p.numpy for p in points]), len(run.layers)
                )

    def _read_tensors(self, plugin_name: str, listing: dict[str, Any], run_name: str) -> dict[str, list]:
        return self._read(self._provider.read_tensors, plugin_name, run_name, list(listing.get(run_name, {})))

    def _read_scalars(self, plugin_name: str, run_name: str, tags: list[str]) -> dict[str, list]:
        return self._read(self._provider.read_scalars, plugin_name, run_name, tags)

    def _read(self, read, plugin_name: str, run_name: str, tags: list[str]) -> dict[str, list]:
        if not tags:
            return {}
        return read(
            self._ctx,
            experiment_id=self._experiment_id,
            plugin_name=plugin_name,
            downsample=self._downsample,
            run_tag_filter=tb_provider.RunTagFilter(runs=[run_name], tags=tags),
        ).get(run_name, {})

    # -- loss curves from Keras' TensorBoard callback or plain tf.summary.scalar ---------
    def _read_plain(self, run_name: str, tag_map: dict[str, str], run: RunSignals) -> None:
        tags = [t for t in self._plain_scalars.get(run_name, {}) if t in tag_map and tag_map[t] not in run.series]
        for tag, points in sorted(self._read_scalars(SCALARS_PLUGIN, run_name, tags).items()):
            name = tag_map[tag]
            if points and name not in run.series:
                run.series[name] = Series.of([p.step for p in points], [p.value for p in points])


def _json_payload(value: Any, run: RunSignals) -> Any:
    try:
        raw = value.item() if hasattr(value, "item") else value
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
    except (ValueError, AttributeError, UnicodeDecodeError) as err:
        run.errors.append(f"unreadable tb-trainhealth record: {err}")
        return None
