// A study participant's progress (issue #61): answers against the study's quota above the
// clips, and the way to the completion page (with the completion code) once they are done.
// Hidden for everyone who did not join by a study link.
import { type StudyMe, apiStudy, NetworkError, backoffSleep, rooted } from "./api";
import { h } from "./dom";

export class StudyBanner {
  readonly el: HTMLElement;
  private text: HTMLElement;
  private bar: HTMLProgressElement;
  private link: HTMLAnchorElement;
  private left = false;
  private told = false;
  private participantFns: (() => void)[] = [];

  constructor(private readonly everyMs = 5000) {
    this.text = h("span", { "data-testid": "study-progress" });
    this.bar = h("progress", { max: 100, value: 0 });
    this.link = h("a", { href: rooted("/study/done"), hidden: true, "data-testid": "study-done" }, "Get your completion code");
    this.el = h("div", { class: "study-banner", hidden: true, "data-testid": "study-banner" }, this.text, this.bar, this.link);
  }

  /** Run `fn` once this page is known to be a study participant's. */
  onParticipant(fn: () => void): void {
    this.participantFns.push(fn);
  }

  private show(me: StudyMe): void {
    this.el.hidden = !me.participant;
    if (!me.participant) return;
    if (!this.told) {
      this.told = true;
      this.participantFns.forEach((fn) => fn());
    }
    const s = { answers: 0, quota_answers: 0, minutes: 0, quota_minutes: 0, done: false, done_url: "study/done", step: "", ...me };
    if (s.step === "instructions" && !this.left) {
      this.left = true; // the practice first: its answers do not count, the studio's do
      location.assign(rooted("/study/practice"));
      return;
    }
    const parts = [];
    if (s.quota_answers) parts.push(`${s.answers} of ${s.quota_answers} answers`);
    if (s.quota_minutes) parts.push(`${Math.floor(s.minutes)} of ${s.quota_minutes} minutes`);
    this.text.textContent = s.done ? "You have finished this study." : `Study progress: ${parts.join(", ") || `${s.answers} answers`}`;
    const share = s.quota_answers ? s.answers / s.quota_answers : s.quota_minutes ? s.minutes / s.quota_minutes : 0;
    this.bar.value = Math.min(100, Math.round(100 * share));
    this.link.hidden = !s.done;
    if (s.done && !this.left) {
      this.left = true;
      window.setTimeout(() => location.assign(rooted(`/${s.done_url}`)), 1500);
    }
  }

  async start(): Promise<void> {
    for (;;) {
      try {
        const s = await apiStudy.me();
        this.show(s);
        if (!s.participant) return; // not in a study: nothing to follow
      } catch (err) {
        if (!(err instanceof NetworkError)) return;
      }
      await backoffSleep(this.everyMs);
    }
  }
}
