"""Where did the first NaN/Inf come from? Replays the offending batch, layer by layer.

Called once, from inside the training step (a `tf.py_function` behind the `tf.cond` of
`nan_replay`, which fires on the first non-finite loss or the first batch holding NaN/Inf),
before the optimizer applies that step's update: the weights are still the ones that
produced the NaN. Normal steps pay only for that `tf.cond` and a sum over the batch.

Order of suspicion: the batch itself (inputs, labels); weights already non-finite (an
earlier step's gradients brought the NaN in: the row's per-layer counts name where); each
layer's forward output in order (the first non-finite one is re-run under
`tf.debugging.enable_check_numerics` to name the op inside it); then the loss.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import keras
import tensorflow as tf

from tb_trainhealth.callback.frameworks.which_keras import is_tf_keras, keras_of, tensor_of
from tb_trainhealth.contract.vocab import NanOriginWhere

MAX_MESSAGE_CHARS = 600
_OP_TYPE = re.compile(r'op "([A-Za-z0-9_]+)"')


def _nonfinite_count(value: Any) -> int:
    count = 0
    for tensor in tf.nest.flatten(value):
        if tf.is_tensor(tensor) and tensor.dtype.is_floating:
            count += int(tf.reduce_sum(tf.cast(~tf.math.is_finite(tensor), tf.int64)))
    return count


def _summary(message: str) -> str:
    """check_numerics' own lines ("Detected Infinity or NaN in output 0 of ... op "Log"", the
    element counts), without the tensor dumps and terminal colour codes."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", message).splitlines()]
    kept = [line.strip("! ") for line in lines if "Detected" in line or line.startswith("# of")]
    return "; ".join(kept)[:MAX_MESSAGE_CHARS] if kept else lines[0][:MAX_MESSAGE_CHARS] if lines else ""


def _first_position(value: Any) -> list[int] | None:
    """Index (batch row, then feature axes) of the first non-finite element of a single tensor."""
    if not tf.is_tensor(value) or not value.dtype.is_floating:
        return None
    bad = tf.where(~tf.math.is_finite(value))
    return [int(i) for i in bad[0].numpy()] if bad.shape[0] else None


@contextlib.contextmanager
def _whole_tracebacks() -> Iterator[None]:
    """Keras 3 (its own switch) and tf_keras and TensorFlow (`tf.debugging`'s) cut their frames
    out of an error's traceback, which drops them at once; `_sate_abandoned_arrays` needs them."""
    switches = [
        (keras.config.is_traceback_filtering_enabled, keras.config.enable_traceback_filtering,
         keras.config.disable_traceback_filtering),
        (tf.debugging.is_traceback_filtering_enabled, tf.debugging.enable_traceback_filtering,
         tf.debugging.disable_traceback_filtering),
    ]  # fmt: skip
    were_on = [is_on() for is_on, _, _ in switches]
    for (_, _, off), on in zip(switches, were_on):
        if on:
            off()
    try:
        yield
    finally:
        for (_, back_on, _), on in zip(switches, were_on):
            if on:
                back_on()


def _sate_abandoned_arrays(err: BaseException) -> None:
    """Marks as used the TensorArrays that `err` left half-written. check_numerics stops a
    recurrent layer's eager loop (Keras' TensorFlow backend writes each step's output into a
    TensorArray) at the step that overflows; the arrays that loop holds are never read again,
    and TensorFlow logged an "ERROR:tensorflow: Object was never used (type <class
    '...TensorArray'>)" block for each when it was collected (the demo's RNN run).
    They are the loop body's arguments, in the frames of the traceback."""
    tb = err.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            for item in value if isinstance(value, tuple) else (value,):  # loop_vars: (time, (arrays,), ...)
                for array in item if isinstance(item, tuple) else (item,):
                    mark_used = getattr(array, "mark_used", None) if isinstance(array, tf.TensorArray) else None
                    if mark_used is not None:  # (only the arrays `write` returned are watched)
                        mark_used()
        tb = tb.tb_next


