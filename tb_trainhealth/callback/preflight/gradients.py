"""Every trainable variable gets a gradient from the loss on the batch.

A variable whose gradient is None is not connected to the loss (an unused branch, a
`stop_gradient`, a layer built but never called); exactly zero everywhere means nothing
flows through it (inputs that are all 0, ReLU units dead from their initialisation). The
optimizer then never changes it. Regularisation terms are taken out: a weight penalty gives
every variable a gradient that says nothing about the data.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from tb_trainhealth.callback.preflight.batch import Batch


@dataclasses.dataclass
class GradientResult:
    trainable: int
    none: tuple[str, ...]
    zero: tuple[str, ...]


def check_gradients(model: keras.Model, batch: Batch) -> GradientResult:
    """Gradients of the data loss (training mode, as in fit) for each trainable variable."""
    variables = list(model.trainable_variables)
    if not variables:
        return GradientResult(0, (), ())
    with tf.GradientTape() as tape:
        pred = model(batch.x, training=True)
        loss = model.compute_loss(x=batch.x, y=batch.y, y_pred=pred, sample_weight=batch.sample_weight, training=True)
        penalties = model.losses
        if penalties:
            loss = loss - tf.add_n([tf.cast(p, loss.dtype) for p in penalties])
    grads = tape.gradient(loss, variables)
    none, zero = [], []
    for variable, grad in zip(variables, grads):
        name = getattr(variable, "path", None) or variable.name
        if grad is None:
            none.append(name)
        elif not bool(tf.reduce_any(tf.not_equal(tf.convert_to_tensor(grad), 0))):
            zero.append(name)
    return GradientResult(len(variables), tuple(none), tuple(zero))
