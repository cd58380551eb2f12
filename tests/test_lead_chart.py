"""The top chart's title says what is drawn: no gradient title without gradient data."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.findings import Evidence, Finding, Severity
from tb_trainhealth.report.lead_chart import lead_chart
from tb_trainhealth.signals import RunSignals, Series


def _run(**series: np.ndarray) -> RunSignals:
    return RunSignals("r", series={k: Series.of(np.arange(1, len(v) + 1), v) for k, v in series.items()})


def _nonfinite() -> Finding:
    return Finding("nonfinite", Severity.CRITICAL, 3, "NaN", "d", Evidence(("loss",)))


def test_a_nan_run_with_gradient_norms_leads_with_them_up_to_the_nan():
    chart = lead_chart(_run(grad_norm=np.array([1.0, 2.0, np.nan]), loss=np.ones(3)), [_nonfinite()])
    assert chart == {"title": "Gradient norm (all layers), up to the first NaN/Inf", "series": ["grad_norm"],
                     "code": "nonfinite", "baseline": None}  # fmt: skip


def test_a_nan_finding_whose_gradient_norms_stay_finite_does_not_promise_a_nan_on_the_chart():
    """Mixed precision's skipped steps (an info `nonfinite`) leave the recorded norms finite."""
    chart = lead_chart(_run(grad_norm=np.array([1.0, 2.0, 1.5]), loss=np.ones(3)), [_nonfinite()])
    assert chart is not None and chart["title"] == "Gradient norm (all layers)"


def test_a_nan_run_without_gradient_data_leads_with_its_own_evidence_named_as_it_is():
    chart = lead_chart(_run(loss=np.array([1.0, np.nan, np.nan])), [_nonfinite()])
    assert chart == {
        "title": "loss, up to the first NaN/Inf",
        "series": ["loss"],
        "code": "nonfinite",
        "baseline": None,
    }


def test_a_run_without_findings_or_gradients_shows_its_training_loss():
    assert lead_chart(_run(loss=np.ones(5)), []) == {
        "title": "Training loss",
        "series": ["loss"],
        "code": None,
        "baseline": None,
    }
    assert lead_chart(_run(), []) is None


def test_a_run_behind_a_baseline_of_the_same_logdir_leads_with_the_two_runs_compared():
    behind = Finding("worse_than_baseline", Severity.WARNING, 3, "Worse", "d", Evidence(("loss",)))
    chart = lead_chart(_run(loss=np.ones(5)), [behind], baseline="good")
    assert chart == {"title": "This run against its baseline good", "series": ["loss"], "code": "worse_than_baseline",
                     "baseline": "good"}  # fmt: skip
    assert lead_chart(_run(loss=np.ones(5)), [behind])["baseline"] is None  # (a baseline not in this logdir)
    assert lead_chart(_run(loss=np.ones(5)), [_nonfinite()], baseline="good")["baseline"] is None
