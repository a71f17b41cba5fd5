// A video tile: spinner while the clip renders (polls /api/media/{key}), then a muted inline video
// that plays at the env's real time (issue #25: the clip's `timing` says how long a step lasts).
//
// A tile with controls (the default, except for looping tiles and rating streams) is a player:
// pause/play, one env step back/forward, a scrub bar over the steps ("step k / n"), 0.25× / 0.5× /
// 1× speed, and a caption saying how the clip plays ("real time · 125 steps/s · 25 steps = 0.20 s").
// Keys (none of them is an answer key): K pause/play, , and . one step back/forward,
// < and > slower/faster. Controls and keys act on every player on screen at once, so the two
// clips of a pair stay in step. Clips of pairs hold their first and last frame still for a moment
// (timing.still_frames): the tile marks them "start" / "end", and "↻ again" after a restart.
// Each tile tells when it has played once to its end: `played` (a promise), `onPlayed(cb)` and a
// bubbling "clip-played" DOM event on `el`.
import { api, type Clip, rooted } from "./api";
import { h, kbd, sleep, spinner } from "./dom";
import "./player.css";

/** How a clip plays in real time (null for clips of routes that do not send it). */
export type ClipTiming = NonNullable<Clip["timing"]>;

/** What a tile needs of a clip or stream (the key and URL are null unless it can render);
 * the timing and step count, when given, make it a truthful player. */
export type ClipSource = Pick<Clip, "media_key" | "media_url" | "status"> & {
  timing?: ClipTiming | null;
  length?: number | null;
  n_steps?: number;
  fps?: number;
};

export interface ClipTileOptions {
  label?: string;
  side?: string;
  loop?: boolean;
  /** Player controls and keys; default: on, except for looping tiles and rating streams (side "stream"). */
  controls?: boolean;
  /** The key legend under the controls; default: on for every side but "right" (a pair shows it once). */
  keyHelp?: boolean;
}

/** Slow-motion choices, slowest first. */
export const SPEEDS = [0.25, 0.5, 1] as const;
const SPEED_KEY = "preflab.clipSpeed";
/** A clip's spinner appears only when its wait lasts this long (ms): no flash for cached clips. */
const SPINNER_DELAY_MS = 300;

function loadSpeed(): number {
  try {
    const v = Number(window.localStorage.getItem(SPEED_KEY));
    return (SPEEDS as readonly number[]).includes(v) ? v : 1;
  } catch {
    return 1;
  }
}

let speed = loadSpeed();
const players = new Set<ClipTile>();
let keysInstalled = false;

/** The speed every player on screen plays at (1 = real time). */
export function clipSpeed(): number {
  return speed;
}

/** Set the speed of every player (one of SPEEDS); remembered in this browser. */
export function setClipSpeed(s: number): void {
  if (!(SPEEDS as readonly number[]).includes(s)) return;
  speed = s;
  try {
    window.localStorage.setItem(SPEED_KEY, String(s));
  } catch {
    /* private mode: the speed lasts for this page */
  }
  for (const p of players) p.applySpeed();
}

/** The players on screen (their tile is in the page and its video loaded). */
function onScreen(): ClipTile[] {
  return [...players].filter((p) => p.el.isConnected && p.loaded);
}

function installKeys(): void {
  if (keysInstalled) return;
  keysInstalled = true;
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.repeat && ev.key !== "," && ev.key !== ".") return; // holding , or . steps on
    const el = ev.target as HTMLElement | null;
    const tag = el?.tagName;
    if ((tag === "INPUT" && (el as HTMLInputElement).type !== "range") || tag === "TEXTAREA" || tag === "SELECT" || el?.isContentEditable) return;
    const tiles = onScreen();
    if (!tiles.length) return;
    let done = true;
    switch (ev.key) {
      case "k":
      case "K":
        togglePlay(tiles);
        break;
      case ",":
        stepAll(tiles, -1);
        break;
      case ".":
        stepAll(tiles, 1);
        break;
      case "<":
        setClipSpeed(SPEEDS[Math.max(0, SPEEDS.indexOf(speed as (typeof SPEEDS)[number]) - 1)]);
        break;
      case ">":
        setClipSpeed(SPEEDS[Math.min(SPEEDS.length - 1, SPEEDS.indexOf(speed as (typeof SPEEDS)[number]) + 1)]);
        break;
      default:
        done = false;
    }
    if (done) ev.preventDefault();
  });
}

