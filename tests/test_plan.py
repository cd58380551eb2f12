"""The run's one plan (advice/plan.py): one direction per setting, no repeats, nothing that does not
apply, and trials deciding the order (issue 52)."""

from __future__ import annotations

import dataclasses

from tb_trainhealth.advice.plan import MAX_ACTIONS, build_plan
from tb_trainhealth.contract.run_info import InputSource, RunInfo
from tb_trainhealth.contract.trial_events import TrialResult, TrialsEvent, TrialVerdict
from tb_trainhealth.findings import (
    ADD_CLIPPING,
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    LOWER_RATE,
    RAISE_RATE,
    SCALE_INPUTS,
    SCALE_TARGETS,
    TARGET_SCALE,
    TUNE_TF_DATA,
    Direction,
    Evidence,
    Finding,
    Fix,
    Intent,
    Severity,
)
from tb_trainhealth.report.run_report import RunReport
from tb_trainhealth.signals import RunSignals

LOWER = Fix("Lower the learning rate 10x.", "Adam(learning_rate=1e-4)", (LOWER_RATE,))
LOWER_AND_CLIP = Fix(
    "Lower the learning rate and clip.", "Adam(learning_rate=1e-4, clipnorm=1.0)", (LOWER_RATE, ADD_CLIPPING)
)
RAISE = Fix("Raise the learning rate.", "Adam(learning_rate=1e-2)", (RAISE_RATE,))
SCALE = Fix("Standardise the inputs.", "x = (x - m) / s", (SCALE_INPUTS,))
PREFETCH = Fix("End the pipeline with prefetch.", "ds = ds.prefetch(tf.data.AUTOTUNE)", (TUNE_TF_DATA,))
LOOK = Fix("Check the labels.", "print(np.unique(y))")


