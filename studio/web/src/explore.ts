// Groupwise view (paper 000): explore the round's behaviour tree, compose two groups, compare
// them, and see your own history. The system only suggests (grey edges, 'Suggest next'); you
// choose, edit and answer. No reward value or predicted return is ever shown (or sent here).
import "./explore.css";
import { ApiError, type GroupSuggestion, NetworkError, type Reply, type RequestBody, type RoundView, requestRetrying, uuid } from "./api";
import { GroupPanel } from "./compare_groups";
import { h, kbd } from "./dom";
import type { KeyAction, KeyTarget } from "./keys";
import { Preview, forgetPending, prefetchClips } from "./preview";
import type { Progress } from "./progress";
import { EQUAL, PREFERRED, RadialChart, type Side, type TreeNodeData, UNPREFERRED } from "./radial";
import { toast } from "./toast";

/** Suggestions ahead of the one shown whose clips are rendered before they are asked for. */
const PREFETCH_SUGGESTIONS = 2;

const ANSWERS: { action: KeyAction; p: number | null; key: string; label: string; cls: string }[] = [
  { action: "left", p: 1, key: "←", label: "Left group is better", cls: "ans-left" },
  { action: "equal", p: 0.5, key: "↑", label: "Equally good", cls: "ans-equal" },
  { action: "cannot", p: null, key: "↓", label: "Can't tell", cls: "ans-cannot" },
  { action: "right", p: 0, key: "→", label: "Right group is better", cls: "ans-right" },
];

function describe(p: number | null): string {
  return p === null ? "Can't tell" : p === 1 ? "Left group preferred" : p === 0 ? "Right group preferred" : "Equally good";
}

export class ExploreView implements KeyTarget {
  readonly el: HTMLElement;
  private chart: RadialChart;
  private chartHost: HTMLElement;
  private legend: HTMLElement | null = null;
  private preview = new Preview();
  private panels: Record<Side, GroupPanel>;
  private target: Side = "a";
  private view: RoundView | null = null;
  private title: HTMLElement;
  private note: HTMLElement;
  private suggestBtn: HTMLButtonElement;
  private buttons = new Map<KeyAction, HTMLButtonElement>();
  private newRound: HTMLButtonElement;
  private suggestion: GroupSuggestion | null = null;
  private usedSuggestions = new Set<number>();
  private shownAt = performance.now();
  private spreadTimer: number | undefined;
  private busy = false;
  private active = false;
  private loading = false;
  private limit = 8;