function togglePlay(tiles: ClipTile[]): void {
  const anyPlaying = tiles.some((t) => !t.video.paused && !t.video.ended);
  for (const t of tiles) {
    if (anyPlaying) t.video.pause();
    else void t.video.play().catch(() => undefined);
  }
}

function stepAll(tiles: ClipTile[], by: number): void {
  // every player moves to the same step (the first's step + by), so a pair stays in step
  const k = tiles[0].step() + by;
  for (const t of tiles) {
    t.video.pause();
    t.seekStep(k);
  }
}

function seekAll(tiles: ClipTile[], k: number): void {
  for (const t of tiles) {
    t.video.pause();
    t.seekStep(k);
  }
}

function fmtSeconds(s: number): string {
  return s < 10 ? s.toFixed(2) : s.toFixed(1);
}

function fmtRate(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(x < 10 ? 2 : 1);
}

type RVFC = (cb: (now: number, meta: { mediaTime: number }) => void) => number;

export class ClipTile {
  /** The tile: the video box, or (with controls) a wrapper of the box, the controls and the caption. */
  readonly el: HTMLElement;
  /** The video box (class "clip"). */
  readonly box: HTMLElement;
  readonly video: HTMLVideoElement;
  private overlay: HTMLElement | null = null;
  private cancelled = false;
  /** Resolves true when the video can play, false when no video will come. */
  readonly ready: Promise<boolean>;
  /** Resolves when the clip has played once to its end (never, when no video comes). */
  readonly played: Promise<void>;
  /** True once the video loaded. */
  loaded = false;
  private playedOnce = false;
  private resolvePlayed: () => void = () => undefined;
  private readonly timing: ClipTiming | null;
  private readonly nSteps: number | null;
  private readonly controls: boolean;
  private phase: HTMLElement;
  private bar: HTMLElement | null = null;
  private playBtn: HTMLButtonElement | null = null;
  private scrub: HTMLInputElement | null = null;
  private counter: HTMLElement | null = null;
  private caption: HTMLElement | null = null;
  private speedBtns = new Map<number, HTMLButtonElement>();
  private lastFrame = -1;
  private laps = 0;
  private gen = 0;

  constructor(src: ClipSource, opts: ClipTileOptions = {}) {
    this.video = h("video", { muted: true, playsinline: true, preload: "auto", "data-testid": `video-${opts.side ?? "main"}` });
    this.video.muted = true; // the attribute alone does not mute in every browser
    this.video.loop = opts.loop ?? false;
    this.video.disablePictureInPicture = true;
    this.timing = src.timing ?? null;
    const n = src.length ?? src.n_steps ?? null;
    this.nSteps = typeof n === "number" && n > 0 ? n : null;
    this.controls = opts.controls ?? (!opts.loop && opts.side !== "stream");
    this.box = h("div", { class: "clip", "data-side": opts.side ?? "" }, this.video);
    this.phase = h("div", { class: "clip-phase", hidden: true, "data-testid": "clip-phase" });
    this.box.append(this.phase);
    this.video.addEventListener("loadedmetadata", () => {
      const { videoWidth: w, videoHeight: hgt } = this.video;
      if (w > 0 && hgt > 0) {
        this.box.style.aspectRatio = `${w} / ${hgt}`; // the tile takes the clip's shape: no black bars
        this.box.classList.add("clip-sized");
      }
      this.applySpeed();
      this.refresh();
    });
    if (opts.label) this.box.append(h("div", { class: "clip-label", text: opts.label }));
    this.played = new Promise<void>((resolve) => {
      this.resolvePlayed = resolve;
    });
    this.video.addEventListener("ended", () => {
      this.markPlayed();
      this.refresh();
    });
    for (const ev of ["seeked", "pause", "play", "timeupdate"]) this.video.addEventListener(ev, () => this.refresh());
    if (this.controls) {
      this.el = h("div", { class: "clip-player", "data-side": opts.side ?? "", "data-testid": `player-${opts.side ?? "main"}` }, this.box, this.buildBar(opts.keyHelp ?? opts.side !== "right"));
      players.add(this);
      installKeys();
    } else {
      this.el = this.box;
    }
    this.ready = this.load(src);
    void this.ready.then((ok) => {
      this.loaded = ok;
      this.el.classList.toggle("clip-loaded", ok);
      if (ok) this.watch();
      this.refresh();
    });
  }

