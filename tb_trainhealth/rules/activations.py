"""`dead_relu` and `saturated_activation`: from the callback's per-epoch activation probe.

A layer is flagged when more than half of it is dead / saturated (SageMaker
Debugger's `threshold_layer` of 50%) at the last measurement and has been since the
onset reported (so a layer that recovers is not flagged). Dead ReLU layers must also
be nearly all dead or have died while training (see DEAD_GROWTH).
"""

from __future__ import annotations

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import ActivationsEvent
from tb_trainhealth.findings import (
    CHANGE_HIDDEN_ACTIVATION,
    CHANGE_INITIALIZER,
    SCALE_INPUTS,
    Evidence,
    Fact,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.rules.common_fixes import LR_FIX_LOWER
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.rules.run_setup import large_rate
from tb_trainhealth.signals import RunSignals

LAYER_SHARE = 0.5
# Dead ReLU must also be either near total, or have grown while training ("dying"): a layer
# fed only positive inputs (pixels scaled to [0, 1]) starts with about half its units off for
# every sample (56% on the [0, 1]-pixel twin in tests/test_common_mistakes.py) and trains fine.
DEAD_NEARLY_ALL = 0.9
DEAD_GROWTH = 0.2


def _dying(run: RunSignals, layer: str, share: float) -> bool:
    first = next((s.layers[layer].dead for s in run.events_of(ActivationsEvent) if layer in s.layers), None)
    return share >= DEAD_NEARLY_ALL or (first is not None and share - first >= DEAD_GROWTH)


def _flagged(run: RunSignals, measure: str) -> list[tuple[str, int, float, str]]:
    """(layer, onset step, share at the end, activation) for layers over LAYER_SHARE until the end.
    measure: "dead" or "saturated"."""
    samples = run.events_of(ActivationsEvent)
    if not samples:
        return []
    flagged = []
    for name, last in samples[-1].layers.items():
        share = getattr(last, measure)
        if share is None or share <= LAYER_SHARE:
            continue
        onset = samples[-1].step
        for sample in reversed(samples):
            layer = sample.layers.get(name)
            value = getattr(layer, measure) if layer is not None else None
            if value is None or value <= LAYER_SHARE:
                break
            onset = sample.step
        flagged.append((name, onset, share, last.activation))
    return flagged


def _layer_facts(run: RunSignals, measure: str) -> tuple[Fact, ...]:
    """The share per layer at the first and the last probe: where it stands and how it got there."""
    samples = run.events_of(ActivationsEvent)
    first, last = samples[0], samples[-1]
    out: tuple[Fact, ...] = fact("probe steps", f"{first.step} and {last.step}" if last is not first else first.step)
    for name, layer in last.layers.items():
        share = getattr(layer, measure)
        if share is None:
            continue
        before = getattr(first.layers.get(name), measure, None)
        trend = f" (was {before:.0%})" if before is not None and last is not first else ""
        units = f" of {layer.units} units" if layer.units else ""
        out += fact(f"{name} ({layer.activation})", f"{share:.0%} {measure}{units}{trend}")
    return out


def _where(flagged: list[tuple[str, int, float, str]]) -> tuple[str, int, float, str]:
    """One finding for all flagged layers: (layers in words, first onset, worst share, worst layer)."""
    layer, _, share, _ = max(flagged, key=lambda f: f[2])
    named = ", ".join(f"{name} ({value:.0%})" for name, _, value, _ in flagged)
    return named, min(onset for _, onset, _, _ in flagged), share, layer


def _share_of(flagged: list[tuple[str, int, float, str]], what: str) -> str:
    """ "70% of dense's units", or "the units of 2 layers (dense 70%, dense_1 95%)"."""
    if len(flagged) == 1:
        layer, _, share, _ = flagged[0]
        return f"{share:.0%} of {layer}'s {what}"
    return f"that share of the {what} of {len(flagged)} layers ({_where(flagged)[0]})"


def check_dead_relu(run: RunSignals) -> list[Finding]:
    flagged = [f for f in _flagged(run, "dead") if _dying(run, f[0], f[2])]
    if not flagged:
        return []
    named, onset, share, layer = _where(flagged)
    title = (
        f"{share:.0%} of the ReLU units in {layer} are dead"
        if len(flagged) == 1
        else f"ReLU units are dead in {len(flagged)} layers: {named}"
    )
    rate = large_rate(run)
    if rate is not None:  # the cause, named first: not "lower the learning rate" as a side note
        title = f"The learning rate ({rate:.2g}, {run.info.optimizer or 'optimizer'}) is far too large: {title}"
    return [
        Finding(
            code=Code.DEAD_RELU,
            severity=Severity.WARNING,
            step=onset,
            title=title,
            detail=(
                f"On the probe batch, {_share_of(flagged, 'units')} output 0 for more than 99% of the inputs "
                f"(since step {onset}). A dead unit gets no gradient and never recovers: the layer has lost "
                "that much capacity. Typical causes: a learning rate too high (one large update pushes the "
                "biases negative), or a bad initialisation."
            ),
            evidence=Evidence((), onset, None, layer, facts=_layer_facts(run, "dead")),
            fixes=(
                LR_FIX_LOWER,
                Fix(
                    "Use an activation that keeps a gradient below 0.",
                    'keras.layers.Dense(64, activation="leaky_relu")  # or "gelu", "elu"',
                    intents=(CHANGE_HIDDEN_ACTIVATION,),
                ),
                Fix(
                    "Use He initialisation for ReLU layers (and zero biases).",
                    'keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal")',
                    intents=(CHANGE_INITIALIZER,),
                ),
            ),
        )
    ]


def check_saturated_activation(run: RunSignals) -> list[Finding]:
    flagged = _flagged(run, "saturated")
    if not flagged:
        return []
    named, onset, share, layer = _where(flagged)
    activation = " / ".join(sorted({f[3] for f in flagged}))
    title = (
        f"{share:.0%} of {layer}'s {activation} outputs are saturated"
        if len(flagged) == 1
        else f"{activation} outputs are saturated in {len(flagged)} layers: {named}"
    )
    return [
        Finding(
            code=Code.SATURATED_ACTIVATION,
            severity=Severity.WARNING,
            step=onset,
            title=title,
            detail=(
                f"On the probe batch, {_share_of(flagged, activation + ' outputs')} sit in the flat tails "
                f"(inputs beyond the SageMaker Debugger thresholds: ±9.4 for tanh, -23/16.6 for sigmoid) since "
                f"step {onset}, where the gradient is ~0: those units have stopped learning. Usual causes: inputs "
                "or weights too large (no normalisation, a large initialisation), or a learning rate too high."
            ),
            evidence=Evidence((), onset, None, layer, facts=_layer_facts(run, "saturated")),
            fixes=(
                Fix(
                    "Normalise the inputs and keep pre-activations small.",
                    "keras.layers.BatchNormalization()  # before the activation; or normalise x to unit scale",
                    intents=(SCALE_INPUTS,),
                ),
                Fix(
                    "Use Glorot initialisation for sigmoid/tanh layers.",
                    'keras.layers.Dense(64, activation="tanh", kernel_initializer="glorot_uniform")',
                    intents=(CHANGE_INITIALIZER,),
                ),
                Fix(
                    "Hidden layers: prefer ReLU/GELU, which do not saturate for positive inputs.",
                    'activation="gelu"',
                    intents=(CHANGE_HIDDEN_ACTIVATION,),
                ),
                LR_FIX_LOWER,
            ),
        )
    ]
