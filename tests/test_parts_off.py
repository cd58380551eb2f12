"""A part that cannot run says so (issue 38): the run records which part went off, why and
from which step, and the read side gives a `part_not_recorded` info finding naming what the
run lacks. Real tiny trainings where a part is forced off; their untouched twins say nothing."""

from __future__ import annotations

import logging
import os
import threading

import keras
import numpy as np
import pytest
from conftest import ROOT, read_logdir, run_python

from tb_trainhealth import HealthCallback, engine
from tb_trainhealth.callback import probe_guard
from tb_trainhealth.callback.frameworks import tested_versions
from tb_trainhealth.callback.lint import fit_checks
from tb_trainhealth.callback.probe_guard import MAX_REASON_CHARS, ProbeGuard, one_line
from tb_trainhealth.callback.step import step_clock
from tb_trainhealth.callback.step.step_probe import StepProbe
from tb_trainhealth.callback.watch.stall_watchdog import StallWatchdog
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import FitEndEvent, PartOffEvent
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.rules.parts_off import check_part_not_recorded
from tb_trainhealth.rules.stalls import silence_limit
from tb_trainhealth.signals import RunSignals, Series

MOVED = "'SGD' object has no attribute '_trainable_variables'"


def tiny_model(jit_compile: bool | str = "auto") -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="hidden"), keras.layers.Dense(3, name="out")]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.SGD(0.1), loss, jit_compile=jit_compile)
    return model


def train(
    log_dir, epochs: int = 2, model: keras.Model | None = None, nan: bool = False, **callback_args
) -> HealthCallback:
    """`nan`: one input value is NaN (the loss of the batch holding it is NaN, and all after it)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 3, 64).astype("int32")
    if nan:
        x[3, 1] = np.nan
    health = HealthCallback(str(log_dir), verbose=False, **callback_args)
    (model or tiny_model()).fit(x, y, batch_size=16, epochs=epochs, verbose=0, callbacks=[health])
    return health


def parts_off(findings: list[Finding]) -> dict[str, Finding]:
    return {f.evidence.check: f for f in findings if f.code == "part_not_recorded"}


def raise_moved(*args, **kwargs):
    raise AttributeError(MOVED)


@pytest.mark.parametrize(
    ("part", "target", "lacks", "costs"),
    [
        (
            "gradients",
            (StepProbe, "attach", classmethod(raise_moved)),
            "Per-step loss, gradient norms (global and per layer) and weight norms not recorded",
            "exploding/vanishing-gradient and NaN-origin diagnoses are unavailable",
        ),
        ("lint", (fit_checks, "lint_model", raise_moved), "the model's last layer", "output_loss_mismatch"),
        ("memory", (step_clock, "device_memory_mb", raise_moved), "memory readings not recorded", "memory_growth"),
        ("activations", (fit_checks, "ActivationProbe", raise_moved), "dead and saturated units", "dead_relu"),
    ],
)
def test_a_part_turned_off_by_a_moved_internal_is_named_with_its_reason_and_what_is_lost(
    tmp_path, monkeypatch, part, target, lacks, costs
):
    monkeypatch.setattr(*target)
    train(tmp_path / "broken")
    run = read_logdir(str(tmp_path))["broken"]
    (event,) = run.events_of(PartOffEvent)
    assert (event.part, event.reason, event.error) == (part, f"AttributeError: {MOVED}", True)
    assert event.keras_version == keras.__version__
    finding = parts_off(engine.diagnose(run))[part]
    assert finding.severity == Severity.INFO
    assert lacks.lower() in finding.title.lower()
    assert f"AttributeError: {MOVED} (Keras {keras.__version__})" in finding.detail
    assert costs in finding.detail
    assert finding.fixes and "pip install -U tb-trainhealth" in finding.fixes[0].code


def test_a_probe_that_fails_while_the_step_is_traced_is_recorded_as_off(tmp_path, monkeypatch, capsys):
    """The traced step runs Keras' own update without the probe: the run says the norms are missing."""
    monkeypatch.setattr(StepProbe, "_gradient_stats", lambda self, *args: raise_moved())
    train(tmp_path / "r")
    run = read_logdir(str(tmp_path))["r"]
    (event,) = run.events_of(PartOffEvent)
    assert (event.part, event.reason, event.error) == ("gradients", f"AttributeError: {MOVED}", True)
    assert run.get(sig.GRAD_NORM) is None and len(run.get(sig.EPOCH_LOSS)) == 2
    assert "gradients" in parts_off(engine.diagnose(run))
    assert capsys.readouterr().err.count("gradients probe disabled") == 1