  /** The player's controls (bar, caption, key legend), null without controls: a view that
   * shows several clips may put one tile's controls elsewhere; they act on every player on
   * screen, as each tile's own do. */
  controlsEl(): HTMLElement | null {
    return this.bar;
  }

  /** Call ``cb`` once when the clip has played to its end (at once if it already has). */
  onPlayed(cb: () => void): void {
    void this.played.then(cb);
  }

  /** Whether the clip has played once to its end. */
  hasPlayed(): boolean {
    return this.playedOnce;
  }

  dispose(): void {
    this.cancelled = true;
    this.gen++;
    players.delete(this);
    this.video.pause();
    this.video.removeAttribute("src");
    this.video.load();
  }

  // ----- steps and frames --------------------------------------------------------------------
  /** Frames per second of the encoded clip (one frame per env step). */
  private fps(): number {
    return this.timing?.fps ?? 30;
  }

  private still(): number {
    return this.timing?.still_frames ?? 0;
  }

  /** Env steps in the clip (from the query, else from the video's length). */
  steps(): number {
    if (this.nSteps !== null) return this.nSteps;
    const d = this.video.duration;
    return Number.isFinite(d) && d > 0 ? Math.max(1, Math.round(d * this.fps()) - 2 * this.still()) : 1;
  }

  private frameAt(t: number): number {
    return Math.floor(t * this.fps() + 1e-3);
  }

  /** The env step on screen (0-based). */
  step(): number {
    return Math.max(0, Math.min(this.steps() - 1, this.frameAt(this.video.currentTime) - this.still()));
  }

  /** Show env step ``k`` (0-based, clamped): the middle of its frame. */
  seekStep(k: number): void {
    const n = this.steps();
    const kk = Math.max(0, Math.min(n - 1, Math.round(k)));
    this.video.currentTime = (this.still() + kk + 0.5) / this.fps();
    this.refresh(kk);
  }

  /** The base rate (real time) times the chosen slow motion. */
  applySpeed(): void {
    const base = this.timing?.playback_rate ?? 1;
    const rate = Math.max(0.0625, Math.min(16, base * (this.controls ? speed : 1)));
    this.video.defaultPlaybackRate = rate;
    this.video.playbackRate = rate;
    for (const [s, b] of this.speedBtns) b.setAttribute("aria-pressed", String(s === speed));
    this.el.dataset.speed = String(speed);
    this.renderCaption();
  }

  private markPlayed(): void {
    if (this.playedOnce) return;
    this.playedOnce = true;
    this.el.dataset.played = "true";
    this.resolvePlayed();
    this.el.dispatchEvent(new CustomEvent("clip-played", { bubbles: true }));
  }

  /** Follow the presented frames (requestVideoFrameCallback where there is one). */
  private watch(): void {
    const rvfc = (this.video as unknown as { requestVideoFrameCallback?: RVFC }).requestVideoFrameCallback;
    if (!rvfc) return;
    const gen = this.gen;
    const onFrame = (_now: number, meta: { mediaTime: number }) => {
      if (gen !== this.gen) return;
      this.refresh(undefined, meta.mediaTime);
      rvfc.call(this.video, onFrame);
    };
    rvfc.call(this.video, onFrame);
  }

