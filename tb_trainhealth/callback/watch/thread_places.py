"""Where the Python threads of a training process are, read from their stack frames.

The stall watchdog calls this from its own thread when training stops moving: which phase the
training thread is in (waiting for a batch, inside a callback, the step, evaluation), where each
thread waits (the innermost frames of the user's own code, not of TensorFlow or the standard
library), and a few words for the console line. Plain Python (`sys._current_frames`); no
TensorFlow call, so a hung device cannot hang it.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import sysconfig
import threading
from types import FrameType

import keras

from tb_trainhealth.callback.step import input_probe
from tb_trainhealth.contract.events import Frame, StallEvent, StallPhase, ThreadPlace

# Per thread, the innermost user frames recorded; threads recorded at most.
MAX_FRAMES = 3
MAX_THREADS = 8
MAX_STACK = 200
# Packages whose frames are not "user" frames (besides the standard library): where a
# thread waits inside them, the user's frame that called them is the one to name.
LIBRARIES = (
    "tensorflow",
    "keras",
    "tf_keras",
    "tensorboard",
    "numpy",
    "absl",
    "google",
    "requests",
    "urllib3",
    "grpc",
    "h5py",
    "optree",
    "ml_dtypes",
    "tb_trainhealth",
)
# Packages whose `fit` the watchdog watches (the training thread leaving it ends the watch).
FIT_PACKAGES = ("keras", "tf_keras", "tb_trainhealth")
_HOOKS = frozenset(name for name in dir(keras.callbacks.Callback) if name.startswith("on_"))
_INPUT_FETCH = (os.path.abspath(input_probe.__file__), "__next__")  # TimedBatches.__next__: waiting for a batch


def training_phase(frame: FrameType | None, evaluating: bool) -> tuple[StallPhase, str | None]:
    """What the training thread is doing, from its innermost frame outwards: fetching a batch
    (the input probe's `TimedBatches.__next__`), inside a callback's hook ("Class.on_..."),
    else inside evaluation or the step."""
    depth = 0
    while frame is not None and depth < MAX_STACK:
        code = frame.f_code
        if (os.path.abspath(code.co_filename), code.co_name) == _INPUT_FETCH:
            return StallPhase.INPUT, None
        qualname = getattr(code, "co_qualname", code.co_name)
        if code.co_name in _HOOKS and "." in qualname and not qualname.startswith("CallbackList."):
            return StallPhase.CALLBACK, ".".join(qualname.split(".")[-2:])
        frame, depth = frame.f_back, depth + 1
    return (StallPhase.EVALUATION if evaluating else StallPhase.STEP), None


def runs_fit(frame: FrameType | None) -> bool:
    """Whether a stack runs Keras' (or tf_keras', or tb_trainhealth's) `fit`."""
    roots = _package_roots(FIT_PACKAGES)
    depth = 0
    while frame is not None and depth < MAX_STACK:
        if frame.f_code.co_name == "fit" and os.path.abspath(frame.f_code.co_filename).startswith(roots):
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def thread_places(frames: dict[int, FrameType], training_thread: int | None) -> tuple[ThreadPlace, ...]:
    """Where each Python thread is (the training thread first, then threads running input
    code, then others with user frames); our own threads are left out."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    me = threading.get_ident()
    places = []
    for ident, frame in frames.items():
        name = names.get(ident, f"thread {ident}")
        if ident == me or name.startswith("tb-trainhealth"):
            continue
        stack = _stack(frame)
        runs = "training" if ident == training_thread else _runs(stack)
        user = tuple(f for f in stack if _is_user(f.file))[:MAX_FRAMES]
        if user or runs is not None:
            places.append(ThreadPlace(thread=name, runs=runs, frames=user, waiting_in=stack[0] if stack else None))
    rank = {"training": 0, None: 2}
    places.sort(key=lambda place: rank.get(place.runs, 1))
    return tuple(places[:MAX_THREADS])


def _stack(frame: FrameType | None) -> list[Frame]:
    """The frames innermost first."""
    stack = []
    while frame is not None and len(stack) < MAX_STACK:
        stack.append(Frame(frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    return stack


def _runs(stack: list[Frame]) -> str | None:
    """What input code a thread runs, from the library frames on its stack."""
    files = {os.path.basename(f.file) for f in stack}
    if "from_generator_op.py" in files:
        return "generator"
    if "py_dataset_adapter.py" in files:
        return "PyDataset"
    if "script_ops.py" in files:
        return "py_function"
    return None


def _package_roots(names: tuple[str, ...]) -> tuple[str, ...]:
    roots = []
    for name in names:
        module = sys.modules.get(name)
        for path in list(getattr(module, "__path__", []) or []):
            roots.append(os.path.abspath(path) + os.sep)
    return tuple(roots)


@functools.lru_cache(maxsize=4096)
def _is_user(file: str) -> bool:
    """Not TensorFlow, Keras, tb-trainhealth, a listed library, or the standard library."""
    if file.startswith("<"):
        return False
    path = os.path.abspath(file)
    if path.startswith(_package_roots(LIBRARIES)):
        return False
    paths = sysconfig.get_paths()
    in_site = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    stdlib = tuple(os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib"))
    return in_site or not path.startswith(stdlib)


def describe_place(event: StallEvent) -> str:
    """Where it stalled, in a few words, for the console line."""
    place = next((t for t in event.threads if t.runs not in (None, "training") and t.frames), None)
    if place is None:
        place = next((t for t in event.threads if t.runs == "training" and t.frames), None)
    where = ""
    if place is not None:
        frame = place.frames[0]
        where = f" in {frame.function} ({os.path.basename(frame.file)}:{frame.line})"
    phase = {
        StallPhase.INPUT: "waiting for input",
        StallPhase.STEP: "inside the training step",
        StallPhase.CALLBACK: f"inside {event.callback or 'a callback'}",
        StallPhase.EVALUATION: "in evaluation",
    }[event.phase]
    return f"{phase}{where}"


def seconds_text(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 or not math.isfinite(seconds) else f"{seconds / 60:.1f} min"