def test_a_healthy_run_has_every_part_on_and_its_watchdog_armed(tmp_path):
    health = train(tmp_path / "healthy")
    run = read_logdir(str(tmp_path))["healthy"]
    assert run.events_of(PartOffEvent) == [] and parts_off(engine.diagnose(run)) == {}
    assert run.info.watchdog is True and run.get(sig.GRAD_NORM) is not None
    assert health.guard.off_reasons == {}


def test_the_gradient_probe_off_leaves_the_rest_of_the_run_recorded(tmp_path, monkeypatch):
    """The guard turns one part off: the epoch logs and the other parts still record."""
    monkeypatch.setattr(StepProbe, "attach", classmethod(raise_moved))
    train(tmp_path / "r")
    run = read_logdir(str(tmp_path))["r"]
    assert run.get(sig.GRAD_NORM) is None and run.get(sig.EPOCH_LOSS) is not None
    assert run.info.watchdog is True and run.events_of(FitEndEvent)


def test_a_watchdog_that_cannot_start_does_not_claim_to_be_armed(tmp_path, monkeypatch):
    monkeypatch.setattr(StallWatchdog, "start", lambda self, step: raise_moved())
    train(tmp_path / "r")
    run = read_logdir(str(tmp_path))["r"]
    assert run.info.watchdog is False
    finding = parts_off(engine.diagnose(run))["watchdog"]
    assert "stall watchdog is not running" in finding.title and "ended_abruptly" in finding.detail


def test_a_watchdog_thread_that_fails_mid_run_is_recorded_and_no_longer_claimed(tmp_path, monkeypatch):
    failed = threading.Event()

    def check(self):
        failed.set()
        raise RuntimeError("frames moved\nsecond line")

    monkeypatch.setattr(StallWatchdog, "check", check)
    health = HealthCallback(str(tmp_path / "r"), verbose=False)
    health._watch.poll_seconds = 0.01
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 3, 64).astype("int32")
    model = tiny_model()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[health])
    assert failed.wait(5)
    assert not health._watch.armed
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[health])  # the same callback, again
    run = read_logdir(str(tmp_path))["r"]
    assert run.info.watchdog is False  # the second fit's run info
    (event,) = run.events_of(PartOffEvent)
    assert (event.part, event.reason) == ("watchdog", "RuntimeError: frames moved")


def test_a_run_whose_watchdog_went_off_is_never_judged_killed_by_its_silence():
    """Its run info said armed, then the watchdog failed: no heartbeats since, so silence proves nothing."""
    steps = np.arange(1, 41)
    watched = RunSignals(
        run="r",
        series={"loss": Series.of(steps, 1.0 / steps)},
        info=RunInfo(watchdog=True, start_step=20),
        has_health_data=True,
        last_write=1000.0,
        now=5000.0,
    )
    assert silence_limit(watched) is not None
    watched.events.append(PartOffEvent(25, "watchdog", "RuntimeError: x"))
    assert silence_limit(watched) is None
    earlier_fit = RunSignals(**{**watched.__dict__, "events": [PartOffEvent(3, "watchdog", "RuntimeError: x")]})
    assert silence_limit(earlier_fit) is not None  # a new callback armed it again for this fit


def test_xla_rules_out_the_nan_replay_which_a_run_names_only_when_a_nan_needed_it(tmp_path):
    """Off by design under XLA (a GPU's default): recorded always, a finding only where it cost something."""
    train(tmp_path / "xla", model=tiny_model(jit_compile=True))
    train(tmp_path / "xla_nan", model=tiny_model(jit_compile=True), nan=True)
    runs = read_logdir(str(tmp_path))
    for run in runs.values():
        (event,) = run.events_of(PartOffEvent)
        assert (event.part, event.error, event.step) == ("nan origin", False, 0)
    assert parts_off(engine.diagnose(runs["xla"])) == {}
    assert runs["xla"].get(sig.GRAD_NORM) is not None  # the rest of the probe runs under XLA
    findings = engine.diagnose(runs["xla_nan"])
    assert findings[0].code == "nonfinite"
    finding = parts_off(findings)["nan origin"]
    assert finding.severity == Severity.INFO and "the step is XLA-compiled (jit_compile=True" in finding.detail
    assert "jit_compile=False" in finding.fixes[0].code and "Keras" not in finding.detail