  private refresh(forced?: number, mediaTime?: number): void {
    if (!this.loaded && forced === undefined) return;
    const v = this.video;
    const t = mediaTime ?? v.currentTime;
    const frame = this.frameAt(t);
    const n = this.steps();
    const still = this.still();
    // a jump from the end back to the start while playing (a loop, or the pair's restart)
    if (this.lastFrame >= still + n - 1 && frame < still + 1 && this.lastFrame >= 0) {
      if (this.video.loop) this.markPlayed();
      this.laps++;
    }
    this.lastFrame = frame;
    const k = forced ?? Math.max(0, Math.min(n - 1, frame - still));
    let phase = "";
    if (v.ended || (still > 0 && frame >= still + n)) phase = "end";
    else if (still > 0 && frame < still && forced === undefined) phase = this.laps > 0 ? "↻ again" : "start";
    else if (still === 0 && this.laps > 0 && frame < Math.max(2, Math.round(0.25 * this.fps())) && !v.paused) phase = "↻ again";
    this.phase.hidden = phase === "";
    this.phase.textContent = phase;
    this.el.dataset.step = String(k);
    if (!this.controls) return;
    if (this.counter) this.counter.textContent = `step ${k + 1} / ${n}`;
    if (this.scrub) {
      this.scrub.max = String(n);
      if (document.activeElement !== this.scrub) this.scrub.value = String(k + 1);
    }
    const paused = v.paused || v.ended;
    if (this.playBtn) {
      this.playBtn.textContent = paused ? "▶" : "❚❚";
      this.playBtn.title = paused ? "Play (K)" : "Pause (K)";
      this.playBtn.setAttribute("aria-label", paused ? "Play" : "Pause");
    }
    this.el.classList.toggle("clip-paused", paused);
  }

  // ----- controls ------------------------------------------------------------------------------
  private button(text: string, title: string, testid: string, run: () => void): HTMLButtonElement {
    const b = h("button", { class: "player-btn", type: "button", title, "aria-label": title, "data-testid": testid, text });
    b.addEventListener("click", () => {
      b.blur(); // the arrow keys answer: never leave focus on a control
      run();
    });
    return b;
  }

  private buildBar(keyHelp: boolean): HTMLElement {
    const group = () => {
      const on = onScreen();
      return on.includes(this) ? on : [this];
    };
    this.playBtn = this.button("▶", "Play (K)", "player-play", () => togglePlay(group()));
    const back = this.button("⟨", "One step back (,)", "player-back", () => stepAll(group(), -1));
    const fwd = this.button("⟩", "One step forward (.)", "player-forward", () => stepAll(group(), 1));
    const scrub = h("input", { class: "player-scrub", type: "range", min: 1, max: this.nSteps ?? 1, step: 1, value: 1, tabindex: -1, "aria-label": "Step", "data-testid": "player-scrub" });
    scrub.addEventListener("input", () => seekAll(group(), Number(scrub.value) - 1));
    const release = () => scrub.blur();
    scrub.addEventListener("change", release);
    scrub.addEventListener("pointerup", release);
    this.scrub = scrub;
    this.counter = h("span", { class: "player-step", "data-testid": "player-step", text: `step 1 / ${this.nSteps ?? "–"}` });
    const speeds = h("span", { class: "player-speeds", role: "group", "aria-label": "Speed" });
    for (const s of SPEEDS) {
      const b = this.button(`${s}×`, s === 1 ? "Real time (>)" : `${s}× slow motion (<)`, `player-speed-${s}`, () => setClipSpeed(s));
      b.classList.add("player-speed");
      this.speedBtns.set(s, b);
      speeds.append(b);
    }
    this.caption = h("div", { class: "player-caption", "data-testid": "player-caption" });
    const row = h("div", { class: "player-bar" }, this.playBtn, back, fwd, scrub, this.counter, speeds);
    const parts: HTMLElement[] = [row, this.caption];
    // the legend once per pair; the other tile keeps its room so both captions line up
    parts.push(
      h(
        "div",
        keyHelp ? { class: "player-keys", "data-testid": "player-keys" } : { class: "player-keys player-keys-spacer", "aria-hidden": "true" },
        kbd("K"),
        " pause ",
        kbd(","),
        kbd("."),
        " step ",
        kbd("<"),
        kbd(">"),
        " speed",
      ),
    );
    this.bar = h("div", { class: "player-controls" }, ...parts);
    this.renderCaption();
    return this.bar;
  }

