// The Owner page's routing section (issue 58): labels per answerer (the reward model, the AI
// judge, people), the AI's share, its accuracy against people on the calibration queries with
// its interval, the threshold in force, budgets used and why queries went where they did.
// Shown only when the run routes (--source route with people in the studio); the trainer
// publishes what this reads (GET /api/owner/routing) after each round of routing.
import "./owner_routing.css";
import { ApiError, type OwnerRouting, apiRouting } from "./api";
import { clear, fmtInt, fmtNum, h } from "./dom";

const WHO: [string, string][] = [
  ["model", "Reward model"],
  ["ai", "AI judge"],
  ["people", "People"],
];

const REASON_TEXT: Record<string, string> = {
  "model-confident": "the model was sure",
  "ai-confident": "the AI was sure enough",
  "ai-unsure": "the AI was unsure",
  "ai-no-answer": "the AI gave no answer",
  calibration: "calibration (AI and people)",
  "calibration-warmup": "calibration while the AI is not yet trusted",
  kind: "a kind only people answer",
  "ai-budget": "the AI's budget was spent",
  "people-budget": "people's budget was spent",
  "budgets-spent": "all budgets spent",
};

function pct(x: number | null | undefined): string {
  return x === null || x === undefined ? "–" : `${Math.round(100 * x)}%`;
}

export class RoutingPanel {
  readonly el: HTMLElement;
  private pills: HTMLElement;
  private split: HTMLElement;
  private body: HTMLTableSectionElement;
  private reasons: HTMLElement;

  constructor() {
    this.pills = h("div", { class: "routing-pills", "data-testid": "routing-pills" });
    this.split = h("div", { class: "routing-split", "data-testid": "routing-split" });
    this.body = h("tbody", {});
    this.reasons = h("p", { class: "hint routing-reasons", "data-testid": "routing-reasons" });
    const cols = ["Answerer", "Labels", "Share", "Asked", "Budget"];
    this.el = h(
      "section",
      { class: "card routing-panel", hidden: true, "data-testid": "routing-panel" },
      h("div", { class: "card-head" }, h("h2", { text: "Who answers: routing" })),
      this.pills,
      this.split,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table routing-table", "data-testid": "routing-table" },
          h("thead", {}, h("tr", {}, ...cols.map((t, k) => h("th", { class: k >= 1 ? "num" : "", text: t })))),
          this.body,
        ),
      ),
      this.reasons,
    );
  }

  async refresh(): Promise<void> {
    let r: OwnerRouting;
    try {
      r = await apiRouting.owner();
    } catch (err) {
      if (err instanceof ApiError) this.el.hidden = true;
      return;
    }
    this.render(r);
  }

  private render(r: OwnerRouting): void {
    this.el.hidden = !r.routes;
    if (!r.routes) return;
    const labels = r.labels ?? {};
    const total = WHO.reduce((n, [k]) => n + (labels[k] ?? 0), 0);
    const acc = r.ai_accuracy;
    const interval = acc && acc.accuracy !== null && acc.accuracy !== undefined ? `${pct(acc.accuracy)} [${pct(acc.interval[0])}, ${pct(acc.interval[1])}]` : "–";
    const pill = (label: string, value: string, id?: string) =>
      h("span", { class: "pill", "data-testid": id }, h("span", { class: "pill-label", text: label }), h("strong", { text: value }));
    clear(this.pills);
    this.pills.append(
      pill("AI's share of labels", total ? pct((labels.ai ?? 0) / total) : "–", "routing-ai-share"),
      pill(`AI accuracy vs people (${acc ? Math.round(100 * acc.level) : 95}% interval)`, interval, "routing-ai-accuracy"),
      pill("calibration records", acc ? `${fmtInt(acc.agreed)} agreed of ${fmtInt(acc.records)}` : "–", "routing-records"),
      pill("threshold in force", acc && acc.threshold !== null && acc.threshold !== undefined ? fmtNum(acc.threshold) : "not yet (AI not trusted)", "routing-threshold"),
      pill("target label error", acc ? pct(acc.target_error) : "–"),
      pill("calibration share", pct(r.calibration_share)),
    );
    if (r.ai_true_accuracy !== null && r.ai_true_accuracy !== undefined) this.pills.append(pill("AI's true accuracy (simulated)", pct(r.ai_true_accuracy)));
    clear(this.split);
    for (const [k, name] of WHO) {
      const n = labels[k] ?? 0;
      if (!total || !n) continue;
      const bar = h("span", { class: `split-${k}`, title: `${name}: ${n}` });
      bar.style.width = `${(100 * n) / total}%`; // CSSOM, allowed by the page's CSP
      this.split.append(bar);
    }
    clear(this.body);
    const names: Record<string, string> = { ai: r.ai ? `AI judge (${r.ai})` : "AI judge", people: r.people ? `People (${r.people})` : "People" };
    for (const [k, name] of WHO) {
      const cap = r.budgets?.[k];
      this.body.append(
        h(
          "tr",
          { "data-testid": `routing-row-${k}` },
          h("td", {}, h("span", { class: `swatch split-${k}` }), names[k] ?? name),
          h("td", { class: "num", text: fmtInt(labels[k] ?? 0) }),
          h("td", { class: "num", text: total ? pct((labels[k] ?? 0) / total) : "–" }),
          h("td", { class: "num", text: fmtInt(r.asked?.[k] ?? 0) }),
          h("td", { class: "num", text: cap === null || cap === undefined ? "no limit" : `${fmtInt(r.asked?.[k] ?? 0)} / ${fmtInt(cap)}` }),
        ),
      );
    }
    const why = Object.entries(r.reasons ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${REASON_TEXT[k] ?? k}: ${fmtInt(n)}`);
    if (r.unrouted) why.push(`unanswered (no budget): ${fmtInt(r.unrouted)}`);
    this.reasons.textContent = why.length ? `Why queries went where they did: ${why.join(" · ")}.` : "No queries routed yet.";
  }
}
