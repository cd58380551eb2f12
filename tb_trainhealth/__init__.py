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

__all__ = ["HealthCallback", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "HealthCallback":
        try:
            from tb_trainhealth.callback.health_callback import HealthCallback
        except ImportError as err:
            raise ImportError(
                "HealthCallback needs TensorFlow and Keras 3: pip install 'tb-trainhealth[tf]' "
                f"(or any tensorflow / tensorflow-cpu / tf-nightly you already use). ({err})"
            ) from err
        return HealthCallback
    raise AttributeError(f"module 'tb_trainhealth' has no attribute {name!r}")
