"""`nonfinite`: NaN/Inf in the loss, gradients or weights.

A single non-finite value poisons every later update, so any hit is critical
(SageMaker Debugger's ExplodingTensor rule also fires on the first NaN/Inf).
The exception is mixed precision: LossScaleOptimizer skips steps whose scaled
gradients overflow and lowers the scale, which is normal operation.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import NanOriginEvent, NonfiniteEvent
from tb_trainhealth.contract.vocab import NanOriginWhere
from tb_trainhealth.findings import ADD_CLIPPING, CHANGE_LOSS, LOWER_RATE, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER
from tb_trainhealth.rules.gradients import EXPLODE_MIN_PEAK, EXPLODE_RATIO, first_layer_to_grow
from tb_trainhealth.rules.run_setup import rate_blew_it_up
from tb_trainhealth.signals import RunSignals, Series

# Mixed precision: skipped steps are only a problem when they keep happening.
# Keras' dynamic loss scale halves on overflow and doubles after 2000 good steps,
# so more than this share of skipped steps in the second half of a run means the
# scale keeps collapsing (a few doubling attempts per 2000 steps stay far below it).
LOSS_SCALE_SKIP_SHARE = 0.05

# Exploding gradients before the NaN: the norm's level at the start of the run (median of its
# first points, at most this many) against its peak before the NaN, with at least this many
# finite points before it.
EXPLODED_START_POINTS = 20
MIN_STEPS_BEFORE_NAN = 2
# ...or a sudden rise: the last LAST_STEPS finite norms reach this multiple of the level before
# them. More than an order of magnitude in a few steps, then overflow: an explosion, not a NaN
# out of the blue (demo rnn_exploding_to_nan, seeds 0-2: 31x, 118x, 1.9e7x before the NaN;
# a NaN from log(0) or the data comes with a steady norm).
LAST_STEPS = 3
SUDDEN_GROWTH = 30.0

FIXES = (
    CLIP_FIX,
    Fix(
        "Check the training data for NaN/Inf before fitting.",
        "assert np.isfinite(x_train).all() and np.isfinite(y_train).all()",
    ),
    Fix(
        "Guard log, division and sqrt in custom losses and layers.",
        "tf.math.log(x + 1e-7); tf.math.divide_no_nan(a, b); tf.sqrt(tf.maximum(x, 1e-12))",
    ),
    Fix(
        "Let the loss work on logits instead of log(softmax(...)).",
        "loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # and no softmax on the last layer",
        intents=(CHANGE_LOSS,),
    ),
    Fix(
        "Stop at the first NaN instead of training on garbage.",
        'HealthCallback(log_dir=..., stop_on="critical")  # or keras.callbacks.TerminateOnNaN()',
    ),
)


# Op-specific fixes for the op where the first NaN/Inf appeared (from the callback's replay).
_OP_FIXES: tuple[tuple[tuple[str, ...], Fix], ...] = (
    (
        ("Log", "Log1p", "Xlogy", "Xlog1py", "Lgamma", "Digamma"),
        Fix(
            "log of 0 (or of a negative number): add an epsilon or clip the argument.",
            "tf.math.log(tf.maximum(x, 1e-7))",
        ),
    ),
    (
        ("RealDiv", "Div", "Reciprocal", "Inv", "FloorDiv", "TruncateDiv", "Xdivy"),
        Fix("Division by zero: guard the denominator.", "tf.math.divide_no_nan(a, b)  # or a / (b + 1e-7)"),
    ),
    (
        ("Exp", "Expm1", "Pow", "Softplus", "Cosh", "Sinh"),
        Fix(
            "exp overflowed (float32 overflows above e^88): stay in log space, e.g. let the loss take logits.",
            "loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # not log(softmax(x)) by hand\n"
            "tf.exp(tf.minimum(x, 80.0))",
        ),
    ),
    (
        ("Sqrt", "Rsqrt"),
        Fix(
            "sqrt of a negative number (or of 0, whose gradient is infinite): clip the argument.",
            "tf.sqrt(tf.maximum(x, 1e-12))",
        ),
    ),
)


def _origin_fixes(op: str | None) -> tuple[Fix, ...]:
    for ops, fix in _OP_FIXES:
        if op in ops:
            return (fix,)
    return (CLIP_FIX,)  # matmul/conv/bias overflowing: activations grew without bound


def _describe_origin(origin: NanOriginEvent) -> tuple[str, str | None, tuple[Fix, ...]]:
    """(sentence, layer, fixes to put first) for a nan_origin event."""
    where, op, layer, position = origin.where, origin.op, origin.layer, origin.position
    at = f" (first at batch row {position[0]}, index {list(position[1:])})" if position else ""
    count = origin.count
    if where == NanOriginWhere.INPUT:
        return f"The batch itself holds {count} NaN/Inf input value(s){at}.", None, (FIXES[1],)
    if where == NanOriginWhere.LABELS:
        return f"The batch itself holds {count} NaN/Inf label(s){at}.", None, (FIXES[1],)
    if where == NanOriginWhere.FORWARD:
        op_text = f", op {op}" if op else ""
        return (
            f"Replaying the batch on the weights before the update, the first non-finite output is in layer "
            f"{layer}{op_text}.",
            str(layer) if layer else None,
            _origin_fixes(op),
        )
    if where == "weights":
        return (
            "When the loss first turned non-finite, the weights of "
            f"{', '.join(origin.layers) or 'some layers'} already were: an earlier "
            "step's gradients brought the NaN in (the forward pass of that step was still finite).",
            None,
            (),
        )
    if where == "loss":
        op_text = f" (op {op})" if op else ""
        return (
            f"Replaying the batch, every layer's output is finite: the loss computation produced it{op_text}.",
            None,
            (*_origin_fixes(op), FIXES[3]),
        )
    return "", None, ()


def _origin_title(origin: NanOriginEvent | None) -> str:
    if origin is None:
        return ""
    op = f" ({origin.op})" if origin.op else ""
    if origin.where.in_batch:
        return f": the {origin.where} batch holds NaN/Inf"
    if origin.where == NanOriginWhere.FORWARD and origin.layer:
        return f": starts in layer {origin.layer}" + op
    if origin.where == NanOriginWhere.LOSS:
        return ": starts in the loss" + op
    return ""


def _hits_per_layer(run: RunSignals) -> str:
    """How often each layer's gradients held NaN/Inf (the steps that had any), worst first."""
    hits = run.layer_series.get(sig.LAYER_GRAD_NONFINITE)
    if hits is None or not len(hits.steps) or hits.values.ndim != 2 or hits.values.shape[1] != len(run.layers):
        return ""
    steps_hit = (np.nan_to_num(hits.values, nan=1.0) > 0).sum(axis=0)
    order = [i for i in np.argsort(-steps_hit, kind="stable") if steps_hit[i] > 0][:3]
    if not order:
        return ""
    listed = ", ".join(f"{run.layers[i].name} on {int(steps_hit[i])} step(s)" for i in order)
    return f" Non-finite gradients by layer: {listed}."


