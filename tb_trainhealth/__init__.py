"""tb-trainhealth: finds what went wrong in a TensorFlow training run.

The read side (rules, CLI, TensorBoard plugin) never imports TensorFlow;
`HealthCallback` (write side) is imported lazily so `import tb_trainhealth`
stays cheap and works where TensorFlow is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tb_trainhealth.callback.health_callback import HealthCallback
    from tb_trainhealth.callback.preflight.run import PreflightFailed, PreflightReport, preflight
    from tb_trainhealth.callback.training import TrainingOOMError, fit

__all__ = [
    "HealthCallback",
    "PreflightFailed",
    "PreflightReport",
    "TrainingOOMError",
    "__version__",
    "fit",
    "preflight",
]

_WRITE_SIDE = {
    "HealthCallback": "tb_trainhealth.callback.health_callback",
    "fit": "tb_trainhealth.callback.training",
    "TrainingOOMError": "tb_trainhealth.callback.training",
    "preflight": "tb_trainhealth.callback.preflight.run",
    "PreflightReport": "tb_trainhealth.callback.preflight.run",
    "PreflightFailed": "tb_trainhealth.callback.preflight.run",
}


def __getattr__(name: str) -> Any:
    if name in _WRITE_SIDE:
        import importlib

        try:
            module = importlib.import_module(_WRITE_SIDE[name])
        except ImportError as err:
            raise ImportError(
                f"{name} needs TensorFlow and Keras 3: pip install 'tb-trainhealth[tf]' "
                f"(or any tensorflow / tensorflow-cpu / tf-nightly you already use). ({err})"
            ) from err
        return getattr(module, name)
    raise AttributeError(f"module 'tb_trainhealth' has no attribute {name!r}")
