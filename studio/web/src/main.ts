// Studio entry: log in with the personal link's token, then the Compare / Rank / Groups / Rate /
// Owner views. Until the person picks a view, the page shows the one their queue needs: a run
// that asks rankings opens the Rank view.
import "./styles.css";
import { ApiError, type JudgementItem, type Me, NetworkError, Outbox, api, onUnauthorized } from "./api";
import { clear, h, kbd } from "./dom";
import { installKeys, setKeyTarget, type KeyTarget } from "./keys";
import { ExploreView } from "./explore";
import { OwnerView } from "./owner";
import { PairwiseView } from "./pairwise";
import { LivenessBanner, Progress } from "./progress";
import { RankView } from "./rank";
import { RatingView } from "./rating";
import { StudyBanner } from "./study";
import { TaskBanner } from "./task";

interface View extends KeyTarget {
  el: HTMLElement;
  show(): void;
  hide(): void;
}

const root = document.getElementById("app") as HTMLElement;

function brand(): HTMLElement {
  return h("div", { class: "brand" }, h("span", { class: "brand-mark", "aria-hidden": "true" }), h("span", { class: "brand-name", text: "PrefLab" }), h("span", { class: "brand-sub", text: "studio" }));
}

function screen(title: string, lines: (string | HTMLElement)[], testid: string, action?: HTMLElement): void {
  clear(root);
  root.append(
    h(
      "div",
      { class: "screen", "data-testid": testid },
      h("div", { class: "screen-card" }, brand(), h("h1", { text: title }), ...lines.map((t) => (typeof t === "string" ? h("p", { text: t }) : t)), action ?? null),
    ),
  );
}

let unauthorizedShown = false;
function showUnauthorized(): void {
  if (unauthorizedShown) return;
  unauthorizedShown = true;
  setKeyTarget(null);
  screen(
    "Your link is invalid or expired",
    [
      "The studio did not accept your personal link. It may have been mistyped, revoked, or belong to another run.",
      "Ask the run's owner for a new link, then open it in this browser. The owner creates one on the Owner page or with",
      h("pre", { class: "cmd", text: "preflab studio add-annotator NAME RUN_DIR" }),
    ],
    "unauthorized",
  );
}

async function login(): Promise<Me | null> {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const token = params.get("token");
  for (let attempt = 0; ; attempt++) {
    try {
      if (token) {
        const me = await api.login(token);
        history.replaceState(null, "", location.pathname + location.search); // drop the token from the address bar
        return me;
      }
      return await api.me();
    } catch (err) {
      if (err instanceof ApiError) {
        if (err.status === 401 || err.status === 403 || err.status === 404) {
          if (token) history.replaceState(null, "", location.pathname + location.search);
          showUnauthorized();
          return null;
        }
        screen("The studio could not start", [err.detail], "error");
        return null;
      }
      if (err instanceof NetworkError) {
        screen("Cannot reach the studio server", ["Is `preflab studio` still running? Retrying…"], "offline");
        await new Promise((r) => window.setTimeout(r, Math.min(8000, 1000 * 2 ** attempt)));
        continue;
      }
      throw err;
    }
  }
}

