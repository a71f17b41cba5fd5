// Owner's page: learning curve so far (D3), annotators with agreement and SML weights, invites, export.
import { axisBottom, axisLeft } from "d3-axis";
import { scaleBand, scaleLinear } from "d3-scale";
import { select } from "d3-selection";
import { line } from "d3-shape";
import { ApiError, api, api25, type AnnotatorActivity, type AnnotatorRow, type Consistency, type Invite, type Overview, type OwnerActivity, rooted, type RoundRow, TASK_MAX_CHARS, type Task } from "./api";
import { RoutingPanel } from "./owner_routing";
import { StudyPanel } from "./owner_study";
import { clear, fmtInt, fmtNum, h } from "./dom";
import type { KeyAction, KeyTarget } from "./keys";
import { toast } from "./toast";

type Row = Record<string, number | null>;

/** Rounds may come flat (metrics row) or as store rows with a nested `metrics` object. */
export function flattenRounds(rows: RoundRow[]): Row[] {
  return rows.map((r) => {
    const out: Row = {};
    const put = (k: string, v: unknown) => {
      if (typeof v === "number" && Number.isFinite(v)) out[k] = v;
      else if (!(k in out)) out[k] = null;
    };
    const nested = (r as Record<string, unknown>).metrics;
    if (nested && typeof nested === "object") for (const [k, v] of Object.entries(nested)) put(k, v);
    for (const [k, v] of Object.entries(r)) if (k !== "metrics") put(k, v);
    return out;
  });
}

interface Series {
  name: string;
  key: string;
  cls: string;
}

const MARGIN = { top: 16, right: 20, bottom: 40, left: 56 };

function lineChart(
  host: HTMLElement,
  rows: Row[],
  xKey: string,
  xLabel: string,
  series: Series[],
  yLabel: string,
  yDomain?: [number, number],
  integerX = false,
  xFromZero = false,
): void {
  clear(host);
  const num = (v: number | null | undefined): v is number => typeof v === "number" && Number.isFinite(v);
  const pts = series.map((s) => rows.filter((r) => num(r[xKey]) && num(r[s.key])).map((r) => [r[xKey] as number, r[s.key] as number] as [number, number]));
  if (pts.every((p) => p.length === 0)) {
    host.append(h("p", { class: "chart-empty", text: "No values yet." }));
    return;
  }
  const width = Math.max(280, host.clientWidth || 420);
  const height = 220;
  const all = pts.flat();
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs);
  const x = scaleLinear()
    .domain(xFromZero ? [0, Math.max(1, xMax)] : xMin === xMax ? [xMin - 1, xMax + 1] : [xMin, xMax])
    .range([MARGIN.left, width - MARGIN.right]);
  if (xFromZero) x.nice();
  const yMin = Math.min(...ys);
  const yMax = Math.max(...ys);
  const y = scaleLinear()
    .domain(yDomain ?? (yMin === yMax ? [yMin - 1, yMax + 1] : [yMin, yMax]))
    .nice()
    .range([height - MARGIN.bottom, MARGIN.top]);
  const svg = select(host).append("svg").attr("viewBox", `0 0 ${width} ${height}`).attr("width", width).attr("height", height).attr("class", "chart");
  svg
    .append("g")
    .attr("class", "grid")
    .attr("transform", `translate(${MARGIN.left},0)`)
    .call(axisLeft(y).ticks(5).tickSize(-(width - MARGIN.left - MARGIN.right)).tickFormat(() => ""));
  const xCount = Math.min(6, Math.max(2, Math.floor(width / 90)));
  svg.append("g").attr("class", "axis").attr("transform", `translate(0,${height - MARGIN.bottom})`).call(
      integerX
        ? axisBottom(x).tickValues(Array.from(new Set(xs)).sort((p, q) => p - q)).tickFormat((d) => String(d))
        : axisBottom(x).ticks(xCount).tickFormat(distinctTicks(x.ticks(xCount))),
    );
  svg.append("g").attr("class", "axis").attr("transform", `translate(${MARGIN.left},0)`).call(axisLeft(y).ticks(5).tickFormat(distinctTicks(y.ticks(5))));
  svg.append("text").attr("class", "axis-label").attr("x", (MARGIN.left + width - MARGIN.right) / 2).attr("y", height - 6).attr("text-anchor", "middle").text(xLabel);
  svg.append("text").attr("class", "axis-label").attr("transform", `translate(14,${(MARGIN.top + height - MARGIN.bottom) / 2}) rotate(-90)`).attr("text-anchor", "middle").text(yLabel);
  const path = line<[number, number]>()
    .x((d) => x(d[0]))
    .y((d) => y(d[1]));
  series.forEach((s, i) => {
    const data = pts[i];
    if (!data.length) return;
    svg.append("path").datum(data).attr("class", `series ${s.cls}`).attr("d", path);
    svg
      .append("g")
      .selectAll("circle")
      .data(data)
      .join("circle")
      .attr("class", `dot ${s.cls}`)
      .attr("cx", (d) => x(d[0]))
      .attr("cy", (d) => y(d[1]))
      .attr("r", 3);
  });
  const legend = h("div", { class: "legend" });
  series.forEach((s, i) => {
    if (pts[i].length) legend.append(h("span", { class: `legend-item ${s.cls}` }, h("i", { class: "swatch" }), s.name));
  });
  if (series.length > 1) host.append(legend);
}