def test_preflight_asked_for_on_tf_keras_is_recorded_as_off_and_named(tmp_path):
    """tf_keras (legacy Keras 2) in its own process: the preflight the user asked for cannot run."""
    proc = run_python(os.path.join(ROOT, "tests", "tf_keras_training.py"), str(tmp_path / "run"), "clean")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_logdir(str(tmp_path))["run"]
    (event,) = run.events_of(PartOffEvent)
    assert (event.part, event.error) == ("preflight", False)
    finding = parts_off(engine.diagnose(run))["preflight"]
    assert "this one is tf_keras" in finding.detail and "Keras 3" in finding.fixes[0].text
    assert run.info.watchdog is True


def test_each_part_is_told_once_with_its_reason_on_one_line():
    told = []
    guard = ProbeGuard(on_off=lambda part, reason, error: told.append((part, reason, error)))
    guard.run("lint", lambda: 1 / 0)
    guard.disable("lint", ValueError("again"))
    guard.off("nan origin", "XLA")
    guard.off("nan origin", "XLA")
    assert told == [("lint", "ZeroDivisionError: division by zero", True), ("nan origin", "XLA", False)]
    assert not guard.enabled("nan origin")
    assert one_line(KeyError()) == "KeyError"
    assert one_line(ValueError("\n  first\nsecond")) == "ValueError: first"
    assert len(one_line(ValueError("x" * 1000))) == MAX_REASON_CHARS


def test_a_part_named_by_a_newer_writer_still_reads_as_off():
    run = RunSignals(run="r", events=[PartOffEvent(4, "tokenizer probe", "it moved", error=False)])
    (finding,) = check_part_not_recorded(run)
    assert "The tokenizer probe part is off: it moved." in finding.detail and finding.fixes == ()


# -- a Keras newer than any tested --------------------------------------------------------


def test_the_newest_tested_keras_is_judged_by_major_and_minor():
    tested = "{}.{}".format(*tested_versions.NEWEST_TESTED["keras"])
    assert tested_versions.newer_than_tested_note("keras", tested + ".9") is None
    assert tested_versions.newer_than_tested_note("keras", "3.0.0") is None
    assert tested_versions.newer_than_tested_note("keras", "nightly") is None
    note = tested_versions.newer_than_tested_note("keras", "3.99.0.dev2026")
    assert note == (
        f"tb-trainhealth: tested with Keras up to {tested}; you run 3.99.0.dev2026 — parts that stop "
        "working will say so in the Health tab and in `tb-trainhealth diagnose`"
    )
    assert "\n" not in note


def test_a_keras_newer_than_tested_gets_one_note_at_the_first_fit_and_nothing_else_changes(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(probe_guard, "_NOTICES_GIVEN", set())
    monkeypatch.setattr(keras, "__version__", "3.99.0")
    with caplog.at_level(logging.WARNING):
        train(tmp_path / "newer")
        train(tmp_path / "newer_again")
    notes = [r.getMessage() for r in caplog.records if "tested with Keras" in r.getMessage()]
    assert notes == [tested_versions.newer_than_tested_note("keras", "3.99.0")]
    runs = read_logdir(str(tmp_path))
    for run in runs.values():
        assert run.events_of(PartOffEvent) == [] and engine.diagnose(run) == []
        assert run.get(sig.GRAD_NORM) is not None and run.info.watchdog


def test_the_tested_keras_gets_no_note(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(probe_guard, "_NOTICES_GIVEN", set())
    with caplog.at_level(logging.WARNING):
        train(tmp_path / "r", epochs=1)
    assert not [r for r in caplog.records if "tested with" in r.getMessage()]
