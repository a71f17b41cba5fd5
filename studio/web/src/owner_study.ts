// The Owner page's study section (issue #61): who joined by the study link, their answers,
// attention-check accuracy, agreement with the crowd's label, SML weight, speed, side bias,
// time on task and flags; Krippendorff's α for the study; exclude a person; close enrolment.
// Its own component, so that other sections of the Owner page change independently.
import "./owner_study.css";
import { ApiError, type OwnerStudy, type StudyPerson, apiStudy } from "./api";
import { clear, fmtInt, fmtNum, h } from "./dom";
import { toast } from "./toast";

const FLAG_TEXT: Record<string, string> = {
  gold: "fails checks",
  fast: "faster than the clips",
  side: "one side",
  crowd: "disagrees with others",
};

function pct(x: number | null | undefined): string {
  return x === null || x === undefined ? "–" : `${Math.round(100 * x)}%`;
}

export class StudyPanel {
  readonly el: HTMLElement;
  private pills: HTMLElement;
  private body: HTMLTableSectionElement;
  private enrolBtn: HTMLButtonElement;
  private data: OwnerStudy | null = null;

  constructor() {
    this.pills = h("div", { class: "study-pills", "data-testid": "study-pills" });
    this.body = h("tbody", {});
    this.enrolBtn = h("button", { class: "btn btn-small", type: "button", "data-testid": "study-enrolment" }, "Close enrolment");
    this.enrolBtn.addEventListener("click", () => {
      this.enrolBtn.blur();
      void this.toggleEnrolment();
    });
    const cols = ["Participant", "Step", "Answers", "Checks right", "Agrees with others", "SML weight", "Median response", "Left share", "Minutes", "Flags", ""];
    this.el = h(
      "section",
      { class: "card study-panel", hidden: true, "data-testid": "study-panel" },
      h("div", { class: "card-head" }, h("h2", { text: "Study participants" }), this.enrolBtn),
      this.pills,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table study-table", "data-testid": "study-table" },
          h("thead", {}, h("tr", {}, ...cols.map((t, k) => h("th", { class: k >= 2 && k <= 8 ? "num" : "", text: t })))),
          this.body,
        ),
      ),
      h("p", {
        class: "hint study-note",
        text: "Flags: more attention checks failed than the study allows, a median answer faster than the clips play, one side picked far more than chance, or agreeing with the others on the same pairs less than chance. Excluding someone stops their answers counting in the crowd's labels and from the trainer's next fit.",
      }),
    );
  }

  async refresh(): Promise<void> {
    try {
      this.data = await apiStudy.owner();
    } catch (err) {
      if (err instanceof ApiError) this.el.hidden = true;
      return;
    }
    this.render(this.data);
  }

  private render(s: OwnerStudy): void {
    this.el.hidden = !s.exists;
    if (!s.exists) return;
    clear(this.pills);
    const pill = (label: string, value: string, id?: string) =>
      h("span", { class: "pill", "data-testid": id }, h("span", { class: "pill-label", text: label }), h("strong", { text: value }));
    const alpha = s.alpha === null || s.alpha === undefined ? "–" : `${fmtNum(s.alpha)} [${fmtNum(s.alpha_low)}, ${fmtNum(s.alpha_high)}]`;
    this.pills.append(
      pill("joined", `${fmtInt(s.joined)} / ${fmtInt(s.cap)}`),
      pill("consented", fmtInt(s.consented)),
      pill("completed", fmtInt(s.completed)),
      pill("people per pair", fmtInt(s.overlap)),
      pill("attention checks", `${pct(s.gold_rate)} of questions · ${fmtInt(s.gold_pairs)} known`),
      pill("Krippendorff's α", alpha, "study-alpha"),
      pill("crowd label", s.aggregator === "sml" ? "SML" : "majority"),
      pill("crowd accuracy (SML)", pct(s.crowd_accuracy)),
      pill("labels / h", s.labels_per_hour === null || s.labels_per_hour === undefined ? "–" : fmtInt(s.labels_per_hour)),
      pill("enrolment", s.closed ? "closed" : "open", "study-state"),
    );
    this.enrolBtn.textContent = s.closed ? "Open enrolment" : "Close enrolment";
    clear(this.body);
    const people = s.people ?? [];
    if (people.length === 0) {
      this.body.append(h("tr", {}, h("td", { colspan: 11, class: "muted", text: "Nobody has joined yet. Share the study link (preflab studio study RUN_DIR prints it)." })));
      return;
    }
    for (const p of people) this.body.append(this.row(p));
  }

  private row(p: StudyPerson): HTMLTableRowElement {
    const platform = p.platform.PROLIFIC_PID ?? p.platform.pid ?? "";
    const flags = h("td", { class: "flags" }, ...p.flags.map((f) => h("span", { class: "flag", title: FLAG_TEXT[f] ?? f, text: FLAG_TEXT[f] ?? f })));
    const act = h("button", { class: p.excluded ? "btn btn-small" : "btn btn-small btn-danger", type: "button", "data-testid": `exclude-${p.id}` }, p.excluded ? "Include" : "Exclude");
    act.addEventListener("click", () => {
      act.blur();
      void this.exclude(p);
    });
    const checks = p.gold_answered ? `${pct(p.gold_accuracy)} (${p.gold_answered})` : "–";
    return h(
      "tr",
      { class: p.excluded ? "excluded" : "", "data-testid": `study-row-${p.id}` },
      h("td", {}, h("div", { text: p.id }), platform ? h("div", { class: "platform-id", text: platform }) : null),
      h("td", { text: p.excluded ? "excluded" : p.step }),
      h("td", { class: "num", text: fmtInt(p.answers) }),
      h("td", { class: "num", text: checks }),
      h("td", { class: "num", text: pct(p.agreement) }),
      h("td", { class: "num", text: fmtNum(p.sml_weight) }),
      h("td", { class: "num", text: p.median_response_s === null || p.median_response_s === undefined ? "–" : `${fmtNum(p.median_response_s, 1)} s` }),
      h("td", { class: "num", text: pct(p.left_share) }),
      h("td", { class: "num", text: fmtNum(p.minutes, 1) }),
      flags,
      h("td", { class: "actions" }, act),
    );
  }

  private async exclude(p: StudyPerson): Promise<void> {
    try {
      await apiStudy.exclude(p.id, !p.excluded, p.flags.join(" "));
      toast(p.excluded ? `${p.id} counts again` : `${p.id} excluded: their answers stop counting`);
    } catch (err) {
      toast(err instanceof ApiError ? err.detail : "Could not reach the studio");
    }
    await this.refresh();
  }

  private async toggleEnrolment(): Promise<void> {
    if (!this.data) return;
    try {
      await apiStudy.enrolment(this.data.closed === true);
    } catch (err) {
      toast(err instanceof ApiError ? err.detail : "Could not reach the studio");
    }
    await this.refresh();
  }
}