function barChart(host: HTMLElement, rows: Row[]): void {
  clear(host);
  const data = rows
    .filter((r) => typeof r.round === "number")
    .map((r, i, arr) => {
      const total = r.n_labels ?? 0;
      const prev = i > 0 ? (arr[i - 1].n_labels ?? 0) : 0;
      return { round: r.round as number, added: Math.max(0, total - prev), total };
    });
  if (!data.length) {
    host.append(h("p", { class: "chart-empty", text: "No rounds yet." }));
    return;
  }
  const width = Math.max(280, host.clientWidth || 420);
  const height = 220;
  const x = scaleBand<number>()
    .domain(data.map((d) => d.round))
    .range([MARGIN.left, width - MARGIN.right])
    .padding(0.25);
  const y = scaleLinear()
    .domain([0, Math.max(1, ...data.map((d) => d.added))])
    .nice()
    .range([height - MARGIN.bottom, MARGIN.top]);
  const svg = select(host).append("svg").attr("viewBox", `0 0 ${width} ${height}`).attr("width", width).attr("height", height).attr("class", "chart");
  svg
    .append("g")
    .attr("class", "grid")
    .attr("transform", `translate(${MARGIN.left},0)`)
    .call(axisLeft(y).tickValues(y.ticks(5).filter((v) => Number.isInteger(v))).tickSize(-(width - MARGIN.left - MARGIN.right)).tickFormat(() => ""));
  const every = Math.max(1, Math.ceil(data.length / 12));
  svg
    .append("g")
    .attr("class", "axis")
    .attr("transform", `translate(0,${height - MARGIN.bottom})`)
    .call(axisBottom(x).tickValues(data.map((d) => d.round).filter((_, i) => i % every === 0)));
  const yTicks = y.ticks(5).filter((v) => Number.isInteger(v));
  svg.append("g").attr("class", "axis").attr("transform", `translate(${MARGIN.left},0)`).call(axisLeft(y).tickValues(yTicks).tickFormat(distinctTicks(yTicks)));
  svg.append("text").attr("class", "axis-label").attr("x", (MARGIN.left + width - MARGIN.right) / 2).attr("y", height - 6).attr("text-anchor", "middle").text("round");
  svg.append("text").attr("class", "axis-label").attr("transform", `translate(14,${(MARGIN.top + height - MARGIN.bottom) / 2}) rotate(-90)`).attr("text-anchor", "middle").text("new labels");
  svg
    .append("g")
    .selectAll("rect")
    .data(data)
    .join("rect")
    .attr("class", "bar")
    .attr("x", (d) => x(d.round) ?? 0)
    .attr("width", x.bandwidth())
    .attr("y", (d) => y(d.added))
    .attr("height", (d) => y(0) - y(d.added))
    .append("title")
    .text((d) => `round ${d.round}: ${d.added} new, ${d.total} in total`);
}

/** ``n`` short (k, M), with ``extra`` more decimals than the usual ones. */
function compact(n: number, extra = 0): string {
  const a = Math.abs(n);
  if (a >= 1e6) return `${(n / 1e6).toFixed((a >= 1e7 ? 0 : 1) + extra)}M`;
  if (a >= 1e3) return `${(n / 1e3).toFixed((a >= 1e4 ? 0 : 1) + extra)}k`;
  return Number.isInteger(n) ? String(n) : n.toFixed(2 + extra);
}

