"""`bad_initialization`: weights that start in a state training cannot get out of.

From the `weight_init` event (each Dense/Conv kernel's mean and standard deviation at
train start, before any step) and the run's first NaN:

- Symmetric: a hidden layer whose kernel is one constant, feeding a layer whose kernel is
  one constant too. Every unit of the first computes the same output and, because the next
  layer weighs them all alike, gets the same gradient: the units stay identical forever
  (Goodfellow et al., Deep Learning 8.4: "initial parameters need to break symmetry").
  A constant kernel next to a random one is not reported: the random layer breaks the tie
  (zero-initialised last layers, residual branches and LoRA adapters do this on purpose).
- Too large, when the run went NaN: for ReLU layers a kernel standard deviation `s` with
  fan-in `n` multiplies the activations' scale by s * sqrt(n / 2) per layer (He et al. 2015;
  s = sqrt(2/n) gives 1), for other activations by s * sqrt(n) (LeCun / Glorot). The product
  over the layers is how much larger the output starts than a He/Glorot network's. Keras'
  defaults (glorot_uniform, he_normal) give at most 1.6 per layer and a product of at most 1.4
  on the rule zoo's models (`python bench/rule_zoo.py`: every healthy and broken scenario not
  built to have a bad init); the healthy sweep (58 runs, `bench/healthy_sweep.py`) gets no
  bad_initialization; weights drawn at unit scale give 5.7 per 64-unit
  layer and >1e3 over four (demo init_nan_mlp: 2e4, NaN at step 3; init_nan_cnn: 1.7e3, loss
  1e3+ at the start, then every ReLU dead). A large product alone is not reported: only with
  a NaN, or a loss that starts >= 100x above where it ends (see BLOWUP_RATIO); otherwise the
  activation and gradient rules (saturated tanh, exploding gradients) speak for it.
"""

from __future__ import annotations

import itertools

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LayerWeights, NonfiniteEvent, PreflightEvent, WeightInitEvent
from tb_trainhealth.contract.vocab import FitStop
from tb_trainhealth.findings import CHANGE_INITIALIZER, Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.rules.constant_yardstick import learned_anyway
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals

# A kernel whose standard deviation is below this share of its mean magnitude holds one value
# (float32 round-off of a constant is exactly 0; any random initialiser is above 0.1).
CONSTANT_KERNEL = 1e-6
# The activations' growth over the whole network, at init, relative to He/Glorot, above which a
# NaN is put down to the initialisation (Keras defaults: <= 1.4 on every zoo model).
INIT_GAIN = 100.0
# Without a NaN: the run blew up at the start when its first recorded loss is at least
# BLOWUP_RATIO x its level at the end (median of the last quarter) and at least BLOWUP_LOSS
# (no cross-entropy starts there from a sane init; demo init_nan_cnn: 1e3-1e4 -> 1.1, its ReLUs
# then dead). Healthy runs can fall 100x too, but never start with a gain >= INIT_GAIN.
BLOWUP_RATIO = 100.0
BLOWUP_LOSS = 10.0
# A layer counts towards the explanation when it alone starts this far above He/Glorot; the
# typical (median) layer must, too: an initialiser scales every layer alike (unit-scale normal:
# 5.7 per 64-unit ReLU layer), trained weights loaded into a deep net without normalisation
# (VGG-like) sit near 1 with a few wider layers.
LAYER_GAIN = 2.0
_RELU_LIKE = ("relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "swish")

INIT_FIX = Fix(
    "Use Keras' default initialisers (leave kernel_initializer out), or He initialisation for ReLU layers.",
    'keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal")  # not RandomNormal(stddev=1.0)',
    intents=(CHANGE_INITIALIZER,),
)
SYMMETRY_FIX = Fix(
    "Initialise kernels randomly (Keras' default glorot_uniform does); a constant (ones, zeros, "
    "Constant(c)) makes every unit of a layer the same unit.",
    'keras.layers.Dense(64, activation="relu")  # no kernel_initializer="ones" / "zeros" / Constant(...)',
    intents=(CHANGE_INITIALIZER,),
)
CHECK_FIX = Fix(
    "Check the initial weights before training: the spread within each kernel should be near He/Glorot's.",
    "for l in model.layers:\n"
    "    if hasattr(l, 'kernel'): print(l.name, float(np.std(l.kernel)), (2 / np.prod(l.kernel.shape[:-1])) ** 0.5)",
)


MAX_LAYER_FACTS = 8


def _kernel_facts(
    event: WeightInitEvent, names: list[str], gains: dict[str, float | None] | None = None
) -> tuple[Fact, ...]:
    """Each named layer's kernel at train start: what the rule judged."""
    out: tuple[Fact, ...] = ()
    for name in names[:MAX_LAYER_FACTS]:
        w = event.layers[name]
        gain = (gains or {}).get(name)
        parts = [
            f"mean {w.mean:.3g}" if w.mean is not None else "",
            f"std {w.std:.3g}" if w.std is not None else "",
            f"fan-in {w.fan_in}" if w.fan_in is not None else "",
            f"{gain:.1f}x He/Glorot" if gain is not None else "",
        ]
        out += fact(f"{name} kernel at step {event.step}", ", ".join(p for p in parts if p))
    return out


def _weights(run: RunSignals) -> WeightInitEvent | None:
    events = run.events_of(WeightInitEvent)
    return events[0] if events else None


def _constant(layer: LayerWeights) -> bool:
    if layer.std is None or layer.mean is None:
        return False
    return layer.std <= CONSTANT_KERNEL * abs(layer.mean) or (layer.std == 0.0 and layer.mean == 0.0)


def _symmetric(run: RunSignals, event: WeightInitEvent) -> list[Finding]:
    names = list(event.layers)
    stuck = [
        name
        for name, after in itertools.pairwise(names)
        if (event.layers[name].units or 0) > 1 and _constant(event.layers[name]) and _constant(event.layers[after])
    ]
    if not stuck:
        return []
    first = event.layers[stuck[0]]
    loss = _loss_change(run)
    return [
        Finding(
            code=Code.BAD_INITIALIZATION,
            severity=Severity.CRITICAL,
            step=event.step,
            title=(
                f"Symmetric initialisation: every unit of {', '.join(stuck)} starts with the same weights "
                f"({first.mean:.3g}), so they stay identical"
            ),
            detail=(
                f"At train start the kernel of {stuck[0]} holds one value ({first.mean:.4g}, spread "
                f"{first.std:.2g}), and so does the next layer's: all {first.units} units compute the same "
                "output and get the same gradient at every step, so the layer works like a single unit, however "
                "long it trains." + loss + _preflight_note(run)
            ),
            evidence=Evidence((sig.LOSS,), event.step, None, stuck[0], facts=_kernel_facts(event, stuck)),
            fixes=(SYMMETRY_FIX, CHECK_FIX),
        )
    ]


def _preflight_note(run: RunSignals) -> str:
    """The preflight measures the same initial weights: say when its small-batch fit failed too."""
    for event in run.events_of(PreflightEvent):
        failed = event.fit_stopped == FitStop.NONFINITE or (
            event.fit_end_loss is not None and event.fit_target is not None and event.fit_end_loss > event.fit_target
        )
        if failed:
            return (
                " The preflight's small-batch fit failed on these weights too (cannot_fit_small_batch, which names "
                "the same cause)."
            )
    return ""


def _loss_change(run: RunSignals) -> str:
    loss = run.get(sig.EPOCH_LOSS) or run.get(sig.LOSS)
    if loss is None or len(loss) < 2:
        return ""
    values = loss.values[np.isfinite(loss.values)]
    if len(values) < 2:
        return ""
    return f" The training loss went from {values[0]:.4g} to {values[-1]:.4g}."


def layer_gain(layer: LayerWeights) -> float | None:
    """How much this layer scales its input's magnitude at init, relative to He/Glorot's 1."""
    if layer.std is None or not layer.fan_in:
        return None
    spread = float(np.hypot(layer.std, layer.mean or 0.0))  # RMS of the weights
    half = 2.0 if layer.activation in _RELU_LIKE else 1.0
    return spread * float(np.sqrt(layer.fan_in / half))


def _expected_std(layer: LayerWeights) -> float:
    half = 2.0 if layer.activation in _RELU_LIKE else 1.0
    return float(np.sqrt(half / max(layer.fan_in or 1, 1)))


def _first_nan(run: RunSignals) -> int | None:
    steps = [e.step for e in run.events_of(NonfiniteEvent)]
    for name in sig.TRAINING_LOSSES:
        series = run.get(name)
        if series is not None and not np.isfinite(series.values).all():
            steps.append(int(series.steps[np.argmax(~np.isfinite(series.values))]))
    return min(steps) if steps else None


def _blew_up(run: RunSignals) -> tuple[int, str] | None:
    """(step, what happened) when the run went NaN, or started with a loss far above where it ended."""
    nan_at = _first_nan(run)
    if nan_at is not None:
        return nan_at, f"The loss went non-finite at {run.at(nan_at)}."
    loss = run.get(sig.LOSS) or run.get(sig.BATCH_LOSS)
    if loss is None or len(loss) < 8:
        return None
    start = float(loss.values[0])
    end = float(np.median(loss.values[-max(2, len(loss) // 4) :]))
    if start >= BLOWUP_LOSS and start >= BLOWUP_RATIO * max(end, 1e-12):
        step = int(loss.steps[0])
        return step, f"The loss started at {start:.4g}, {start / end:.3g}x its level at the end ({end:.4g})."
    return None


def _too_large(run: RunSignals, event: WeightInitEvent) -> list[Finding]:
    if event.normalized:
        return []  # normalisation layers reset the scale: the product says nothing
    blown = _blew_up(run)
    if blown is None:
        return []
    nan_at, what = blown
    gains = {name: layer_gain(layer) for name, layer in event.layers.items()}
    known = [g for g in gains.values() if g is not None and g > 0]
    if not known:
        return []
    total = float(np.prod(known))
    if total < INIT_GAIN or float(np.median(known)) < LAYER_GAIN:
        return []  # (a few wide layers in a deep pretrained net are not an initialiser's doing)
    large = [name for name, g in gains.items() if g is not None and g >= LAYER_GAIN]
    nan = _first_nan(run) is not None
    gain = None if nan else learned_anyway(run)
    recovered = gain is not None
    listed = "; ".join(
        f"{name}: std {event.layers[name].std:.3g}, He/Glorot {_expected_std(event.layers[name]):.3g} "
        f"for fan-in {event.layers[name].fan_in} ({gains[name]:.1f}x)"
        for name in large[:4]
    )
    return [
        Finding(
            code=Code.BAD_INITIALIZATION,
            severity=Severity.INFO if recovered else Severity.CRITICAL,
            step=event.step,
            title=(
                ("NaN" if nan else "Loss blow-up")
                + f" at {run.at(nan_at)} caused by the initial weights: they start {total:.3g}x larger "
                "(over the network) than He/Glorot would"
                + (f"; the run recovered (best loss {gain:.0%} below a constant prediction's)" if recovered else "")
            ),
            detail=(
                f"{what} The cause is the initialisation, not the learning "
                f"rate: at train start, before any update, {len(large)} layer(s) had kernels far wider than their "
                f"fan-in allows ({listed}). Each multiplies the activations' scale, so the output starts "
                f"{total:.3g}x too large and the first gradients overflow (or throw the ReLUs dead). Lowering the "
                "learning rate does not help."
                + _preflight_note(run)
                + (
                    " This run recovered from it and learned, so it cost only its first steps; the default "
                    "initialisers would spare them."
                    if recovered
                    else ""
                )
            ),
            evidence=Evidence(
                (sig.LOSS,), event.step, nan_at, large[0] if large else None, facts=_kernel_facts(event, large, gains)
            ),
            fixes=(INIT_FIX, CHECK_FIX),
        )
    ]


def initialization_cause(run: RunSignals) -> str | None:
    """For the preflight's small-batch fit: initial weights that explain a fit that failed (the
    same measure as bad_initialization's, which also judges runs recorded without preflight)."""
    event = _weights(run)
    if event is None:
        return None
    names = list(event.layers)
    if any(_constant(event.layers[a]) and _constant(event.layers[b]) for a, b in itertools.pairwise(names)):
        return "symmetric initialisation: constant kernels (see bad_initialization)"
    gains = [g for g in (layer_gain(layer) for layer in event.layers.values()) if g]
    total = float(np.prod(gains)) if gains else 0.0
    if not event.normalized and total >= INIT_GAIN:
        return f"initial weights {total:.3g}x larger over the network than He/Glorot (see bad_initialization)"
    return None


def check_bad_initialization(run: RunSignals) -> list[Finding]:
    event = _weights(run)
    if event is None:
        return []
    return _symmetric(run, event) or _too_large(run, event)