  private renderCaption(): void {
    if (!this.caption) return;
    const t = this.timing;
    if (!t) {
      this.caption.textContent = this.nSteps ? `${this.nSteps} steps` : "";
      return;
    }
    const n = this.steps();
    const real = n * t.step_seconds;
    const how = speed === 1 ? (t.source === "default" ? "real time (assumed)" : "real time") : `${speed}× slow motion`;
    let text = `${how} · ${fmtRate(t.steps_per_s)} steps/s · ${n} steps = ${fmtSeconds(real)} s`;
    if (speed !== 1) text += ` (plays in ${fmtSeconds(real / speed)} s)`;
    this.caption.textContent = text;
    const still = t.still_frames > 0 ? ` The first and last step are held still for ${fmtSeconds(t.still_frames / t.fps)} s.` : "";
    this.caption.title =
      t.source === "atari"
        ? `One agent step is ${fmtSeconds(t.step_seconds)} s: the Atari's frames per step at 60 Hz.${still}`
        : t.source === "render_fps"
          ? `One env step is ${fmtSeconds(t.step_seconds)} s: 1 / the environment's render_fps.${still}`
          : t.source === "control_timestep"
            ? `One env step is ${fmtSeconds(t.step_seconds)} s: the DeepMind Control task's control timestep.${still}`
          : `This environment does not say its frame rate; ${fmtRate(t.steps_per_s)} steps/s is assumed.${still}`;
  }

  // ----- loading -------------------------------------------------------------------------------
  private setOverlay(node: HTMLElement | null): void {
    this.overlay?.remove();
    this.overlay = node;
    if (node) this.box.append(node);
  }

  /** Show a spinner with ``label`` if the wait lasts ``ms``; returns the timer to clear. */
  private spinnerAfter(label: string, ms: number): number {
    return window.setTimeout(() => {
      if (!this.cancelled) this.setOverlay(spinner(label));
    }, ms);
  }

  private async load(src: ClipSource): Promise<boolean> {
    let status = src.status;
    let url = src.media_url;
    // a spinner only for a wait a person notices (a clip loaded from the cache flashes none)
    let spin = status === "pending" ? this.spinnerAfter("Rendering clip…", SPINNER_DELAY_MS) : null;
    let delay = 400;
    const key = src.media_key;
    while (status === "pending" && key !== null && !this.cancelled) {
      await sleep(delay);
      delay = Math.min(delay * 1.5, 2000);
      try {
        const m = await api.media(key);
        status = m.status;
        if (m.url) url = m.url;
      } catch {
        /* keep polling through network trouble */
      }
    }
    if (spin) window.clearTimeout(spin);
    if (this.cancelled) return false;
    if (status !== "ready" || url === null) {
      const why =
        status === "unavailable"
          ? "No video: this environment has no renderer. Answer from the description or press ↓."
          : "The clip could not be rendered.";
      this.setOverlay(h("div", { class: "clip-overlay clip-missing", "data-testid": "clip-missing" }, h("span", { text: why })));
      return false;
    }
    if (this.overlay) this.setOverlay(spinner("Loading…"));
    else spin = this.spinnerAfter("Loading…", SPINNER_DELAY_MS);
    const ok = await new Promise<boolean>((resolve) => {
      const done = (v: boolean) => {
        this.video.removeEventListener("canplay", onOk);
        this.video.removeEventListener("error", onErr);
        resolve(v);
      };
      const onOk = () => done(true);
      const onErr = () => done(false);
      this.video.addEventListener("canplay", onOk);
      this.video.addEventListener("error", onErr);
      this.video.src = rooted(url);
      this.video.load();
    });
    if (spin) window.clearTimeout(spin);
    if (this.cancelled) return false;
    this.setOverlay(
      ok ? null : h("div", { class: "clip-overlay clip-missing" }, h("span", { text: "The video failed to load." })),
    );
    return ok;
  }
}
