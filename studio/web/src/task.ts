// The owner's task instructions (issue #25): what the agent should learn, shown above the clips
// in every view. Read from GET /api/task now and every 20 s (so an edit on the Owner page
// reaches everyone), surviving network drops.
import { type Task, api25, backoffSleep, NetworkError } from "./api";
import { h } from "./dom";

export class TaskBanner {
  readonly el: HTMLElement;
  private text: HTMLElement;
  private current = "";

  constructor(private readonly everyMs = 20000) {
    this.text = h("span", { class: "task-text", "data-testid": "task-text" });
    this.el = h(
      "aside",
      { class: "task-banner", hidden: true, "data-testid": "task-banner", "aria-label": "Task instructions" },
      h("span", { class: "task-label", text: "Your task" }),
      this.text,
    );
  }

  /** Show ``t`` at once (the Owner page calls this after saving). */
  set(t: Task): void {
    this.current = t.text;
    this.text.textContent = t.text;
    this.el.hidden = !t.text;
  }

  async start(): Promise<void> {
    for (;;) {
      try {
        this.set(await api25.task());
      } catch (err) {
        if (!(err instanceof NetworkError)) return; // 401: the app shows the sign-in screen
      }
      await backoffSleep(this.everyMs);
    }
  }

  get value(): string {
    return this.current;
  }
}
