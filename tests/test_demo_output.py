"""The demo's own output stays readable (issue 35, item 11): TensorFlow's C++ start-up lines
and Keras' warnings about the demo's deliberately broken runs do not flood it."""

from __future__ import annotations

from conftest import run_python

QUIET_START = """
import sys, warnings
import make_demo_logs
make_demo_logs.quiet_tensorflow_start()
import scenarios  # imports keras: nothing more on stderr
warnings.warn_explicit("a demo run's own Keras warning", UserWarning, "epoch_iterator.py", 1, module="keras.src.trainers")
print("started")
"""


def test_the_demo_starts_tensorflow_without_its_start_up_lines():
    done = run_python("-c", QUIET_START)
    assert done.returncode == 0 and done.stdout.strip() == "started", done.stderr[-2000:]
    assert done.stderr == "", done.stderr[-2000:]  # e.g. "I0000 ... oneDNN custom operations are on"


def test_without_it_tensorflow_does_print_them():
    """The check above can fail: a plain import of TensorFlow writes to stderr on this machine."""
    done = run_python("-c", "import tensorflow as tf; tf.constant(0.0) + 1")
    assert done.returncode == 0 and done.stderr.strip() != ""