async function start(): Promise<void> {
  installKeys();
  onUnauthorized(showUnauthorized);
  const me = await login();
  if (!me) return;

  const progress = new Progress();
  const task = new TaskBanner(); // the owner's instructions, above the clips in every view
  const liveness = new LivenessBanner(progress);
  const study = new StudyBanner(); // a study participant's quota and completion page (issue #61)
  const bannerText = h("span", {});
  const retry = h("button", { class: "btn btn-small", type: "button", "data-testid": "retry" }, "Retry now");
  const banner = h("div", { class: "banner", role: "alert", hidden: true, "data-testid": "banner" }, bannerText, retry);
  let pairwise: PairwiseView;
  let rank: RankView;
  let rating: RatingView;
  // a ranking's answer carries ranks (its view made it); every other judgement is Compare's
  const viewOf = (item: JudgementItem) => (item.body.ranks !== undefined ? rank : pairwise);
  const outbox = new Outbox(`preflab-outbox-${me.id}`, {
    saved: (item, id) => {
      viewOf(item).onSaved(item, id);
      progress.refreshSoon();
    },
    ratingsStored: (item, n) => rating.onStored(item, n),
    rejected: (item, err) => {
      if (item.kind === "judgement") viewOf(item).onRejected(item, err);
    },
    connection: (ok, pending) => {
      banner.hidden = ok;
      bannerText.textContent = `Connection lost. ${pending} ${pending === 1 ? "answer is" : "answers are"} kept in this browser and will be sent automatically.`;
      if (ok) void progress.refresh();
      else {
        pairwise.onOffline();
        rank.onOffline();
      }
    },
  });
  retry.addEventListener("click", () => {
    retry.blur();
    outbox.retryNow();
  });
  rank = new RankView(outbox, progress);
  pairwise = new PairwiseView(outbox, progress, (q, ranks) => {
    select("rank");
    rank.open(q, ranks);
  });
  rating = new RatingView(outbox);
  const views: Record<string, View> = { compare: pairwise, rank, explore: new ExploreView(progress), rate: rating };
  if (me.role === "owner") views.owner = new OwnerView((t) => task.set(t));
  progress.onUpdate((s) => pairwise.onStatus(s.waiting, s.views?.rank ?? 0));
  progress.onUpdate((s) => rank.onStatus(s.views?.rank ?? 0));
  let ended = false; // once: the run's end closes undo on every answer given
  progress.onUpdate((s) => {
    if (ended || s.status !== "finished") return;
    ended = true;
    pairwise.onRunEnded();
    rank.onRunEnded();
  });
  progress.onUpdate((s) => markToRate(s.to_rate ?? 0));
  progress.onUpdate((s) => markWaiting("rank", s.views?.rank ?? 0, "ranking"));
  progress.onUpdate((s) => follow(s.views ?? {}));

  const labels: Record<string, string> = { compare: "Compare", rank: "Rank", explore: "Groups", rate: "Rate", owner: "Owner" };
  // the footer lists the keys of the view on screen (each view reads the arrows differently)
  const hints: Record<string, [string[], string][]> = {
    compare: [[["←"], "left"], [["→"], "right"], [["↑"], "equal"], [["↓"], "can't tell"], [["Space"], "replay"], [["U"], "undo"], [["N"], "skip"]],
    rank: [[["1–9"], "place the clip under the pointer"], [["⌫"], "undo placement"], [["Enter"], "submit"], [["↓"], "can't tell"], [["Space"], "replay"], [["U"], "undo"], [["N"], "skip"]],
    explore: [[["←"], "left group"], [["→"], "right group"], [["↑"], "equal"], [["↓"], "can't tell"], [["Space"], "replay"], [["U"], "undo"], [["N"], "suggest next"]],
    rate: [[["Space"], "start"], [["↑", "↓"], "±0.1"], [["←", "→"], "±0.02"], [["N"], "next episode"], [["U"], "undo"]],
    owner: [[["U"], "undo"]],
  };
  const footerKeys = h("span", { "data-testid": "footer-keys" });
  const showHints = (name: string) => {
    clear(footerKeys);
    for (const [keys, what] of hints[name] ?? []) footerKeys.append(...keys.map((k) => kbd(k)), ` ${what} `);
  };
  const tabs = h("nav", { class: "tabs", role: "tablist" });
  const tabButtons: Record<string, HTMLButtonElement> = {};
  const main = h("main", { class: "main" });
  let current = "";
  /** Until the person picks a view (a tab, or a #view in the link), the page follows their queue. */
  let picked = false;
  const select = (name: string) => {
    if (!views[name]) name = "compare";
    if (name === current) return;
    if (current) views[current].hide();
    current = name;
    Object.entries(tabButtons).forEach(([k, b]) => b.setAttribute("aria-selected", String(k === name)));
    clear(main);
    main.append(views[name].el);
    tabButtons[name]?.querySelector(`[data-testid=${name}-badge]`)?.remove();
    setKeyTarget(views[name]);
    showHints(name);
    views[name].show();
    if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  };
  for (const name of Object.keys(views)) {
    const b = h("button", { class: "tab", role: "tab", type: "button", "data-testid": `tab-${name}`, text: labels[name] });
    b.addEventListener("click", () => {
      b.blur();
      picked = true;
      select(name);
    });
    tabButtons[name] = b;
    tabs.append(b);
  }
  /** A dot on the Rate tab while an episode waits for you there (with the count for screen readers). */
  const markToRate = (n: number) => {
    const b = tabButtons["rate"];
    if (!b) return;
    b.querySelector("[data-testid=rate-badge]")?.remove();
    if (n > 0) {
      b.append(h("span", { class: "tab-badge", "data-testid": "rate-badge", title: `${n} episode${n === 1 ? "" : "s"} to rate`, "aria-label": `${n} to rate`, text: String(n) }));
    }
  };
  /** The count of queries waiting in a view on its tab (while it is not on screen). */
  const markWaiting = (name: string, n: number, what: string) => {
    const b = tabButtons[name];
    if (!b) return;
    b.querySelector(`[data-testid=${name}-badge]`)?.remove();
    if (n > 0 && current !== name) {
      b.append(h("span", { class: "tab-badge", "data-testid": `${name}-badge`, title: `${n} ${what}${n === 1 ? "" : "s"} waiting`, "aria-label": `${n} waiting`, text: String(n) }));
    }
  };
  /** While the person has not picked a view: the view whose queries wait (Compare or Rank). */
  const follow = (waiting: Record<string, number>) => {
    if (picked || (current !== "compare" && current !== "rank")) return;
    const here = waiting[current] ?? 0;
    const other = current === "compare" ? "rank" : "compare";
    if (here === 0 && (waiting[other] ?? 0) > 0) select(other);
  };
  const logout = h("button", { class: "btn btn-small btn-ghost", type: "button", title: "Log out of this browser" }, "Log out");
  logout.addEventListener("click", async () => {
    try {
      await api.logout();
    } finally {
      screen("Logged out", ["Open your personal link again to continue."], "logged-out");
    }
  });
  clear(root);
  root.append(
    h(
      "div",
      { class: "shell" },
      h(
        "header",
        { class: "topbar" },
        brand(),
        tabs,
        h("div", { class: "who" }, h("span", { class: "who-name", "data-testid": "me", text: me.name }), h("span", { class: `role role-${me.role === "owner" ? "owner" : "annotator"}`, text: me.role }), logout),
      ),
      progress.el,
      liveness.el,
      banner,
      study.el,
      task.el,
      main,
      h(
        "footer",
        { class: "footer" },
        footerKeys,
        h("span", { class: "muted", text: "Your answers are yours: other annotators never see them." }),
      ),
    ),
  );
  // a study asks only the pairs it assigns (issue #61): its participants get no Groups or Rate tab
  study.onParticipant(() => {
    for (const name of ["explore", "rate"]) {
      if (!views[name]) continue;
      if (current === name) {
        views[name].hide();
        current = "";
      }
      tabButtons[name]?.remove();
      delete tabButtons[name];
      delete views[name];
    }
    if (!current) select("compare");
  });
  const asked = location.hash.replace(/^#/, "");
  picked = asked in views;
  select(asked || "compare");
  window.addEventListener("hashchange", () => select(location.hash.replace(/^#/, "")));
  progress.start();
  void task.start();
  liveness.start();
  void study.start();
  void outbox.flush(); // answers left from an earlier visit
}

void start();
