"""Training steps computed by hand (tape, global norm, apply): what the callback's numbers from
the real, perhaps distributed, step must equal. Used by the training scripts the tests run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def reference_steps(net: Any, optimizer: Any, loss_fn: Any, batches: Iterable[tuple]) -> dict[str, list[float]]:
    """Per-step global gradient norm and loss; `net`, `optimizer`, `loss_fn` of one Keras."""
    import tensorflow as tf

    norms, losses = [], []
    for xb, yb in batches:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, net(xb, training=True))
        grads = tape.gradient(loss, net.trainable_variables)
        norms.append(float(tf.linalg.global_norm(grads)))
        losses.append(float(loss))
        optimizer.apply_gradients(zip(grads, net.trainable_variables))
    return {"grad_norm": norms, "loss": losses}
