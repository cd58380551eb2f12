"""The layer section of the run settings: per layer, the config keys that change what or how it
learns (LAYER_KEYS), and every other constructor argument its `get_config()` gives as a scalar or a
list of numbers (`data_format`, `go_backwards`, `mask_zero`, a `Reshape`'s `target_shape`), in model
order with nested models' layers.

Initializers and regularizers are recorded short ("GlorotUniform(seed=1)", `short_object`),
activations by name; a key that cannot be read (a custom layer whose get_config raises) is left
out, the layer's other keys are not.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from tb_trainhealth.callback.setting_values import NOT_A_SETTING, section, setting
from tb_trainhealth.contract.run_settings import LAYER_CONFIG_SKIPPED, LAYER_KEYS

# Per layer: the config keys that change what or how a layer learns (Keras' own names), read through
# the layer's objects where it has them; then every other constructor argument its config holds.
ACTIVATION_KEYS = frozenset({"activation", "recurrent_activation"})
# Layers that only feed the model: no settings of their own.
SKIPPED_LAYERS = frozenset({"InputLayer"})


def model_layers(model: Any) -> list[tuple[str, Any]]:
    """(name, layer) in model order, nested models' layers after the nested model (through the
    public `.layers`), input layers skipped; a name seen already is prefixed by its model's."""
    found: list[tuple[str, Any]] = []
    seen_layers: set[int] = set()
    seen_names: set[str] = set()

    def walk(container: Any, prefix: str) -> None:
        for layer in getattr(container, "layers", None) or []:
            if id(layer) in seen_layers or type(layer).__name__ in SKIPPED_LAYERS:
                continue
            seen_layers.add(id(layer))
            name = layer.name if layer.name not in seen_names else f"{prefix}{layer.name}"
            seen_names.add(name)
            found.append((name, layer))
            walk(layer, f"{name}/")

    walk(model, f"{model.name}/")
    return found


def layer_settings(layer: Any, path: str) -> dict[str, Any]:
    """`<layer>.<key>` for LAYER_KEYS the layer has (its config, else its attributes of those
    names), and `<layer>.trainable` when frozen."""
    config = _config_or_none(layer)
    out: dict[str, Any] = {} if layer.trainable else {f"{path}.trainable": False}
    for key in LAYER_KEYS:
        if key in config if config is not None else hasattr(layer, key):
            value = section(f"{path}.{key}", lambda key=key: {"value": _layer_value(layer, key, config)})
            if value.get("value", NOT_A_SETTING) is not NOT_A_SETTING:
                out[f"{path}.{key}"] = value["value"]
    for key, raw in (config or {}).items():
        if key in LAYER_CONFIG_SKIPPED or key in LAYER_KEYS or not isinstance(key, str):
            continue
        value = setting(list(raw) if isinstance(raw, tuple) else raw)
        if value is not NOT_A_SETTING:
            out[f"{path}.{key}"] = value
    return out


def _config_or_none(layer: Any) -> dict[str, Any] | None:
    try:
        config = layer.get_config()
    except Exception:  # (custom layers often raise NotImplementedError)
        return None
    return config if isinstance(config, dict) else None


def _layer_value(layer: Any, key: str, config: dict[str, Any] | None) -> Any:
    """Initializers, regularizers, activations from the layer's objects (their short forms);
    other keys as the config (else the attribute) has them."""
    raw = config[key] if config is not None else getattr(layer, key)
    if key in ACTIVATION_KEYS:
        return activation_name(getattr(layer, key, raw))
    if key.endswith(("_initializer", "_regularizer")):
        return short_object(getattr(layer, key, raw), every_argument=key.endswith("_regularizer"))
    return setting(raw)


def short_object(obj: Any, every_argument: bool = False) -> str | None:
    """An initializer or regularizer as "Class(arg=value)": its non-default scalar arguments
    (`every_argument`: all of them, a regularizer's strength is its point); a serialized one
    (a config dict) shows each argument it has."""
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        name, config, defaults = obj.get("class_name"), obj.get("config") or {}, {}
    else:
        name, config = type(obj).__name__, obj.get_config() if hasattr(obj, "get_config") else {}
        defaults = {} if every_argument else _defaults(type(obj))
    shown = [
        f"{key}={_short(value)}"
        for key, value in config.items()
        if key != "name"
        and value is not None
        and setting(value) is not NOT_A_SETTING
        and (key not in defaults or setting(defaults[key]) != setting(value))
    ]
    return f"{name}({', '.join(shown)})" if shown else str(name)


@functools.lru_cache(maxsize=256)
def _defaults(cls: type) -> dict[str, Any]:
    try:
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _short(value: Any) -> str:
    value = setting(value)
    return f"{value:.6g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


def activation_name(activation: Any) -> str | None:
    """An activation function as its name ("relu", "linear"); a layer or callable object as its class."""
    if activation is None or isinstance(activation, str):
        return activation
    return getattr(activation, "__name__", None) or type(activation).__name__
