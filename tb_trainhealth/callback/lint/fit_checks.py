"""The checks that look at the model and its data rather than at the step: once per fit
(model lint, tf.data pipeline lint), on the first batches (labels, input scale) and at
sampled epoch ends (dead or saturated units on the first batches: the activation probe).

Each check records plain events; the read-side rules turn them into findings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tb_trainhealth.callback.lint.activation_probe import ActivationProbe
from tb_trainhealth.callback.lint.data_lint import BatchLint
from tb_trainhealth.callback.lint.model_lint import lint_layers, lint_model
from tb_trainhealth.callback.lint.pipeline_lint import lint_dataset, user_dataset
from tb_trainhealth.callback.lint.weight_init import weight_init
from tb_trainhealth.callback.probe_guard import ProbeGuard, disable_on_error
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.step.input_probe import InputProbe
from tb_trainhealth.contract import payload
from tb_trainhealth.contract.events import ActivationsEvent, Event, LayerActivations
from tb_trainhealth.contract.vocab import Part


class FitChecks:
    """One per fit."""

    def __init__(self, model: Any, guard: ProbeGuard, recording: Recording, base_step: int):
        self.guard = guard
        self._model = model
        self._recording = recording
        self._base_step = base_step
        self._batch_lint: BatchLint | None = None
        self._activations: ActivationProbe | None = None

    def start(self, adapter: Any, input_probe: InputProbe) -> None:
        """At train begin: lint the model and the pipeline; have the first batches inspected."""
        self._lint_model()
        self._record_weight_init()
        self._lint_pipeline(adapter)
        self._batch_lint = self.guard.run(Part.BATCH_LINT, BatchLint, self._model)
        if self._batch_lint is not None:
            input_probe.inspect = lambda batch: self._inspect_batch(batch, input_probe)
        # (A subclassed model, whose layers cannot be tapped, builds a probe that is not `available`.)
        self._activations = self.guard.run(Part.ACTIVATIONS, ActivationProbe, self._model)

    def _record(self, events: list[Event]) -> None:
        """At the fit's step; a check repeated in this fit (same finding) is recorded once."""
        for event in events:
            event = dataclasses.replace(event, step=self._base_step)
            if event not in self._recording.pending:
                self._recording.event(event)

    @disable_on_error(Part.LINT)
    def _lint_model(self) -> None:
        """Does the last layer fit the loss, are layer settings sane?"""
        self._record(lint_model(self._model) + lint_layers(self._model))

    @disable_on_error(Part.WEIGHT_INIT)
    def _record_weight_init(self) -> None:
        """Kernel statistics before the first step (symmetric or badly scaled initialisation)."""
        event = weight_init(self._model)
        if event is not None:
            self._record([event])

    @disable_on_error(Part.PIPELINE_LINT)
    def _lint_pipeline(self, adapter: Any) -> None:
        """Is the user's tf.data pipeline built in a known-slow or wrong way?"""
        dataset = user_dataset(adapter) if adapter is not None else None
        if dataset is not None:
            self._record(lint_dataset(dataset))

    def _inspect_batch(self, batch: Any, input_probe: InputProbe) -> None:
        """First batches of a fit, on the host before their step: labels vs loss, input scale."""
        lint = self._batch_lint
        try:
            self._record(lint.inspect(batch))
        except Exception as err:
            input_probe.inspect = None
            self.guard.disable(Part.BATCH_LINT, err)
            return
        if lint.done:
            input_probe.inspect = None

    @disable_on_error(Part.BATCH_LINT)
    def finish(self) -> None:
        """The label statistics of a fit shorter than the batches they sample."""
        if self._batch_lint is not None:
            self._record(self._batch_lint.finish())

    @disable_on_error(Part.ACTIVATIONS)
    def measure_activations(self, step: int, epoch: int, final: bool = False) -> None:
        """Dead ReLU / saturated sigmoid-tanh shares on the first batches, at sampled epoch ends
        and when training ends (`final`: the state the last diagnosis judges)."""
        probe_x = self._batch_lint.first_inputs if self._batch_lint is not None else None
        probe = self._activations
        if probe is None or not probe.available or probe_x is None or not probe.due(step, final):
            return
        if not all(tf.is_tensor(t) for t in tf.nest.flatten(probe_x)):
            return  # per-replica values under a distribution strategy: no single batch to probe
        layers = probe.measure(probe_x, step)
        if layers:
            shares = {name: payload.parse(LayerActivations, entry) for name, entry in layers.items()}
            self._recording.event(ActivationsEvent(step=step, layers=shares, epoch=epoch))