def finding(code: str, *fixes: Fix, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(code, severity, 1, f"{code} title", "detail", Evidence(("loss",)), fixes)


def run(*events, input_kind: str = "arrays") -> RunSignals:
    return RunSignals("r", events=list(events), info=RunInfo(input=InputSource(input_kind)))


def trial(intent, verdict: TrialVerdict, error: float, label: str = "change", code: str | None = None) -> TrialResult:
    return TrialResult(intent.setting, intent.direction.value, label, verdict, code, error)


def trials(*results: TrialResult, findings: tuple[str, ...] = ("loss_plateau",)) -> TrialsEvent:
    return TrialsEvent(step=10, trials=results, findings=findings, samples=768, held_out=256, steps=200,
                       unchanged_error=0.9, unchanged_loss=2.0)  # fmt: skip


def intents(plan) -> list:
    return [intent for action in plan.actions for intent in action.intents]


def test_without_trials_the_root_cause_direction_stays_and_the_opposite_one_goes():
    plan = build_plan(run(), [finding("dead_relu", LOWER), finding("loss_plateau", RAISE, LOOK)])
    assert LOWER_RATE in intents(plan) and RAISE_RATE not in intents(plan)
    assert not any(a.opposes(b) for a in intents(plan) for b in intents(plan))
    assert [a.text for a in plan.actions] == [LOWER.text, LOOK.text]


def test_a_repeated_change_is_one_action_answering_both_findings_in_the_words_that_do_more():
    plan = build_plan(run(), [finding("exploding_gradients", LOWER), finding("nonfinite", LOWER_AND_CLIP, LOWER)])
    (action,) = plan.actions
    assert action.text == LOWER_AND_CLIP.text and action.answers == ("exploding_gradients", "nonfinite")
    assert plan.steps_answering("nonfinite") == [1]


def test_a_tf_data_change_is_not_told_to_a_fit_fed_from_arrays():
    found = [finding("input_bound", PREFETCH, LOOK)]
    assert [a.text for a in build_plan(run(input_kind="arrays"), found).actions] == [LOOK.text]
    assert [a.text for a in build_plan(run(input_kind="tf.data"), found).actions] == [PREFETCH.text, LOOK.text]


def test_a_change_that_helped_in_a_trial_comes_first_and_rules_out_the_opposite_way():
    measured = trials(
        trial(RAISE_RATE, TrialVerdict.HELPED, 0.2, "learning rate 0.001 -> 0.01", "Adam(learning_rate=0.01)"),
        trial(LOWER_RATE, TrialVerdict.WORSE, 1.0, "learning rate 0.001 -> 0.0001"),
    )
    plan = build_plan(run(measured), [finding("worse_than_constant", LOOK, LOWER), finding("loss_plateau", RAISE)])
    first = plan.actions[0]
    assert first.intents == (RAISE_RATE,) and first.code == "Adam(learning_rate=0.01)" and first.tried
    assert "Tried on 768 of your samples for 200 steps" in first.measured and "0.20" in first.measured
    assert LOWER_RATE not in intents(plan)
    assert "made things worse" in plan.overruled["worse_than_constant"]


def test_a_change_no_rule_proposed_but_a_trial_found_becomes_an_action():
    measured = trials(trial(SCALE_INPUTS, TrialVerdict.HELPED, 0.1, "standardised inputs", "x = (x - m) / s"))
    plan = build_plan(run(measured), [finding("loss_plateau", LOOK)])
    assert plan.actions[0].intents == (SCALE_INPUTS,) and plan.actions[0].code == "x = (x - m) / s"
    assert plan.actions[1].text == LOOK.text and not plan.actions[1].tried


def test_a_change_tried_without_a_clear_change_keeps_its_place_and_says_so():
    measured = trials(trial(RAISE_RATE, TrialVerdict.SAME, 0.9, "learning rate 0.001 -> 0.01"))
    plan = build_plan(run(measured), [finding("loss_plateau", RAISE, LOOK)])
    assert [a.text for a in plan.actions] == [RAISE.text, LOOK.text]
    assert "no clear change" in plan.actions[0].measured and not plan.overruled


def test_the_plan_holds_at_most_three_actions_and_info_findings_add_none():
    many = [Fix(f"do {i}", f"code {i}") for i in range(6)]
    assert len(build_plan(run(), [finding("loss_plateau", *many)]).actions) == MAX_ACTIONS
    assert build_plan(run(), [finding("undertrained", *many, severity=Severity.INFO)]).actions == ()


def test_the_report_gives_the_plan_once_and_findings_point_at_its_steps():
    report = RunReport.told("r", run(), [finding("dead_relu", LOWER), finding("loss_plateau", RAISE, LOOK)], [], [])
    form = report.to_json()
    assert [step["text"] for step in form["plan"]] == [LOWER.text, LOOK.text]
    assert form["plan"][0]["intents"] == [{"setting": "learning_rate", "direction": "lower"}]
    assert all("fixes" not in f for f in form["findings"])
    assert [f["plan_steps"] for f in form["findings"]] == [[1], [2]]


def test_an_input_bound_fit_from_arrays_is_told_a_change_for_arrays_and_no_tf_data_setting():
    """Issue 53 part 3: a fix must fit the input kind (three of three in-memory fits got tf.data fixes)."""
    import numpy as np

    from tb_trainhealth.contract import series as sig
    from tb_trainhealth.rules.input_pipeline import check_input_bound
    from tb_trainhealth.signals import Series

    steps = np.arange(1, 401)
    series = {sig.INPUT_WAIT_MS: Series(steps, np.full(400, 30.0)), sig.STEP_TIME_MS: Series(steps, np.full(400, 50.0))}
    for kind, tf_data in (("arrays", False), ("tf.data", True)):
        signals = RunSignals("r", series=dict(series), info=RunInfo(input=InputSource(kind), input_wait_measured=True))
        (bound,) = check_input_bound(signals)
        told = build_plan(signals, [bound]).actions
        assert any("prefetch" in (a.code or "") for a in told)
        assert any(intent == TUNE_TF_DATA for a in told for intent in a.intents) is tf_data, kind
        assert any("from_tensor_slices((x_train, y_train))" in (a.code or "") for a in told) is not tf_data, kind


def test_every_demo_run_gets_one_plan_without_contradictions_repeats_or_changes_that_do_not_apply(scenario_logdir):
    """Issue 52: "A test that reads every demo run's plan: no opposite directions, no repeats, no action
    for a fact that does not apply". The plans as the CLI tells them, trials included."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read.logdir import open_logdir
    from tb_trainhealth.read.reader import SignalReader

    reader = SignalReader(open_logdir(scenario_logdir))
    told = 0
    for group in reader.groups():
        diagnosis = diagnose_run(reader, group)
        plan = RunReport.of(diagnosis, []).plan
        actions, said = plan.actions, intents(plan)
        assert len(actions) <= MAX_ACTIONS, group.name
        assert not any(a.opposes(b) for a in said for b in said), (group.name, said)
        assert len(said) == len(set(said)), (group.name, said)  # no change told twice
        assert len({a.text for a in actions}) == len(actions) and len({a.code for a in actions if a.code}) == len(
            [a for a in actions if a.code]
        ), group.name
        kind = diagnosis.signals.info.input.type if diagnosis.signals.info.input else "?"
        if kind not in ("tf.data", "?"):
            assert TUNE_TF_DATA not in said, group.name
        if any("the step size is not the cause" in f.detail for f in diagnosis.findings):  # (zeroed_inputs)
            assert not [i for i in said if i.setting == "learning_rate"], (group.name, said)
        codes = {f.code for f in diagnosis.findings}
        for f in diagnosis.findings:  # (vanishing_gradients: the gradients are the plateau's cause, not the rate)
            assert not (f.code == "loss_plateau" and "vanishing_gradients" in codes and "learning rate" in f.title)
        loud = [f for f in diagnosis.findings if f.severity >= Severity.WARNING]
        assert bool(actions) == bool(loud), group.name  # a failing run is told what to do, a healthy one nothing
        told += bool(actions)
    assert told >= 10  # (most demo runs are broken on purpose)


def test_a_fact_a_check_established_leads_even_where_a_short_trial_showed_no_gain():
    head = Fix("Use a sigmoid output with binary cross-entropy.", "Dense(1, activation='sigmoid')", (CHANGE_OUTPUT,))
    measured = trials(
        trial(CHANGE_OUTPUT, TrialVerdict.SAME, 0.9, "output sigmoid"),
        trial(RAISE_RATE, TrialVerdict.HELPED, 0.5, "learning rate 0.001 -> 0.01", "Adam(learning_rate=0.01)"),
    )
    plan = build_plan(run(measured), [finding("output_loss_mismatch", head), finding("loss_plateau", RAISE)])
    assert [a.intents for a in plan.actions] == [(CHANGE_OUTPUT,), (RAISE_RATE,)]
    worse = trials(trial(CHANGE_OUTPUT, TrialVerdict.WORSE, 1.5, "output sigmoid"))
    assert (
        build_plan(run(worse), [finding("output_loss_mismatch", head)]).actions == ()
    )  # ...unless it made things worse


def test_among_facts_the_one_whose_trial_helped_leads_but_a_change_no_rule_proposed_is_no_fact():
    head = Fix("Use a linear output for regression.", "Dense(1)", (CHANGE_OUTPUT,))
    targets = Fix("Scale the targets.", "y = (y - m) / s", (SCALE_TARGETS,))
    findings = [finding("output_loss_mismatch", head), finding("unnormalized_target", targets)]
    measured = trials(
        trial(CHANGE_OUTPUT, TrialVerdict.SAME, 7.6, "output linear"),
        trial(
            SCALE_TARGETS, TrialVerdict.HELPED, 0.26, "targets scaled to [0, 1]", "y = (y - y_min) / (y_max - y_min)"
        ),
    )  # (dm_cars_sigmoid_output_unscaled_target: the authors scaled the targets)
    plan = build_plan(run(measured), findings)
    assert [a.intents for a in plan.actions] == [(SCALE_TARGETS,), (CHANGE_OUTPUT,)]
    assert plan.actions[0].text.startswith("Train with targets scaled to [0, 1]")  # the words of what was measured
    born = trials(
        trial(CHANGE_OUTPUT, TrialVerdict.SAME, 1.09, "output softmax"),
        trial(SCALE_INPUTS, TrialVerdict.HELPED, 0.98, "standardised inputs", "x = (x - m) / s"),
        findings=("output_loss_mismatch",),
    )  # (dm_masked_lstm_relu_output_cce: the softmax output is the fix; no rule proposed scaling)
    plan = build_plan(run(born), [finding("output_loss_mismatch", head)])
    assert [a.intents for a in plan.actions] == [(CHANGE_OUTPUT,), (SCALE_INPUTS,)]


def test_a_second_change_that_helped_on_top_of_the_best_one_joins_it_in_one_action():
    """Several things wrong (umlaut_negative_learning_rate: a negative rate, and logits under a
    probability loss): each alone barely helps; the pair is one action, its second's own action goes."""
    logits = Fix(
        "Tell the loss it gets logits.", "loss=SparseCategoricalCrossentropy(from_logits=True)", (CHANGE_LOSS,)
    )
    rate = "learning rate -1e+05 -> 0.01"
    measured = trials(
        trial(RAISE_RATE, TrialVerdict.HELPED, 0.9, rate, "SGD(learning_rate=0.01)"),
        trial(CHANGE_LOSS, TrialVerdict.SAME, 1.0, "from_logits=True"),
        dataclasses.replace(
            trial(CHANGE_LOSS, TrialVerdict.HELPED, 0.1, f"{rate} + from_logits=True", "SGD(0.01)\nfrom_logits=True"),
            on_top_of=rate,
        ),
    )
    plan = build_plan(run(measured), [finding("output_loss_mismatch", logits), finding("loss_plateau", RAISE)])
    first = plan.actions[0]
    assert first.intents == (CHANGE_LOSS, RAISE_RATE) or first.intents == (RAISE_RATE, CHANGE_LOSS)
    assert first.code == "SGD(0.01)\nfrom_logits=True" and first.trial.on_top_of == rate
    assert set(first.answers) == {"output_loss_mismatch", "loss_plateau"} and len(plan.actions) == 1
    unhelpful = dataclasses.replace(measured.trials[2], verdict=TrialVerdict.SAME)
    plan = build_plan(run(dataclasses.replace(measured, trials=(*measured.trials[:2], unhelpful))), [
        finding("output_loss_mismatch", logits), finding("loss_plateau", RAISE)])  # fmt: skip
    assert [a.intents for a in plan.actions] == [(CHANGE_LOSS,), (RAISE_RATE,)]  # (the fact leads; no pair)


def test_a_change_that_made_the_model_learn_goes_before_a_fact_whose_trial_did_not():
    """tpb_so43636736: x = 0..99 and a rate of 0.5; standardising the inputs alone left the error 3.5x a
    constant's, inputs and targets together 0.003: the pair leads. A change that barely beat a constant
    (dm_masked_lstm's 0.98) does not displace a fact (test above)."""
    both = Intent(TARGET_SCALE, Direction.ADD)
    measured = trials(
        trial(SCALE_INPUTS, TrialVerdict.HELPED, 3.5, "standardised inputs", "x = (x - m) / s"),
        trial(both, TrialVerdict.HELPED, 0.003, "standardised inputs, standardised targets", "x, y = ..."),
        findings=("unnormalized_input", "nonfinite"),
    )
    plan = build_plan(run(measured), [finding("unnormalized_input", SCALE), finding("nonfinite", LOWER)])
    assert [a.intents for a in plan.actions][:2] == [(both,), (SCALE_INPUTS,)]


def test_where_both_directions_helped_the_better_one_is_told_and_the_other_is_not():
    measured = trials(
        trial(RAISE_RATE, TrialVerdict.HELPED, 0.2, "learning rate 0.01 -> 0.1", "SGD(0.1)"),
        trial(LOWER_RATE, TrialVerdict.HELPED, 0.9, "learning rate 0.01 -> 0.001", "SGD(0.001)"),
    )
    plan = build_plan(run(measured), [finding("loss_divergence", LOWER, LOWER_AND_CLIP)])
    assert RAISE_RATE in intents(plan) and LOWER_RATE not in intents(plan)