def _op_of(compute) -> tuple[str | None, str]:
    """Run `compute` with every eager op checked: (op type, message) of the first non-finite op."""
    tf.debugging.enable_check_numerics()
    try:
        with _whole_tracebacks():
            compute()
    except Exception as err:  # check_numerics raises InvalidArgumentError naming the op
        _sate_abandoned_arrays(err)
        message = str(err)
        match = _OP_TYPE.search(message)
        return (match.group(1) if match else None), _summary(message)
    finally:
        tf.debugging.disable_check_numerics()
    return None, ""


def _forward_layers(model: keras.Model) -> list[keras.layers.Layer]:
    return [layer for layer in model.layers if not isinstance(layer, keras_of(model).layers.InputLayer)]


def _first_bad_layer(model: keras.Model, x: Any) -> dict[str, Any] | None:
    """The first layer whose forward output is non-finite, with the op inside it."""
    layers = _forward_layers(model)
    flavor = keras_of(model)
    if isinstance(model, flavor.Sequential):
        hidden = x
        for layer in layers:
            inputs = hidden
            hidden = layer(inputs, training=True)
            if _nonfinite_count(hidden):
                op, message = _op_of(lambda layer=layer, inputs=inputs: layer(inputs, training=True))
                return {"layer": layer.name, "op": op, "message": message}
        return None
    if not getattr(model, "inputs", None):  # subclassed: no layer graph to walk
        return None
    outputs = flavor.Model(model.inputs, [layer.output for layer in layers])(x, training=True)
    for layer, output in zip(layers, outputs):
        if _nonfinite_count(output):
            upto = flavor.Model(model.inputs, layer.output)
            op, message = _op_of(lambda upto=upto: upto(x, training=True))
            return {"layer": layer.name, "op": op, "message": message}
    return None


def localize(model: keras.Model, data: Any) -> dict[str, Any]:
    """Where the first non-finite value of this batch's loss starts (see module docstring).

    The replay runs in training mode, as the step did (BatchNormalization normalises with
    the batch's statistics); the state that mode updates (moving statistics, dropout seeds)
    is put back afterwards, so the replay leaves no trace on the model."""
    state = [(v, tf.identity(tensor_of(v))) for v in model.non_trainable_variables]
    try:
        return _localize(model, data)
    finally:
        for variable, value in state:
            variable.assign(value)


def _nonfinite_weights(model: keras.Model) -> list[str]:
    """Layers holding a non-finite trainable weight."""
    return [
        layer.name
        for layer in _forward_layers(model)
        if _nonfinite_count([tensor_of(w) for w in layer.trainable_weights])
    ]


def batch_origin(model: keras.Model, data: Any) -> dict[str, Any] | None:
    """NaN/Inf in the batch itself (inputs, then labels), with the first position; else None."""
    x, y, _ = keras_of(model).utils.unpack_x_y_sample_weight(data)
    for where, value in ((NanOriginWhere.INPUT, x), (NanOriginWhere.LABELS, y)):
        count = _nonfinite_count(value)
        if count:
            return {"where": where, "count": count, "position": _first_position(value)}
    return None


def _localize(model: keras.Model, data: Any) -> dict[str, Any]:
    in_batch = batch_origin(model, data)
    if in_batch is not None:
        return in_batch
    layers = _nonfinite_weights(model)
    if layers:
        return {"where": NanOriginWhere.WEIGHTS, "layers": layers}
    x, y, sample_weight = keras_of(model).utils.unpack_x_y_sample_weight(data)
    layer = _first_bad_layer(model, x)
    if layer is not None:
        return {"where": NanOriginWhere.FORWARD, **layer}

    def loss():
        y_pred = model(x, training=True)
        if is_tf_keras(model):  # (no `training` argument there)
            return model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        return model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)

    if _nonfinite_count(loss()):
        op, message = _op_of(loss)
        return {"where": NanOriginWhere.LOSS, "op": op, "message": message}
    return {"where": NanOriginWhere.UNKNOWN}


def finite_scalar(value: tf.Tensor) -> tf.Tensor:
    """Whether every element is finite (one op for a scalar: a reduction over no axes still costs two)."""
    finite = tf.math.is_finite(tf.cast(value, tf.float32))
    return finite if finite.shape.rank == 0 else tf.reduce_all(finite)


def is_plain_batch(flat: list[Any]) -> bool:
    return bool(flat) and all(tf.is_tensor(t) and not isinstance(t, tf.SparseTensor) for t in flat)
