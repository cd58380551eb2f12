// DOM helpers. Text goes in with textContent / createTextNode only: nothing here (or
// anywhere in this bundle) parses HTML, so server data can never become markup.

export type Child = Node | string | number | null | undefined | false;

export interface Props {
  class?: string;
  testid?: string;
  text?: string;
  title?: string;
  attrs?: Record<string, string>;
  data?: Record<string, string>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  children: Child[] = [],
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props.class) el.className = props.class;
  if (props.testid) el.setAttribute("data-testid", props.testid);
  if (props.title !== undefined) el.title = props.title;
  if (props.attrs) for (const [k, v] of Object.entries(props.attrs)) el.setAttribute(k, v);
  if (props.data) for (const [k, v] of Object.entries(props.data)) el.setAttribute("data-" + k, v);
  if (props.text !== undefined) el.textContent = props.text;
  append(el, children);
  return el;
}

export function append(parent: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// ---- copy to clipboard ----------------------------------------------------------------

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

// ---- number formatting ----------------------------------------------------------------

/** Compact number for axis ticks and legends: 0.0123, 4.56, 1.2e5, 3e-7. */
export function fmtNum(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const [mant = "", exp = ""] = v.toExponential(digits - 1).split("e");
    return mant.replace(/\.?0+$/, "") + "e" + exp.replace("+", "");
  }
  return String(Number(v.toPrecision(digits)));
}

export function fmtStep(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return String(Number((v / 1e6).toPrecision(3))) + "M";
  if (a >= 1e4) return String(Number((v / 1e3).toPrecision(3))) + "k";
  return String(Math.round(v));
}