def _first_nonfinite_step(series: Series | None) -> int | None:
    if series is None:
        return None
    bad = ~np.isfinite(series.values)
    return int(series.steps[np.argmax(bad)]) if bad.any() else None


MIXED_PRECISION_FIXES = (
    Fix(
        "Keep the last layer and the loss in float32 (the mixed precision guide's rule): softmax and "
        "cross-entropy overflow in float16.",
        'keras.layers.Dense(n_classes, dtype="float32")  # or keras.layers.Activation("softmax", dtype="float32")',
    ),
    Fix(
        "Use bfloat16 where the hardware has it: float32's range, no loss scaling needed.",
        'keras.mixed_precision.set_global_policy("mixed_bfloat16")',
    ),
    Fix(
        "Clip gradients and lower the learning rate: ever larger gradients overflow float16 at any scale.",
        "optimizer = keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)",
        (LOWER_RATE, ADD_CLIPPING),
    ),
)


def _loss_scale_now(run: RunSignals) -> str:
    scale = run.get(sig.LOSS_SCALE)
    if scale is None or not len(scale.values):
        return ""
    return f" Loss scale at step {int(scale.steps[-1])}: {float(scale.values[-1]):g} (lowest {float(np.nanmin(scale.values)):g})."


def _replicas_hit(event: NonfiniteEvent, per_worker: int | None = None) -> str:
    """Under a distribution strategy: which replicas' own gradients were non-finite first
    (its batch shard, before the all-reduce spread the NaN to every replica); under a
    multi-worker one (`per_worker` replicas each), on which worker: that worker's data."""
    if not event.replicas:
        return ""
    on_workers = ""
    if per_worker:
        workers = sorted({replica // per_worker for replica in event.replicas})
        on_workers = f" (on worker(s) {', '.join(map(str, workers))}: check that worker's input data)"
    return (
        f" Before the all-reduce, only replica(s) {', '.join(map(str, event.replicas))} had non-finite "
        f"gradients: the bad values came in with that replica's shard of the batch{on_workers}."
    )


def _exploded_before(run: RunSignals, onset: int) -> tuple[str, float, str | None] | None:
    """(sentence, growth, layer that grew first) when the global gradient norm grew by orders
    of magnitude before the first NaN (EXPLODE_RATIO over the run, as for exploding_gradients,
    or SUDDEN_GROWTH in its last steps): the explosion is the cause, the NaN its end (an RNN
    can go from its usual level to overflow in two steps)."""
    norms = run.get(sig.GRAD_NORM)
    if norms is None:
        return None
    keep = (norms.steps < onset) & np.isfinite(norms.values) & (norms.values > 0)
    steps, values = norms.steps[keep], norms.values[keep]
    if len(values) < MIN_STEPS_BEFORE_NAN:
        return None
    start = float(np.median(values[: max(1, min(len(values) // 2, EXPLODED_START_POINTS))]))
    peak_index = int(np.argmax(values))
    growth = float(values[peak_index]) / start
    before_last = values[:-LAST_STEPS] if len(values) > LAST_STEPS else values[:1]
    sudden = float(np.max(values[-LAST_STEPS:])) / float(np.median(before_last))
    if float(values[peak_index]) < EXPLODE_MIN_PEAK or (growth < EXPLODE_RATIO and sudden < SUDDEN_GROWTH):
        return None
    growth = max(growth, sudden)
    layer = first_layer_to_grow(run.before(onset))
    sentence = (
        f"Exploding gradients first: the global gradient norm grew {growth:.3g}x, from {start:.3g} to "
        f"{float(values[peak_index]):.3g} at step {int(steps[peak_index])}"
        + (f" (layer {layer} grew first)" if layer else "")
        + ", then the values overflowed."
    )
    return sentence, growth, layer


def _evidence_series(run: RunSignals) -> tuple[str, ...]:
    """The run's loss and gradient-norm curves, whichever it has (a Keras-only run has no gradients)."""
    found = tuple(name for name in (sig.LOSS, sig.BATCH_LOSS, sig.GRAD_NORM) if run.get(name) is not None)
    return found or (sig.EPOCH_LOSS,)


def check_nonfinite(run: RunSignals) -> list[Finding]:
    hits: dict[str, int] = {}  # where -> first step
    first_layers: list[str] = []
    replicas = ""
    for event in run.events_of(NonfiniteEvent):
        where = event.where
        if where not in hits or event.step < hits[where]:
            hits[where] = event.step
            if where == "gradients":
                first_layers = list(event.layers)
                replicas = _replicas_hit(event, run.info.replicas_per_worker)
    for name, where in (*((loss, "loss") for loss in sig.TRAINING_LOSSES), (sig.GRAD_NORM, "gradients")):
        step = _first_nonfinite_step(run.get(name))
        if step is not None and (where not in hits or step < hits[where]):
            hits[where] = step
    if not hits:
        return []

    onset = min(hits.values())
    parts = [f"{where} at {run.at(step)}" for where, step in sorted(hits.items(), key=lambda kv: kv[1])]
    detail = "First non-finite values: " + ", ".join(parts) + "."
    if first_layers:
        detail += f" Gradients went non-finite first in layer(s): {', '.join(first_layers[:5])}."
    detail += replicas

    skipped = run.get(sig.NONFINITE_COUNT)  # written only on steps with hits
    steps = run.get(sig.GRAD_NORM)
    if run.info.loss_scale and set(hits) == {"gradients"} and skipped is not None and steps is not None:
        # The scale calibrates itself in the first steps (each overflow halves it): only
        # skips that go on through the second half of the run mean it keeps collapsing.
        middle = steps.steps[len(steps) // 2]
        late_steps = int(np.sum(steps.steps >= middle))
        share = float(np.sum((skipped.values > 0) & (skipped.steps >= middle))) / max(late_steps, 1)
        total = int(np.sum(skipped.values > 0))
        scale = _loss_scale_now(run)
        shown = (sig.NONFINITE_COUNT, sig.LOSS_SCALE) if scale else (sig.NONFINITE_COUNT,)  # only series it has
        if share <= LOSS_SCALE_SKIP_SHARE:
            return [
                Finding(
                    code=Code.NONFINITE,
                    severity=Severity.INFO,
                    step=onset,
                    title="Loss scaling skipped steps with overflowing gradients (normal)",
                    detail=(
                        f"LossScaleOptimizer skipped {total} step(s) whose scaled gradients overflowed "
                        f"({share:.1%} of the second half of the run); loss and weights stayed finite.{scale}"
                    ),
                    evidence=Evidence(shown, onset, None),
                )
            ]
        return [
            Finding(
                code=Code.NONFINITE,
                severity=Severity.CRITICAL,
                step=onset,
                title=f"Loss scale keeps collapsing: {share:.0%} of the later steps skipped for overflow",
                detail=(
                    f"LossScaleOptimizer skipped {total} step(s) in all, {share:.1%} of the second half of the "
                    f"run: the float16 gradients overflow at any scale, so those steps train nothing.{scale}"
                ),
                evidence=Evidence(shown, onset, None),
                fixes=MIXED_PRECISION_FIXES,
            )
        ]

    detail += _hits_per_layer(run)
    fixes = FIXES
    origin = next(iter(run.events_of(NanOriginEvent)), None)
    origin_layer, first = None, ()
    if origin is not None:
        sentence, origin_layer, first = _describe_origin(origin)
        detail += " " + sentence if sentence else ""
        if origin.message:
            detail += f" check_numerics: {origin.message}"
    exploded = None if origin is not None and origin.where.in_batch else _exploded_before(run, onset)
    rate = rate_blew_it_up(run, onset) if exploded is not None else None
    if exploded is not None:  # the cause before the symptom: clipping first
        cause, _, grew_first = exploded
        detail = cause + " " + detail
        origin_layer = origin_layer or grew_first
        first = (CLIP_FIX,)
    if rate is not None:  # ...and a learning rate that large is why they exploded
        detail = (
            f"The learning rate ({rate:.3g}, {run.info.optimizer or 'optimizer'}) is far too large for this model: "
            f"the first {onset - run.info.start_step} updates blew the loss up by orders of magnitude. " + detail
        )
        first = (LR_FIX_LOWER, CLIP_FIX)
    if origin is not None and origin.where.in_batch:
        fixes = (FIXES[1], FIXES[4])  # the data is the cause: the model's settings are not
    elif first and exploded is None and CLIP_FIX not in first:
        # An op that cannot take its input (log of 0) with no growth before it: the op is the cause,
        # not the step size (a smaller rate reaches the same 0 a little later).
        fixes = (*first, FIXES[2], FIXES[1], FIXES[4])
    elif first:
        fixes = first + tuple(f for f in FIXES if f not in first)
    elif first_layers and run.layers and first_layers[0] == run.layers[0].name:
        # The very first layer's gradients went bad first: its input (the data) is the usual suspect.
        fixes = (FIXES[1], FIXES[0], *FIXES[2:])
        detail += " The first layer of the model is hit first, which points at the input data."
    return [
        Finding(
            code=Code.NONFINITE,
            severity=Severity.CRITICAL,
            step=onset,
            title=f"NaN/Inf appeared in {' and '.join(sorted(hits, key=hits.get))} at {run.at(onset)}"
            + (f" after the gradients exploded ({exploded[1]:.2g}x)" if exploded is not None else _origin_title(origin))
            + (f": the learning rate {rate:.3g} is far too large" if rate is not None else ""),
            detail=detail,
            evidence=Evidence(
                _evidence_series(run), onset, None, origin_layer or (first_layers[0] if first_layers else None)
            ),
            fixes=_fits_the_run(run, fixes),
        )
    ]


def _fits_the_run(run: RunSignals, fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
    """Leaves out the logits fix on a run whose loss already takes logits (it would contradict the run)."""
    if run.settings.get("loss.from_logits") is True:
        return tuple(fix for fix in fixes if fix is not FIXES[3])
    return fixes
