"""Calling sub-models built from a user's model (taps, prefixes) on a batch, quietly."""

from __future__ import annotations

import warnings
from typing import Any

import keras


def call_submodel(submodel: keras.Model, inputs: Any) -> Any:
    """Inference-mode call. Keras warns when a one-input model gets a bare tensor rather than
    a one-element list, then accepts it: that warning would land in the user's console."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return submodel(inputs, training=False)
