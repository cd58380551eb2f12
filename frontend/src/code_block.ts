// A code block with a Copy button (fix snippets, the HealthCallback snippet). Copies with
// the Clipboard API, falling back to execCommand; if both fail the code is selected.
import { h } from "./dom";

function legacyCopy(text: string): boolean {
  const active = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  const ta = document.createElement("textarea");
  ta.value = text;
  ta.setAttribute("readonly", "");
  ta.setAttribute("aria-hidden", "true");
  ta.className = "th-offscreen";
  document.body.appendChild(ta);
  ta.select();
  ta.setSelectionRange(0, text.length);
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  ta.remove();
  active?.focus();
  return ok;
}

export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Clipboard API refused (permissions policy in the iframe, no focus, ...): fall back.
  }
  return legacyCopy(text);
}

function selectContents(el: HTMLElement): void {
  const sel = window.getSelection();
  if (!sel) return;
  const range = document.createRange();
  range.selectNodeContents(el);
  sel.removeAllRanges();
  sel.addRange(range);
}

/** A <pre> code block with a Copy button; the text is set with textContent. */
export function codeBlock(code: string, label = "Copy code"): HTMLElement {
  const pre = h("pre", { class: "th-code" }, [h("code", { text: code })]);
  const button = h("button", {
    class: "th-copy",
    testid: "copy-button",
    text: "Copy",
    attrs: { type: "button", "aria-label": label },
  });
  const status = h("span", { class: "th-visually-hidden", attrs: { "aria-live": "polite" } });
  let timer: number | undefined;
  button.addEventListener("click", () => {
    void copyText(code).then((ok) => {
      button.textContent = ok ? "Copied" : "Press Ctrl+C";
      button.classList.toggle("th-copied", ok);
      status.textContent = ok ? "Copied to clipboard" : "Copy failed; the code is selected, press Ctrl+C";
      if (!ok) selectContents(pre);
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        button.textContent = "Copy";
        button.classList.remove("th-copied");
        status.textContent = "";
      }, 1800);
    });
  });
  return h("div", { class: "th-codewrap" }, [pre, button, status]);
}
