// The run's plan at the top of its page, "What to do": at most three numbered steps, the root
// cause's first (the server decides them: advice/plan.py). Each step: its sentence, its code with a
// Copy button, whether the callback tried it on the run's own data (and how it did), and what the
// trial measured. Finding cards point back here by number ("→ plan step 1").
import type { PlanStep } from "./api";
import { codeBlock } from "./code_block";
import { h } from "./dom";

/** A trial's verdict as the marker says it; a word this tab does not know is shown as given. */
const VERDICT_WORDS: Record<string, string> = { helped: "better", same: "no clear change", worse: "worse", failed: "could not be tried" };

/** "tried on your data: better", or "not tried". */
export function trialMarker(step: PlanStep): { text: string; kind: string } {
  if (!step.tried || step.trial === null) return { text: "not tried", kind: "untried" };
  const verdict = step.trial.verdict;
  const known = Object.prototype.hasOwnProperty.call(VERDICT_WORDS, verdict);
  return { text: "tried on your data: " + (known ? VERDICT_WORDS[verdict] : verdict || "tried"), kind: known ? verdict : "other" };
}

/** The element a finding card's "→ plan step N" scrolls to. */
export function planStepSelector(n: number): string {
  return '[data-testid="plan-step"][data-step="' + String(n) + '"]';
}

export function planSection(plan: PlanStep[], note: string | null = null): HTMLElement {
  // "not tried" means something only where the run's changes were tried (or the note says why not).
  const markers = note !== null || plan.some((step) => step.tried);
  return h("section", { class: "th-card th-plan", testid: "plan", attrs: { "aria-label": "What to do" } }, [
    h("div", { class: "th-card-head" }, [
      h("h3", { class: "th-card-title", text: "What to do" }),
      h("span", { class: "th-muted", text: plan.length === 1 ? "one step" : plan.length + " steps, the root cause's first" }),
    ]),
    h(
      "ol",
      { class: "th-plan-steps" },
      plan.map((step, i) => {
        const marker = trialMarker(step);
        return h("li", { class: "th-plan-step", testid: "plan-step", data: { step: String(i + 1), tried: String(step.tried), answers: step.answers.join(",") } }, [
          h("span", { class: "th-plan-num", text: String(i + 1), attrs: { "aria-hidden": "true" } }),
          h("div", { class: "th-plan-body" }, [
            h("div", { class: "th-plan-head" }, [
              h("span", { class: "th-plan-text", testid: "plan-text", text: step.text }),
              markers ? h("span", { class: "th-trial-marker th-trial-" + marker.kind, testid: "trial-marker", text: marker.text }) : null,
            ]),
            step.code !== null && step.code !== "" ? codeBlock(step.code, "Copy the code of plan step " + (i + 1)) : null,
            step.measured ? h("p", { class: "th-measured", testid: "plan-measured", text: step.measured }) : null,
          ]),
        ]);
      }),
    ),
    note ? h("p", { class: "th-muted th-plan-note", testid: "plan-note", text: note }) : null,
  ]);
}
