"""Fixes several rules suggest, written once so they read the same everywhere."""

from __future__ import annotations

from tb_trainhealth.findings import Fix

CLIP_FIX = Fix(
    "Lower the learning rate and clip gradients, so one bad batch cannot throw the weights far.",
    "optimizer = keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)",
)
LR_FIX_LOWER = Fix(
    "Lower the learning rate (try 3-10x lower).",
    "model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-4), loss=..., metrics=...)",
)
LR_FIX_SCHEDULE = Fix(
    "Decay the learning rate when the loss stops improving.",
    "keras.callbacks.ReduceLROnPlateau(monitor='loss', factor=0.5, patience=3)",
)
