// What the tab shows people who have not added HealthCallback yet: the page for a logdir
// with no runs, and the hint on a run logged without the callback. Both carry the snippet.
import type { LogdirProblem } from "./api";
import { codeBlock } from "./code_block";
import { h } from "./dom";

const SNIPPET = 'from tb_trainhealth import HealthCallback\nmodel.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])';

function snippet(): HTMLElement {
  return codeBlock(SNIPPET, "Copy the HealthCallback snippet");
}

// By the runs route's logdir_problem_kind: the heading, and whether starting TensorBoard on another
// local folder is the fix (a bucket's sentence says what to install instead).
const PROBLEMS = new Map<string, { heading: string; local: boolean }>([
  ["missing", { heading: "The logdir does not exist", local: true }],
  ["not_a_folder", { heading: "The logdir is a file, not a folder", local: true }],
  ["bucket_unreadable", { heading: "This TensorBoard cannot read the bucket", local: false }],
]);

/** Shown instead of the runs list and run view when the logdir has no runs; `problem`: why a
 * logdir shows nothing at all, said instead of "no runs yet". */
export function noRunsPage(problem: LogdirProblem | null = null): HTMLElement {
  if (problem) {
    const known = PROBLEMS.get(problem.kind) ?? { heading: "TensorBoard cannot read the logdir", local: false };
    return h("section", { class: "th-empty-page th-empty", testid: "empty-state", data: { kind: "no-logdir", problem: problem.kind } }, [
      h("h2", { text: known.heading }),
      h("p", { text: problem.text }),
      known.local ? h("p", { text: "Start TensorBoard on the folder your HealthCallback(log_dir=...) writes under, e.g.:" }) : null,
      known.local ? h("pre", { class: "th-code" }, [h("code", { text: "tensorboard --logdir logs" })]) : null,
    ]);
  }
  return h("section", { class: "th-empty-page th-empty", testid: "empty-state", data: { kind: "no-runs" } }, [
    h("h2", { text: "No training runs yet" }),
    h("p", {
      text: "This logdir has no runs. Add the callback to your training script; findings appear here while it trains (this page checks every 30 s):",
    }),
    snippet(),
    h("p", { class: "th-muted", text: "Runs logged only with keras.callbacks.TensorBoard get loss-curve checks too." }),
  ]);
}

/** Shown at the top of a run view when the run has no HealthCallback data. */
export function noCallbackHint(): HTMLElement {
  return h("div", { class: "th-notice th-hint", testid: "no-callback-hint" }, [
    h("p", {
      text: "This run was logged without HealthCallback: only loss-curve checks ran. For gradient, NaN and layer diagnoses add:",
    }),
    snippet(),
  ]);
}