  constructor(private readonly progress: Progress) {
    this.chart = new RadialChart({
      clickNode: (node) => this.clickNode(node),
      hoverNode: (node) => this.preview.show(node),
    });
    const owner = {
      move: (id: string, from: Side) => this.move(id, from),
      remove: (id: string, from: Side) => this.remove(id, from),
      target: (side: Side) => this.setTarget(side),
    };
    this.panels = { a: new GroupPanel("a", this.limit, owner), b: new GroupPanel("b", this.limit, owner) };
    this.title = h("div", { class: "gw-title", "data-testid": "explore-title", text: "Loading the round…" });
    this.newRound = h("button", { class: "btn btn-small btn-primary", type: "button", hidden: true, "data-testid": "new-round", text: "Load the new round" });
    this.newRound.addEventListener("click", () => {
      this.newRound.blur();
      void this.load(true);
    });
    const reset = h("button", { class: "btn btn-small btn-ghost", type: "button", title: "Reset pan and zoom (or double-click the chart)", text: "Reset view" });
    reset.addEventListener("click", () => {
      reset.blur();
      this.chart.resetView();
    });
    const legend = explainLegend();
    this.legend = legend;
    this.chartHost = h("div", { class: "gw-chart" }, this.chart.el, this.preview.el);
    const answerBar = h("div", { class: "answers gw-answers", role: "group", "aria-label": "Your answer" });
    for (const a of ANSWERS) {
      const btn = h("button", { class: `btn btn-answer ${a.cls}`, type: "button", "data-testid": `gw-answer-${a.action}`, disabled: true }, kbd(a.key), h("span", { text: a.label }));
      btn.addEventListener("click", () => {
        btn.blur();
        void this.answer(a.p);
      });
      this.buttons.set(a.action, btn);
      answerBar.append(btn);
    }
    this.suggestBtn = h("button", { class: "btn", type: "button", "data-testid": "suggest" }, kbd("N"), h("span", { text: "Suggest next" }));
    this.suggestBtn.addEventListener("click", () => {
      this.suggestBtn.blur();
      this.suggestNext();
    });
    const replay = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "gw-replay" }, kbd("Space"), h("span", { text: "Replay" }));
    replay.addEventListener("click", () => {
      replay.blur();
      this.replay();
    });
    const clearBtn = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "clear", text: "Clear both" });
    clearBtn.addEventListener("click", () => {
      clearBtn.blur();
      this.setGroups([], [], null);
    });
    this.note = h("p", { class: "gw-note", "data-testid": "gw-note" });
    this.el = h(
      "section",
      { class: "view view-explore", "data-testid": "view-explore" },
      h(
        "div",
        { class: "gw-layout" },
        h("div", { class: "gw-left" }, h("div", { class: "gw-toolbar" }, this.title, this.newRound, reset), this.chartHost, legend),
        h(
          "div",
          { class: "gw-right" },
          h("div", { class: "question" }, h("h1", { text: "Which group is closer to what you want?" })),
          answerBar,
          h("div", { class: "gw-sides" }, this.panels.a.el, this.panels.b.el),
          h("div", { class: "below-stage gw-below" }, this.suggestBtn, replay, clearBtn),
          this.note,
        ),
      ),
    );
    this.setTarget("a");
    window.addEventListener("resize", () => this.active && this.draw());
    progress.onUpdate((s) => {
      if (this.active && this.view && s.round !== null && s.round > this.view.round) void this.load(false);
    });
  }

  show(): void {
    this.active = true;
    if (!this.view || this.title.dataset.offline) void this.load(true);
    else this.draw();
    this.panels.a.play();
    this.panels.b.play();
  }

  hide(): void {
    this.active = false;
    this.preview.hide();
    this.panels.a.pause();
    this.panels.b.pause();
  }

  onKey(action: KeyAction): boolean {
    const a = ANSWERS.find((x) => x.action === action);
    if (a) {
      void this.answer(a.p);
      return true;
    }
    if (action === "replay") {
      this.replay();
      return true;
    }
    if (action === "next") {
      this.suggestNext();
      return true;
    }
    return false;
  }

  // ------------------------------------------------------------------ data
  /** Fetch the round's view; ``apply`` false: only offer it when groups are being composed. */
  private async load(apply: boolean): Promise<void> {
    if (this.loading) return;
    this.loading = true;
    try {
      const r = await requestRetrying<Reply<"/api/groupwise/round", "get">>("GET", "/api/groupwise/round", undefined, {
        alive: () => this.active,
        onRetry: (e, ms) => {
          const why = e.message.startsWith("server error") ? "The studio could not build this round" : "The studio cannot be reached";
          this.title.textContent = `${why}; trying again in ${Math.round(ms / 1000) || 1} s…`;
          this.title.dataset.offline = "1";
        },
      });
      delete this.title.dataset.offline;
      const v = r.view;
      if (!v || !v.root) {
        this.title.textContent = "No round yet: the trainer publishes its behaviours when it starts a round.";
        window.setTimeout(() => this.active && void this.load(true), 3000);
        return;
      }
      const busy = this.panels.a.members.length + this.panels.b.members.length > 0;
      if (this.view && v.round !== this.view.round && busy && !apply) {
        this.newRound.hidden = false;
        this.newRound.textContent = `Load round ${v.round}`;
        return;
      }
      const roundChanged = !this.view || v.round !== this.view.round;
      this.view = v;
      this.limit = v.max_group;
      this.newRound.hidden = true;
      if (roundChanged) {
        this.usedSuggestions.clear();
        this.setGroups([], [], null);
        forgetPending();
      }
      this.title.textContent = `Round ${v.round} · ${v.n_behaviours} behaviours`;
      this.title.dataset.round = String(v.round);
      this.suggestBtn.disabled = !v.group_suggestions.length;
      this.suggestBtn.title = v.group_suggestions.length ? "Fill both sides with the most informative pair of groups" : "No suggestions before the reward model's first fit";
      this.draw();
      this.prefetchSuggestions();
    } catch (err) {
      if (err instanceof ApiError || err instanceof NetworkError) {
        this.title.textContent = `Could not load the round: ${err.message}`;
        // hidden while offline: show() loads again; a server error is retried a little later
        if (err instanceof ApiError) window.setTimeout(() => this.active && void this.load(true), 10000);
      } else throw err;
    } finally {
      this.loading = false;
    }
  }

  private draw(): void {
    const v = this.view;
    if (!v || !v.root) return;
    const box = this.chartHost.getBoundingClientRect();
    const top = box.top > 0 ? box.top : 160;
    // the legend stays in view under the chart: the chart gives up the height it needs
    const legendH = this.legend?.getBoundingClientRect().height ?? 0;
    const size = Math.floor(Math.min(box.width || 600, Math.max(320, window.innerHeight - top - legendH - 40)));
    this.chart.render(v.root, v.levels, v.suggestions, v.history, size);
    this.chart.setSelection(this.panels.a.members, this.panels.b.members);
  }

  // ------------------------------------------------------------------ composing groups
  private setTarget(side: Side): void {
    this.target = side;
    this.panels.a.setTarget(side === "a");
    this.panels.b.setTarget(side === "b");
  }

  private clickNode(node: TreeNodeData): void {
    const t0 = performance.now();
    requestAnimationFrame(() => requestAnimationFrame(() => performance.measure("explore-select", { start: t0 })));
    try {
      this.applyClick(node);
    } finally {
      performance.measure("explore-select-script", { start: t0 });
    }
  }

  private applyClick(node: TreeNodeData): void {
    const a = [...this.panels.a.members];
    const b = [...this.panels.b.members];
    if (!node.children || node.segments.length === 1) {
      const s = node.segment ?? node.segments[0];
      if (a.includes(s)) a.splice(a.indexOf(s), 1);
      else if (b.includes(s)) b.splice(b.indexOf(s), 1);
      else if (this.target === "a") a.push(s);
      else b.push(s);
      this.setGroups(a, b, this.suggestion);
    } else {
      if (node.segments.length > this.limit) {
        toast(`This group has ${node.segments.length} behaviours; at most ${this.limit} fit on one side. Pick a group on a ring closer to the centre, or single behaviours.`, { tone: "warn", ms: 6000 });
        return;
      }
      const members = node.segments;
      const other = (this.target === "a" ? b : a).filter((s) => !members.includes(s));
      const side = this.target;
      if (side === "a") this.setGroups(members, other, this.suggestion);
      else this.setGroups(other, members, this.suggestion);
      const otherSide: Side = side === "a" ? "b" : "a";
      if (!this.panels[otherSide].members.length) this.setTarget(otherSide);
    }
  }

  private move(id: string, from: Side): void {
    const a = this.panels.a.members.filter((s) => s !== id);
    const b = this.panels.b.members.filter((s) => s !== id);
    if (from === "a") b.push(id);
    else a.push(id);
    this.setGroups(a, b, this.suggestion);
  }

  private remove(id: string, from: Side): void {
    this.setGroups(
      this.panels.a.members.filter((s) => s !== id || from !== "a"),
      this.panels.b.members.filter((s) => s !== id || from !== "b"),
      this.suggestion,
    );
  }

  private setGroups(a: string[], b: string[], suggestion: GroupSuggestion | null): void {
    this.suggestion = a.length || b.length ? suggestion : null;
    this.panels.a.set(a);
    this.panels.b.set(b);
    this.chart.setSelection(a, b);
    this.shownAt = performance.now();
    const ok = a.length > 0 && b.length > 0 && a.length <= this.limit && b.length <= this.limit;
    for (const btn of this.buttons.values()) btn.disabled = !ok || this.busy;
    this.note.textContent = !a.length && !b.length ? "" : !ok ? (a.length > this.limit || b.length > this.limit ? `At most ${this.limit} behaviours per side.` : "Both sides need at least one behaviour.") : `One answer gives ${Math.max(a.length, b.length)} labels (every behaviour of both groups in at least one pair).`;
    window.clearTimeout(this.spreadTimer);
    this.spreadTimer = window.setTimeout(() => void this.fetchSpread(), 120);
  }

  private async fetchSpread(): Promise<void> {
    const v = this.view;
    if (!v) return;
    const a = this.panels.a.members;
    const b = this.panels.b.members;
    if (!a.length && !b.length) return;
    try {
      const r = await requestRetrying<Reply<"/api/groupwise/spread", "post">>("POST", "/api/groupwise/spread", { round: v.round, a, b }, {
        alive: () => this.active && this.panels.a.members === a && this.panels.b.members === b,
      });
      if (this.panels.a.members === a) this.panels.a.setSpread(r.a);
      if (this.panels.b.members === b) this.panels.b.setSpread(r.b);
    } catch {
      /* the similarity line is a hint; answering works without it */
    }
  }

  private suggestNext(): void {
    const v = this.view;
    if (!v) return;
    const next = v.group_suggestions.find((g) => !g.answered && !this.usedSuggestions.has(g.rank));
    if (!next) {
      toast(v.group_suggestions.length ? "No more suggestions this round: compose your own groups on the ring." : "No suggestions before the reward model's first fit.", { tone: "info" });
      return;
    }
    this.usedSuggestions.add(next.rank);
    this.setGroups(next.a, next.b, next);
    this.setTarget("a");
    this.prefetchSuggestions();
  }

  /** Render the clips of the next suggestions while the person watches these (#25: a
   * suggestion's clips were rendered only when shown, a third of a Groups session). */
  private prefetchSuggestions(): void {
    const v = this.view;
    if (!v) return;
    const next = v.group_suggestions.filter((g) => !g.answered && !this.usedSuggestions.has(g.rank)).slice(0, PREFETCH_SUGGESTIONS);
    prefetchClips(next.flatMap((g) => [...g.a, ...g.b]));
  }

  private replay(): void {
    this.panels.a.replay();
    this.panels.b.replay();
  }

  // ------------------------------------------------------------------ answering
  private async answer(p: number | null): Promise<void> {
    const v = this.view;
    const a = this.panels.a.members;
    const b = this.panels.b.members;
    if (!v || this.busy || !a.length || !b.length || a.length > this.limit || b.length > this.limit) return;
    const action = ANSWERS.find((x) => x.p === p)?.action;
    const btn = action ? this.buttons.get(action) : undefined;
    btn?.classList.add("pressed");
    window.setTimeout(() => btn?.classList.remove("pressed"), 160);
    this.busy = true;
    const body: RequestBody<"/api/groupwise/judgements", "post"> = {
      round: v.round,
      a,
      b,
      p,
      response_time_s: Math.round(performance.now() - this.shownAt) / 1000,
      client_key: uuid(),
      suggestion_rank: this.suggestion?.rank ?? null,
    };
    try {
      const r = await requestRetrying<Reply<"/api/groupwise/judgements", "post">>("POST", "/api/groupwise/judgements", body, {
        alive: () => this.active,
        onRetry: () => {
          this.note.textContent = "Connection lost: your answer is kept and sent again as soon as the studio answers…";
        },
      });
      toast(`Saved · ${describe(p)} · ${r.n_labels} ${r.n_labels === 1 ? "label" : "labels"}`, { tone: "ok" });
      if (this.suggestion) this.suggestion.answered = true;
      this.busy = false;
      this.setGroups([], [], null);
      this.setTarget("a");
      this.progress.refreshSoon();
      await this.load(true);
    } catch (err) {
      this.busy = false;
      this.setGroups(a, b, this.suggestion);
      if (err instanceof ApiError) {
        toast(`Answer not saved: ${err.detail}`, { tone: "error", ms: 10000 });
        if (err.status === 409) void this.load(true);
      } else if (err instanceof NetworkError) toast("Answer not sent: you left the Groups view while the studio could not be reached. Answer again.", { tone: "error", ms: 10000 });
      else throw err;
    }
  }
}

