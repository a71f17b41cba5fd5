// One toast at a time, bottom centre; optional action button (Undo with the U key).
import { h } from "./dom";
import { setGlobalUndo } from "./keys";

let host: HTMLElement | null = null;
let hideTimer: number | undefined;

export interface ToastAction {
  label: string;
  key?: string;
  run: () => void;
  /** false while the action cannot run yet (button shown disabled). */
  ready?: boolean;
}

export interface ToastHandle {
  setAction(a: ToastAction | null): void;
  update(text: string, tone?: Tone): void;
  close(): void;
}

type Tone = "ok" | "warn" | "error" | "info";

export function toast(text: string, opts: { tone?: Tone; action?: ToastAction; ms?: number } = {}): ToastHandle {
  if (!host) {
    host = h("div", { class: "toast-host", "aria-live": "polite" });
    document.body.append(host);
  }
  window.clearTimeout(hideTimer);
  host.replaceChildren();
  const msg = h("span", { class: "toast-text", text });
  const el = h("div", { class: `toast toast-${opts.tone ?? "ok"}`, role: "status" }, msg);
  const actionSlot = h("span", { class: "toast-action" });
  el.append(actionSlot);
  host.append(el);
  let current: ToastAction | null = null;

  const handle: ToastHandle = {
    setAction(a) {
      current = a;
      actionSlot.replaceChildren();
      if (!a) {
        setGlobalUndo(null);
        return;
      }
      const btn = h("button", { class: "btn btn-small", type: "button", "data-testid": "toast-undo" }, a.label);
      if (a.key) btn.append(h("kbd", { text: a.key }));
      btn.disabled = a.ready === false;
      btn.addEventListener("click", () => {
        btn.blur();
        a.run();
      });
      actionSlot.append(btn);
      setGlobalUndo(() => {
        if (current !== a) return false;
        a.run();
        return true;
      });
    },
    update(t, tone) {
      msg.textContent = t;
      if (tone) el.className = `toast toast-${tone}`;
    },
    close() {
      if (host?.contains(el)) el.remove();
      if (current) setGlobalUndo(null);
      current = null;
    },
  };
  if (opts.action) handle.setAction(opts.action);
  hideTimer = window.setTimeout(() => handle.close(), opts.ms ?? 8000);
  return handle;
}
