// Tiny DOM helpers. Text always goes through textContent: nothing from the server is parsed as HTML.

type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === "class") el.className = String(v);
    else if (k === "text") el.textContent = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return el;
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function kbd(label: string): HTMLElement {
  return h("kbd", { text: label });
}

export function fmtInt(n: number | null | undefined): string {
  return n === null || n === undefined || Number.isNaN(n) ? "–" : Math.round(n).toLocaleString("en-US");
}

export function fmtNum(n: number | null | undefined, digits = 2): string {
  return n === null || n === undefined || Number.isNaN(n) ? "–" : n.toFixed(digits);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => window.setTimeout(r, ms));
}

export function spinner(label: string): HTMLElement {
  return h("div", { class: "clip-overlay", role: "status" }, h("div", { class: "spinner" }), h("span", { text: label }));
}

/** A button that shows its key and label and runs ``run`` when clicked (after giving up the focus,
 * so that the keys go on to the page). */
export function keyButton(cls: string, key: string, label: string, testid: string, run: () => void): HTMLButtonElement {
  const b = h("button", { class: cls, type: "button", "data-testid": testid }, kbd(key), h("span", { text: label }));
  b.addEventListener("click", () => {
    b.blur();
    run();
  });
  return b;
}
