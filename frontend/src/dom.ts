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