/** A tick format for ``ticks``: compact, with as many decimals as it takes for every tick to read
 * differently (returns from −1,420 to −1,380 read −1.42k … −1.38k, not −1.4k five times). */
function distinctTicks(ticks: number[]): (d: unknown) => string {
  for (let extra = 0; extra <= 6; extra++) {
    const labels = ticks.map((t) => compact(t, extra));
    if (new Set(labels).size === labels.length) return (d) => compact(Number(d), extra);
  }
  return (d) => String(Number(d));
}

export class OwnerView implements KeyTarget {
  readonly el: HTMLElement;
  private charts: { ret: HTMLElement; acc: HTMLElement; labels: HTMLElement };
  private summary: HTMLElement;
  private table: HTMLTableSectionElement;
  private inviteOut: HTMLElement;
  private data: Overview | null = null;
  private timer: number | undefined;
  private active = false;
  // issue #25: task instructions, per-annotator activity, revoke, finish now
  private taskIn: HTMLTextAreaElement;
  private taskCount: HTMLElement;
  private taskSaved = "";
  private finishBtn: HTMLButtonElement;
  private finishState: HTMLElement;
  private finishArmed = false;
  private activityBody: HTMLTableSectionElement;
  private accuracy: HTMLElement;
  private armedRevoke: string | null = null;
  private activity: OwnerActivity | null = null;
  private consistency: Consistency | null = null;
  private consistencyNote: HTMLElement;
  private study = new StudyPanel(); // issue #61: its own section
  private routing = new RoutingPanel(); // issue 58: shown only when the run routes

