"""The plan's first action on the real-bug zoo (issue 52): is it the fix the program's authors made?

Each buggy program of the zoo (`bench/real_bugs/`) trains with HealthCallback as a user would (trials
on); its run's plan (advice/plan.py) is read as `diagnose` tells it. A first action is *right* when
it changes what the authors' fix changed (`RIGHT_FIRST`: the intents that fix the case, read off
each case's `fix`), *wrong way* when it points opposite to one of them (learning rate down where
the fix raised it), and *other* otherwise. It also prints what the trials cost: their seconds
against the fit's, in the same process.

Usage:
    python -m bench.plan_zoo [--only NAME[,NAME]] [--keep DIR] [--no-trials] [--trial-seconds S]
    python -m bench.plan_zoo --rediagnose DIR      # plans of runs kept by --keep, no training
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tb_trainhealth.advice.plan import Plan
from tb_trainhealth.contract.trial_events import TrialsEvent
from tb_trainhealth.diagnosis import diagnose_run
from tb_trainhealth.findings import Direction, Intent
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.report.run_report import RunReport


def _i(text: str) -> Intent:
    setting, direction = text.split(":")
    return Intent(setting, Direction(direction))


OUT, LOSS, HIDDEN = "output_activation:change", "loss:change", "hidden_activation:change"
# What fixes each case, as intents (from each case's `fix`; a first action doing any one is right).
RIGHT_FIRST: dict[str, tuple[str, ...]] = {
    "dm_softmax_one_unit_cce": (OUT, LOSS),
    "dm_linear_output_bce_sigmoid_stack": (OUT, LOSS),
    "dm_four_classes_one_sigmoid": (OUT, LOSS),
    "dm_one_unit_cce_from_logits": (OUT, LOSS),
    "dm_iris_scaler_discarded_one_unit": (OUT, LOSS, "input_scale:add"),
    "dm_relu_output_signed_regression": (OUT,),
    "dm_softmax_output_regression": (OUT,),
    "dm_softmax_poisson_multitarget_regression": (OUT, LOSS),
    "dm_cars_sigmoid_output_unscaled_target": ("target_scale:add", OUT),
    "dm_bce_targets_in_minus1_1": ("target_scale:add", "labels:change"),
    "dm_unscaled_inputs_targets_small_lr": ("input_scale:add", "target_scale:add"),
    "dm_linear_layers_polynomial": ("hidden_activation:add", HIDDEN),
    "dm_iris_one_epoch": ("epochs:raise",),
    "dm_autoencoder_relu_output": (OUT,),
    "dm_conv1d_relu_output_cce": (OUT,),
    "dm_masked_lstm_relu_output_cce": (OUT,),
    "dm_logits_with_probability_loss": (LOSS,),
    "dm_sigmoid_output_signed_target": (OUT,),
    "dm_conv3d_mape_classification": (LOSS,),
    "dm_regression_as_binary_classification": (OUT, LOSS),
    "dm_deep_sigmoid_bottleneck": (HIDDEN,),
    "tpb_so35078027_linear_output_manual_bce": (OUT, "learning_rate:raise"),
    "tpb_so39939881_linreg_sgd_diverges": ("learning_rate:lower",),
    "tpb_so43636736_arange_inputs_lr": ("learning_rate:lower", "input_scale:add"),
    "tpb_so43239467_relu_on_logits": (OUT,),
    "tpb_so42064941_fp16_adam_epsilon": ("epsilon:raise",),
    "tpb_so38447935_target_shape_broadcast": ("labels:change",),
    "tpb_dltf_dbn_missing_softmax": (OUT, LOSS),
    "autotrainer_gradient_vanish": (HIDDEN,),
    "autotrainer_relu_output": (OUT,),
    "autotrainer_oscillating_sgd_bs1": ("learning_rate:lower", "batch_size:raise"),
    "umlaut_raw_pixels_logits_no_from_logits": ("input_scale:add", LOSS),
    "umlaut_negative_learning_rate": ("learning_rate:raise", LOSS),
    "neuralint_so45378493_softmax_one_unit": (OUT, LOSS),
    "neuralint_so50555434_sigmoid_regression": (OUT, "target_scale:add"),
    "neuralint_comp_dnnfw_bce_multiclass": (LOSS, OUT),
    "taxonomy_multihot_sigmoid_cce": (LOSS,),
    "taxonomy_raw_pixels_cnn_high_lr": ("input_scale:add", "learning_rate:lower"),
    "taxonomy_regression_lr_spikes": ("learning_rate:lower",),
    "taxonomy_unshuffled_class_folders": ("shuffle:add",),
    "taxonomy_labels_shuffled_apart": ("shuffle:add", "labels:change"),
    "taxonomy_labels_1_2_unscaled_scores": ("labels:change",),
    "subtle_normalization_bypassed": ("input_scale:add",),
    "subtle_lstm_go_backwards": ("layer_argument:change",),
    "subtle_reshape_transposed": ("layer_argument:change",),
    "subtle_mask_zero_off": ("layer_argument:change",),
}


def plan_of(root: str) -> tuple[Plan, TrialsEvent | None]:
    reader = SignalReader(open_logdir(root))
    for group in reader.groups():
        diagnosis = diagnose_run(reader, group)
        report = RunReport.of(diagnosis, [])
        trials = diagnosis.signals.events_of(TrialsEvent)
        return report.plan, (trials[-1] if trials else None)
    return Plan(), None


def judge(name: str, plan: Plan) -> str:
    """right, wrong way, other, or none (no action)."""
    if not plan.actions:
        return "none"
    right = [_i(text) for text in RIGHT_FIRST.get(name, ())]
    first = plan.actions[0].intents
    if any(intent in right for intent in first):
        return "right"
    if any(intent.opposes(r) for intent in first for r in right):
        return "wrong way"
    return "other"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None)
    parser.add_argument("--keep", default=None, metavar="DIR")
    parser.add_argument("--rediagnose", default=None, metavar="DIR")
    parser.add_argument("--no-trials", action="store_true", help="the plan from the rules alone")
    parser.add_argument(
        "--trial-seconds",
        type=float,
        default=None,
        help="HealthCallback(trials=SECONDS): more time than a user's default",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from bench.real_bug_zoo import all_cases

    cases = [c for c in all_cases() if not args.only or any(p in c.name for p in args.only.split(","))]
    tally: dict[str, int] = {}
    fit_total, trial_total = 0.0, 0.0
    for case in cases:
        with tempfile.TemporaryDirectory() as scratch:
            root = os.path.join(args.rediagnose or args.keep or scratch, f"{case.name}-s{args.seed}", "buggy")
            seconds = None
            if not args.rediagnose:
                from tb_trainhealth import HealthCallback

                began = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        trials = False if args.no_trials else (args.trial_seconds or True)
                        case.run(True, args.seed, [HealthCallback(root, verbose=False, trials=trials)])
                except Exception as err:
                    print(f"{case.name:45} FAILED TO RUN: {type(err).__name__}: {err}")
                    continue
                seconds = time.perf_counter() - began
            elif not os.path.isdir(root):
                continue
            plan, trials = plan_of(root)
        verdict = judge(case.name, plan)
        tally[verdict] = tally.get(verdict, 0) + 1
        spent = trials.seconds if trials is not None else 0.0
        fit = trials.fit_seconds if trials is not None and trials.fit_seconds else None
        if fit is None and seconds is not None:
            fit = seconds - spent
        cost = ""
        if fit is not None:
            fit_total += fit
            trial_total += spent
            cost = f" trials {spent:.1f}s of fit {fit:.1f}s"
        first = plan.actions[0] if plan.actions else None
        said = "-"
        if first is not None:
            said = f"{first.text[:70]!r} {'tried: ' + first.trial.verdict.value if first.trial else 'untried'}"
        print(f"{case.name:45} {verdict:9} {said}{cost}")
        sys.stdout.flush()
    judged = sum(tally.values())
    print()
    print(
        f"first action right: {tally.get('right', 0)} of {judged}; wrong way: {tally.get('wrong way', 0)}; "
        f"other: {tally.get('other', 0)}; no action: {tally.get('none', 0)}"
    )
    if fit_total:
        print(f"trials: {trial_total:.0f} s against {fit_total:.0f} s of fits ({trial_total / fit_total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
