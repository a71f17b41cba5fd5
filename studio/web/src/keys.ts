// Keyboard first: one global handler; the active view receives the keys it understands.

export type KeyAction = "left" | "right" | "equal" | "cannot" | "replay" | "undo" | "next";

export interface KeyTarget {
  onKey(action: KeyAction, ev: KeyboardEvent): boolean;
  /** Every key press first, modifiers included (digits, Enter, Backspace, Ctrl+Z: the Rank
   * view's keys), for a view that reads more than the shared keys; true when it handled it. */
  onRawKey?(ev: KeyboardEvent): boolean;
}

let target: KeyTarget | null = null;
let globalUndo: (() => boolean) | null = null;

export function setKeyTarget(t: KeyTarget | null): void {
  target = t;
}

/** The toast's undo: U works in every view while a toast offers it. */
export function setGlobalUndo(fn: (() => boolean) | null): void {
  globalUndo = fn;
}

const MAP: Record<string, KeyAction> = {
  ArrowLeft: "left",
  ArrowRight: "right",
  ArrowUp: "equal",
  ArrowDown: "cannot",
  " ": "replay",
  u: "undo",
  U: "undo",
  n: "next",
  N: "next",
};

export function installKeys(): void {
  document.addEventListener("keydown", (ev) => {
    const el = ev.target as HTMLElement | null;
    const tag = el?.tagName;
    if (tag === "INPUT" && (el as HTMLInputElement).type !== "range") return;
    if (tag === "TEXTAREA" || tag === "SELECT" || el?.isContentEditable) return;
    if (target?.onRawKey?.(ev)) {
      ev.preventDefault();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const action = MAP[ev.key];
    if (!action) return;
    if (ev.repeat && action !== "replay") {
      ev.preventDefault();
      return;
    }
    let handled = target ? target.onKey(action, ev) : false;
    if (!handled && action === "undo" && globalUndo) handled = globalUndo();
    if (handled) ev.preventDefault();
  });
}
