"""The callback's reading of how busy other processes keep the machine (input_bound reads it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
from conftest import read_logdir

from tb_trainhealth import HealthCallback
from tb_trainhealth.callback.step import machine_load
from tb_trainhealth.callback.step.machine_load import PROC_STAT, OtherLoad
from tb_trainhealth.contract import series as sig

pytestmark = pytest.mark.skipif(not os.path.exists(PROC_STAT), reason="Linux only (/proc/stat)")

SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"


def test_a_busy_loop_in_another_process_counts():
    load = OtherLoad()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=1.5)])
    try:
        time.sleep(1.2)
        busy = load.share()
    finally:
        spinner.wait()
    cores = os.cpu_count() or 1
    assert busy is not None and busy >= 0.5 / cores  # one core of `cores` held by the spinner (less its start)


def test_this_process_own_time_is_not_counted(monkeypatch):
    """Busy ticks less this process's: 150 of 200 ticks busy, 100 of them ours -> 25% others."""
    readings = iter([(1000.0, 4000.0, 300.0), (1150.0, 4200.0, 400.0)])
    monkeypatch.setattr(machine_load, "_ticks", lambda: next(readings))
    assert machine_load.OtherLoad().share() == pytest.approx(0.25)


def test_each_epoch_records_the_share_other_processes_took(tmp_path):
    x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(x, x[:, 0], epochs=3, verbose=0, callbacks=[HealthCallback(str(tmp_path / "run"))])
    (run,) = read_logdir(str(tmp_path)).values()
    shares = run.get(sig.OTHER_CPU_SHARE)
    assert shares is not None and len(shares) == 3
    assert np.all((shares.values >= 0) & (shares.values <= 1))