  constructor(private readonly onTask: (t: Task) => void = () => undefined) {
    const card = (title: string, body: HTMLElement, extra?: HTMLElement) => h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", { text: title }), extra ?? null), body);
    this.charts = {
      ret: h("div", { class: "chart-host", "data-testid": "chart-return" }),
      acc: h("div", { class: "chart-host", "data-testid": "chart-accuracy" }),
      labels: h("div", { class: "chart-host", "data-testid": "chart-labels" }),
    };
    this.summary = h("div", { class: "summary" });
    this.table = h("tbody", {});
    const nameIn = h("input", { type: "text", name: "name", placeholder: "e.g. alice", required: true, maxlength: 64, autocomplete: "off", "data-testid": "invite-name" });
    const roleIn = h("select", { name: "role", "data-testid": "invite-role" }, h("option", { value: "annotator", text: "annotator" }), h("option", { value: "owner", text: "owner" }));
    const submit = h("button", { class: "btn btn-primary", type: "submit", "data-testid": "invite-submit" }, "Create link");
    this.inviteOut = h("div", { class: "invite-out", "data-testid": "invite-out" });
    const form = h("form", { class: "invite-form" }, h("label", {}, h("span", { text: "Name" }), nameIn), h("label", {}, h("span", { text: "Role" }), roleIn), submit);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      void this.invite(nameIn.value.trim(), roleIn.value === "owner" ? "owner" : "annotator", nameIn);
    });
    this.taskIn = h("textarea", { class: "task-input", rows: 3, maxlength: TASK_MAX_CHARS, placeholder: "e.g. Make the hopper hop forward without falling; prefer smooth, upright hops.", "data-testid": "task-input" });
    this.taskCount = h("span", { class: "hint task-count", "data-testid": "task-count" });
    this.taskIn.addEventListener("input", () => this.countTask());
    const saveTask = h("button", { class: "btn btn-primary", type: "submit", "data-testid": "task-save" }, "Save task");
    const taskForm = h(
      "form",
      { class: "task-form" },
      h("label", { class: "task-field" }, h("span", { text: "What should the agent do? Every annotator sees this above the clips." }), this.taskIn),
      h("div", { class: "task-row" }, saveTask, this.taskCount),
    );
    taskForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      saveTask.blur();
      void this.saveTask();
    });
    this.finishBtn = h("button", { class: "btn btn-danger", type: "button", "data-testid": "finish-now" }, "Finish now");
    this.finishState = h("p", { class: "hint", "data-testid": "finish-state", text: "The run ends when its label budget is met. Finish it earlier here: the trainer completes its round, saves the reward model and policy, and stops." });
    this.finishBtn.addEventListener("click", () => {
      this.finishBtn.blur();
      void this.finish();
    });
    this.accuracy = h("div", { class: "owner-accuracy", "data-testid": "owner-accuracy" });
    this.activityBody = h("tbody", {});
    this.consistencyNote = h("p", { class: "hint", "data-testid": "consistency-note" });
    const exportLink = h("a", { class: "btn btn-ghost", href: rooted("/api/owner/export"), download: "preflab-export.zip", "data-testid": "export" }, "Download export (.zip)");

    this.el = h(
      "section",
      { class: "view view-owner", "data-testid": "view-owner" },
      h("div", { class: "question" }, h("h1", { text: "Run overview" }), this.summary),
      h(
        "div",
        { class: "owner-grid owner-grid-2 owner-control" },
        card("Task for annotators", taskForm),
        card("Finish the run", h("div", { class: "finish-box" }, this.finishBtn, this.finishState)),
      ),
      card(
        "Annotators right now",
        h(
          "div",
          {},
          this.accuracy,
          h(
            "table",
            { class: "table table-activity", "data-testid": "activity" },
            h("thead", {}, h("tr", {}, ...["Name", "Answers", "Answers / min", "Median response", "Repeats agreed", "Last active", ""].map((t, k) => h("th", { class: k >= 1 && k <= 4 ? "num" : "", text: t })))),
            this.activityBody,
          ),
          this.consistencyNote,
        ),
      ),
      this.routing.el,
      this.study.el,
      h(
        "div",
        { class: "owner-grid" },
        card("True return", this.charts.ret),
        card("Reward accuracy", this.charts.acc),
        card("Labels per round", this.charts.labels),
      ),
      h(
        "div",
        { class: "owner-grid owner-grid-2" },
        card(
          "Annotators",
          h(
            "table",
            { class: "table", "data-testid": "annotators" },
            h(
              "thead",
              {},
              h("tr", {}, ...["Name", "Role", "Judgements", "Ratings", "Agreement", "SML weight"].map((t) => h("th", { text: t }))),
            ),
            this.table,
          ),
        ),
        card("Invite an annotator", h("div", {}, form, this.inviteOut, h("p", { class: "hint", text: "Each person gets a personal link; send it privately. Anyone with the link can answer as that person." })), exportLink),
      ),
    );
    window.addEventListener("resize", () => {
      if (this.active && this.data) this.renderCharts(this.data);
    });
  }

  show(): void {
    this.active = true;
    void this.refresh();
    window.clearInterval(this.timer);
    this.timer = window.setInterval(() => void this.refresh(), 5000);
  }

  hide(): void {
    this.active = false;
    window.clearInterval(this.timer);
  }

  onKey(_action: KeyAction): boolean {
    return false;
  }

  async refresh(): Promise<void> {
    void this.refreshActivity();
    void this.study.refresh();
    void this.routing.refresh();
    try {
      this.data = await api.overview();
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) {
        clear(this.summary);
        this.summary.append(h("p", { text: "Only the run's owner can see this page." }));
      }
      return;
    }
    this.renderCharts(this.data);
    this.renderTable(this.data.annotators);
  }

  private renderCharts(o: Overview): void {
    const rows = flattenRounds(o.rounds);
    const last = rows[rows.length - 1];
    clear(this.summary);
    const pill = (label: string, value: string) => h("span", { class: "pill" }, h("span", { class: "pill-label", text: label }), h("strong", { text: value }));
    if (last) {
      this.summary.append(
        pill("rounds", fmtInt(rows.length)),
        pill("env steps", fmtInt(last.env_steps)),
        pill("labels", fmtInt(last.n_labels)),
        pill("annotators", fmtInt(o.annotators.length)),
      );
      // only when the env has a true reward (the trainer publishes the accuracy then)
      if (typeof last.reward_accuracy === "number") this.summary.append(pill("reward accuracy", fmtNum(last.reward_accuracy, 3)));
    } else {
      this.summary.append(h("p", { class: "hint", text: "The trainer has not finished a round yet." }));
    }
    const hasReturn = rows.some((r) => typeof r.eval_true_return === "number" || typeof r.train_true_return === "number");
    if (hasReturn) {
      lineChart(
        this.charts.ret,
        rows,
        "env_steps",
        "env steps",
        [
          { name: "evaluation", key: "eval_true_return", cls: "s1" },
          { name: "training episodes", key: "train_true_return", cls: "s2" },
        ],
        "return",
        undefined,
        false,
        true,
      );
    } else {
      clear(this.charts.ret);
      this.charts.ret.append(h("p", { class: "chart-empty", text: rows.length ? "This environment has no true return." : "No rounds yet." }));
    }
    lineChart(this.charts.acc, rows, "round", "round", [{ name: "accuracy", key: "reward_accuracy", cls: "s1" }], "accuracy", [0, 1], true);
    barChart(this.charts.labels, rows);
  }

  private renderTable(rows: AnnotatorRow[]): void {
    clear(this.table);
    if (!rows.length) {
      this.table.append(h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No annotators yet." })));
      return;
    }
    for (const a of rows) {
      this.table.append(
        h(
          "tr",
          { "data-testid": "annotator-row" },
          h("td", { text: a.name }),
          h("td", {}, h("span", { class: `role role-${a.role === "owner" ? "owner" : "annotator"}`, text: a.role })),
          h("td", { class: "num", text: fmtInt(a.n_judgements) }),
          h("td", { class: "num", text: fmtInt(a.n_ratings) }),
          h("td", { class: "num", text: a.agreement === null ? "–" : `${Math.round(a.agreement * 100)} %` }),
          h("td", { class: "num", title: a.sml_weight === null ? "Needs at least three people answering the same queries" : "", text: fmtNum(a.sml_weight, 2) }),
        ),
      );
    }
  }

  private async invite(name: string, role: Invite["role"], input: HTMLInputElement): Promise<void> {
    clear(this.inviteOut);
    if (!name) return;
    try {
      const inv = await api.invite(name, role);
      const link = h("input", { type: "text", readonly: true, value: inv.link, class: "invite-link", "data-testid": "invite-link" });
      const copy = h("button", { class: "btn btn-small", type: "button" }, "Copy");
      copy.addEventListener("click", () => {
        link.select();
        void navigator.clipboard?.writeText(inv.link).then(
          () => toast("Link copied", { tone: "info", ms: 2500 }),
          () => toast("Select the link and copy it with Ctrl+C", { tone: "info" }),
        );
      });
      this.inviteOut.append(h("p", { text: `Personal link for ${inv.name}:` }), h("div", { class: "invite-row" }, link, copy));
      input.value = "";
      void this.refresh();
    } catch (err) {
      this.inviteOut.append(h("p", { class: "error", text: err instanceof ApiError ? err.detail : "Network error; try again." }));
    }
  }

  // ------------------------------------------------------------------ issue #25
  private countTask(): void {
    const n = this.taskIn.value.length;
    const changed = this.taskIn.value.trim() !== this.taskSaved;
    this.taskCount.textContent = `${n} / ${TASK_MAX_CHARS} characters${changed ? " · not saved" : ""}`;
  }

  private async saveTask(): Promise<void> {
    try {
      const t = await api25.setTask(this.taskIn.value);
      this.taskSaved = t.text;
      this.taskIn.value = t.text;
      this.countTask();
      this.onTask(t);
      toast(t.text ? "Task saved: every annotator sees it now" : "Task cleared", { tone: "ok" });
    } catch (err) {
      toast(`Task not saved: ${err instanceof ApiError ? err.detail : "the studio cannot be reached; try again"}`, { tone: "error", ms: 8000 });
    }
  }

  private async finish(): Promise<void> {
    if (!this.finishArmed) {
      this.finishArmed = true;
      this.finishBtn.textContent = "Press again to finish the run";
      window.setTimeout(() => {
        if (this.finishArmed && !this.activity?.finish) {
          this.finishArmed = false;
          this.finishBtn.textContent = "Finish now";
        }
      }, 5000);
      return;
    }
    try {
      const f = await api25.finish();
      if (this.activity) this.activity.finish = f;
      this.showFinish(f);
    } catch (err) {
      toast(`Could not finish: ${err instanceof ApiError ? err.detail : "the studio cannot be reached; try again"}`, { tone: "error" });
    }
  }

  private showFinish(f: OwnerActivity["finish"]): void {
    if (!f) return;
    this.finishBtn.disabled = true;
    this.finishBtn.textContent = "Finishing…";
    this.finishBtn.dataset.state = "finishing";
    this.finishState.textContent = `Finishing… requested ${new Date(f.at * 1000).toLocaleTimeString()}: the trainer ends the run after its current step and writes the results. Answers already given still count, those still inside their undo window too (undo closes when the run ends).`;
  }

  private async refreshActivity(): Promise<void> {
    let a: OwnerActivity;
    try {
      [a, this.consistency] = await Promise.all([api25.activity(), api25.consistency()]);
    } catch {
      return; // the overview's refresh reports trouble
    }
    this.consistencyNote.textContent =
      this.consistency.repeat_share > 0
        ? `Consistency check: ${Math.round(this.consistency.repeat_share * 100)} % of the pairs a person answered are asked again later; "Repeats agreed" counts how often both answers agreed.`
        : "Consistency check off: nobody is asked a pair twice (start the studio with --repeat-share 0.1 to re-ask 10 % of answered pairs).";
    const first = this.activity === null;
    this.activity = a;
    if (first || (document.activeElement !== this.taskIn && this.taskIn.value.trim() === this.taskSaved)) {
      this.taskSaved = a.task.text;
      this.taskIn.value = a.task.text;
      this.countTask();
    }
    this.onTask(a.task);
    this.showFinish(a.finish);
    clear(this.accuracy);
    if (a.reward_accuracy !== null)
      this.accuracy.append(
        h("span", { class: "pill" }, h("span", { class: "pill-label", text: `reward accuracy · round ${a.reward_accuracy_round}` }), h("strong", { text: `${Math.round(a.reward_accuracy * 100)} %` })),
        h("span", { class: "hint", text: " how often the learned reward orders two behaviours as the true reward does" }),
      );
    this.renderActivity(a.annotators);
  }

  private renderActivity(rows: AnnotatorActivity[]): void {
    clear(this.activityBody);
    const now = Date.now() / 1000;
    for (const a of rows) {
      const revoke = h("button", { class: "btn btn-small btn-ghost", type: "button", "data-testid": "revoke" }, this.armedRevoke === a.id ? "Confirm revoke" : "Revoke");
      revoke.addEventListener("click", () => {
        revoke.blur();
        void this.revoke(a);
      });
      const action = a.role === "owner" ? h("span", { class: "muted", text: "owner" }) : a.revoked ? h("span", { class: "revoked", "data-testid": "revoked", text: "revoked" }) : revoke;
      this.activityBody.append(
        h(
          "tr",
          { "data-testid": "activity-row", "data-annotator": a.id, class: a.revoked ? "row-revoked" : "" },
          h("td", { text: a.name }),
          h("td", { class: "num", text: fmtInt(a.n_answers) }),
          h("td", { class: "num", "data-testid": "rate", text: a.answers_per_min === null ? "–" : a.answers_per_min.toFixed(1) }),
          h("td", { class: "num", text: a.median_response_s === null ? "–" : `${a.median_response_s.toFixed(1)} s` }),
          h("td", { class: "num", "data-testid": "repeats-agreed", text: repeatsAgreed(this.consistency, a.id) }),
          h("td", { text: a.last_active === null ? "never" : ago(now - a.last_active) }),
          h("td", {}, action),
        ),
      );
    }
  }

  private async revoke(a: AnnotatorActivity): Promise<void> {
    if (this.armedRevoke !== a.id) {
      this.armedRevoke = a.id;
      if (this.activity) this.renderActivity(this.activity.annotators);
      return;
    }
    this.armedRevoke = null;
    try {
      await api25.revoke(a.id);
      toast(`${a.name}'s link no longer works; their answers so far still count.`, { tone: "ok" });
    } catch (err) {
      toast(`Not revoked: ${err instanceof ApiError ? err.detail : "the studio cannot be reached"}`, { tone: "error" });
    }
    await this.refreshActivity();
  }
}

function ago(s: number): string {
  if (s < 5) return "just now";
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

/** "3 of 4 (75 %)" for an annotator's repeated pairs, "–" when none were repeated. */
function repeatsAgreed(c: Consistency | null, id: string): string {
  const row = c?.annotators.find((r) => r.id === id);
  if (!row || row.repeats === 0) return "–";
  return `${row.agreed} of ${row.repeats} (${Math.round(((row.agreement ?? 0) * 100))} %)`;
}