export const HISTORY_COLOURS = { preferred: PREFERRED, unpreferred: UNPREFERRED, equal: EQUAL };

/** What the radial chart's rings, curves and colours mean, next to it (no paper needed). */
function explainLegend(): HTMLElement {
  const item = (key: HTMLElement, title: string, text: string, more: string) =>
    h("div", { class: "gw-legend-item", title: more }, key, h("span", { class: "gw-legend-text" }, h("strong", { text: title }), h("span", { text: ` ${text}` })));
  const rings = h(
    "span",
    { class: "gw-key-rings", "aria-hidden": "true" },
    h("span", { class: "gw-ring gw-ring-outer" }),
    h("span", { class: "gw-ring gw-ring-mid" }),
    h("span", { class: "gw-ring gw-ring-inner" }),
  );
  return h(
    "div",
    { class: "gw-legend", "data-testid": "gw-legend" },
    item(rings, "Rings:", "the innermost ring has one slice per behaviour; each ring further out joins behaviours that move alike into bigger groups.", "Hover a slice to play it; click it to put that behaviour (or the whole group) on the highlighted side."),
    item(h("span", { class: "gw-key gw-key-suggest" }), "Grey curves:", "suggested comparisons, where the reward model is least sure (darker = less sure).", "Comparing groups around the two ends of a grey curve teaches the model most. N fills both sides with the best suggestion."),
    item(h("span", { class: "gw-key gw-key-history" }), "Coloured curves:", "your past answers, from the behaviour you preferred (green end) to the one you did not (red end); purple = equally good.", "Only your own answers are drawn; other annotators never see them."),
    item(h("span", { class: "gw-key-sides" }, h("span", { class: "gw-sw gw-sw-a" }), h("span", { class: "gw-sw gw-sw-b" })), "Blue / orange slices:", "the left / right group you are composing. Drag to pan, wheel to zoom, double-click to reset.", ""),
  );
}
