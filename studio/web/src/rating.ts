// Real-time rating view (Pref-GUIDE): an episode plays once, at the env's real time, while the
// person moves a slider (or the mouse) in [-1, 1]; the value is sampled with the env step of the
// frame on screen (requestVideoFrameCallback): at the start (step 0), at every presented frame that
// shows a new step, at least every 80 ms, and at the end (step n − 1); batches go every second.
// A stream's frame k is its step k (rating streams have no still padding; timing.still_frames is
// honoured anyway), at the clip's encoded fps (timing.fps), whatever the env's frame rate or skip.
import { api, type Outbox, type RatingSample, type RatingsItem, type Stream, uuid } from "./api";
import { ClipTile } from "./clip";
import { clear, fmtInt, h, kbd } from "./dom";
import type { KeyAction, KeyTarget } from "./keys";

const SAMPLE_MS = 80; // 12.5 Hz, comfortably above the 10 Hz floor even with timer jitter
const BATCH_MS = 1000;

interface VideoFrameMeta {
  mediaTime: number;
}
type RVFC = (cb: (now: number, meta: VideoFrameMeta) => void) => number;

export class RatingView implements KeyTarget {
  readonly el: HTMLElement;
  private stage: HTMLElement;
  private slider: HTMLInputElement;
  private valueText: HTMLElement;
  private gaugeFill: HTMLElement;
  private gaugeKnob: HTMLElement;
  private mouseToggle: HTMLInputElement;
  private startBtn: HTMLButtonElement;
  private statSent: HTMLElement;
  private statStep: HTMLElement;
  private statRate: HTMLElement;
  private statSpeed: HTMLElement;
  private stream: Stream | null = null;
  private player: Player | null = null;
  private value = 0;
  private batch: RatingSample[] = [];
  private sampleTimer: number | undefined;
  private batchTimer: number | undefined;
  private pollTimer: number | undefined;
  private t0Epoch = 0;
  private t0Perf = 0;
  private lastT = -Infinity;
  private nSampled = 0;
  private nStored = 0;
  private sampleTimes: number[] = [];
  private lastStep = -1;
  private running = false;
  private finished = false;
  private done = new Set<string>();
  private active = false;
  private loading = false;

  constructor(private readonly outbox: Outbox) {
    this.slider = h("input", {
      type: "range",
      min: -1,
      max: 1,
      step: 0.01,
      value: 0,
      class: "rating-slider",
      "aria-label": "Your rating from -1 (bad) to +1 (good)",
      "data-testid": "rating-slider",
    });
    this.slider.addEventListener("input", () => this.setValue(Number(this.slider.value)));
    this.valueText = h("div", { class: "rating-value", "data-testid": "rating-value", text: "0.00" });
    this.gaugeFill = h("div", { class: "gauge-fill" });
    this.gaugeKnob = h("div", { class: "gauge-knob" });
    this.mouseToggle = h("input", { type: "checkbox", id: "mouse-mode", "data-testid": "mouse-mode" });
    this.startBtn = h("button", { class: "btn btn-primary", type: "button", "data-testid": "rating-start" }, kbd("Space"), h("span", { text: "Start" }));
    this.startBtn.addEventListener("click", () => {
      this.startBtn.blur();
      this.startOnce();
    });
    this.statSent = h("span", { class: "stat-value", "data-testid": "rating-sent", text: "0" });
    this.statStep = h("span", { class: "stat-value", "data-testid": "rating-step", text: "–" });
    this.statRate = h("span", { class: "stat-value", text: "–" });
    this.statSpeed = h("span", { class: "stat-value", "data-testid": "rating-speed", text: "–" });
    this.stage = h("div", { class: "rating-stage" });

    const gauge = h(
      "div",
      { class: "gauge", "aria-hidden": "true" },
      h("span", { class: "gauge-tick gauge-top", text: "+1" }),
      h("div", { class: "gauge-track" }, this.gaugeFill, this.gaugeKnob),
      h("span", { class: "gauge-tick gauge-bottom", text: "−1" }),
    );
    const panel = h("div", { class: "rating-panel", "data-testid": "rating-panel" }, this.stage, gauge);
    panel.addEventListener("mousemove", (ev) => {
      if (!this.mouseToggle.checked) return;
      const r = panel.getBoundingClientRect();
      const y = (ev.clientY - r.top) / Math.max(1, r.height);
      this.setValue(1 - 2 * Math.min(1, Math.max(0, y)));
    });

    this.el = h(
      "section",
      { class: "view view-rate", "data-testid": "view-rate" },
      h(
        "div",
        { class: "question" },
        h("h1", { text: "How good is what the agent is doing right now?" }),
        h("p", {
          class: "hint",
          text: "Press Space to play the episode (in real time) and keep the slider where you judge the current moment: +1 good, −1 bad. The value is recorded with every step shown, at least ten times a second; each episode is rated once.",
        }),
      ),
      h("div", { class: "rating-controls" }, this.startBtn, h("label", { class: "toggle", for: "mouse-mode" }, this.mouseToggle, h("span", { text: "Mouse height sets the value (over the video)" }))),
      panel,
      h(
        "div",
        { class: "slider-row" },
        h("span", { class: "slider-end bad", text: "−1 bad" }),
        this.slider,
        h("span", { class: "slider-end good", text: "good +1" }),
        this.valueText,
      ),
      h(
        "div",
        { class: "rating-stats" },
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Plays" }), this.statSpeed),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Step shown" }), this.statStep),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Ratings stored" }), this.statSent),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Sampling" }), this.statRate),
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Keys" }), h("span", { class: "stat-value keys-inline" }, kbd("↑"), kbd("↓"), " ±0.1 ", kbd("←"), kbd("→"), " ±0.02")),
      ),
    );
    this.setValue(0);
  }

  show(): void {
    this.active = true;
    if (this.stream && !this.finished) return; // an episode in progress (or not started) stays
    // the episode rated last is done: the next one, as the tab's badge announced
    // An earlier "No episode to rate" may be stale: say that the page is looking until it knows.
    clear(this.stage);
    this.stage.append(
      h(
        "div",
        { class: "empty", "data-testid": "rating-looking" },
        h("div", { class: "empty-icon", "aria-hidden": "true", text: "…" }),
        h("h2", { text: "Looking for an episode to rate" }),
      ),
    );
    void this.loadNext();
  }

  hide(): void {
    this.active = false;
    if (this.running) this.finish(); // leaving the tab ends the pass: a stream is rated once, in order
  }

  onKey(action: KeyAction, ev: KeyboardEvent): boolean {
    if (action === "replay") {
      this.startOnce();
      return true;
    }
    if ((ev.target as HTMLElement | null) === this.slider && (action === "left" || action === "right")) return false;
    const step = { equal: 0.1, cannot: -0.1, left: -0.02, right: 0.02 } as Record<string, number>;
    if (action in step) {
      this.setValue(this.value + step[action]);
      return true;
    }
    if (action === "next" && !this.running) {
      void this.loadNext();
      return true;
    }
    return false;
  }

  onStored(item: RatingsItem, n: number): void {
    if (item.body.query_id !== this.stream?.query_id) return;
    this.nStored += n;
    this.statSent.textContent = fmtInt(this.nStored);
  }

  private setValue(v: number): void {
    this.value = Math.max(-1, Math.min(1, Math.round(v * 100) / 100));
    this.slider.value = String(this.value);
    this.valueText.textContent = (this.value > 0 ? "+" : "") + this.value.toFixed(2);
    const pct = ((1 - this.value) / 2) * 100; // 0 % at the top (+1)
    this.gaugeKnob.style.top = `${pct}%`;
    const mid = 50;
    this.gaugeFill.style.top = `${Math.min(pct, mid)}%`;
    this.gaugeFill.style.height = `${Math.abs(pct - mid)}%`;
    this.gaugeFill.dataset.sign = this.value >= 0 ? "pos" : "neg";
    this.valueText.dataset.sign = this.value > 0.02 ? "pos" : this.value < -0.02 ? "neg" : "zero";
  }

  private async loadNext(): Promise<void> {
    if (this.loading) return;
    this.loading = true;
    window.clearTimeout(this.pollTimer);
    try {
      const s = (await api.nextStream()).stream;
      if (s && !this.done.has(s.query_id)) this.display(s);
      else this.displayEmpty();
    } catch {
      this.displayEmpty("Could not reach the studio server; retrying…");
    } finally {
      this.loading = false;
    }
  }

  private displayEmpty(msg?: string): void {
    this.player?.dispose();
    this.player = null;
    this.stream = null;
    this.startBtn.disabled = true;
    clear(this.stage);
    this.stage.append(
      h(
        "div",
        { class: "empty", "data-testid": "rating-empty" },
        h("div", { class: msg ? "empty-icon trouble" : "empty-icon", "aria-hidden": "true", text: msg ? "!" : "✓" }),
        h("h2", { text: msg ? "Connection trouble" : "No episode to rate" }),
        h("p", { text: msg ?? "The trainer has not published a rating stream for you yet; this page checks every few seconds." }),
      ),
    );
    this.pollTimer = window.setTimeout(() => {
      if (this.active && !this.stream) void this.loadNext();
    }, 4000);
  }

  private display(s: Stream): void {
    this.player?.dispose();
    this.player = null;
    this.stream = s;
    this.finished = false;
    this.startBtn.querySelector("span")!.textContent = "Start";
    this.nStored = 0;
    this.nSampled = 0;
    this.statSent.textContent = "0";
    this.statStep.textContent = `1 / ${fmtInt(s.n_steps)}`;
    this.showSpeed(s);
    const tile = new ClipTile(s, { side: "stream" });
    clear(this.stage);
    this.stage.append(tile.el);
    this.stage.dataset.queryId = s.query_id;
    this.startBtn.disabled = true;
    const player = new VideoPlayer(tile, s);
    this.player = player;
    void tile.ready.then((ok) => {
      if (this.player !== player) return;
      if (!ok) {
        // No renderer for this env: the stream plays as a step timeline at its fps.
        tile.dispose();
        const clock = new ClockPlayer(s);
        this.player = clock;
        clear(this.stage);
        this.stage.append(clock.el);
      }
      this.player.onEnded(() => this.finish());
      this.startBtn.disabled = false;
    });
  }

  /** The stream's pace, as a person reads it: real time, steps per second and duration. */
  private showSpeed(s: Stream): void {
    const t = s.timing;
    if (!t) {
      this.statSpeed.textContent = `${fmtInt(s.fps)} steps/s`;
      this.statSpeed.title = "";
      return;
    }
    const rate = t.steps_per_s >= 10 ? Math.round(t.steps_per_s) : Math.round(t.steps_per_s * 10) / 10;
    const secs = s.n_steps * t.step_seconds;
    this.statSpeed.textContent = `real time · ${rate} steps/s · ${secs < 10 ? secs.toFixed(1) : Math.round(secs)} s`;
    this.statSpeed.title =
      t.source === "atari"
        ? `One agent step is ${t.step_seconds.toFixed(3)} s: the Atari's frames per step (frame skip) at 60 Hz.`
        : t.source === "render_fps"
          ? `One env step is ${t.step_seconds.toFixed(3)} s: 1 / the environment's render_fps (its frame skip included).`
          : t.source === "control_timestep"
            ? `One env step is ${t.step_seconds.toFixed(3)} s: the DeepMind Control task's control timestep.`
          : `This environment does not say its frame rate; ${rate} steps/s is assumed.`;
  }

  /** Plays the episode once: the ratings of a stream follow its steps forward, never back. */
  private startOnce(): void {
    const player = this.player;
    const s = this.stream;
    if (this.finished) {
      void this.loadNext();
      return;
    }
    if (!player || !s || this.startBtn.disabled || this.running) {
      if (!s) void this.loadNext();
      return;
    }
    this.t0Epoch = Date.now() / 1000;
    this.t0Perf = performance.now();
    this.lastT = -Infinity;
    this.lastStep = -1;
    this.sampleTimes = [];
    this.running = true;
    this.startBtn.disabled = true;
    this.startBtn.querySelector("span")!.textContent = "Rating…";
    this.sample(0); // the first frame is on screen when the person starts
    player.onFrame((k) => {
      if (k !== this.lastStep) this.sample(k);
    });
    player.start();
    this.sampleTimer = window.setInterval(() => this.sample(), SAMPLE_MS);
    this.batchTimer = window.setInterval(() => this.flush(), BATCH_MS);
  }

  /** Records the value with the step on screen (``shown``: the step of a frame just presented). */
  private sample(shown?: number): void {
    const player = this.player;
    if (!player || !this.running) return;
    if (shown === undefined && !player.playing()) return;
    const step = Math.max(shown ?? player.step(), this.lastStep, 0);
    this.lastStep = step;
    const prevStep = this.batch.length ? this.batch[this.batch.length - 1].step : 0;
    let t = this.t0Epoch + (performance.now() - this.t0Perf) / 1000;
    if (t <= this.lastT) t = this.lastT + 1e-4;
    this.lastT = t;
    this.batch.push({ step: Math.max(step, prevStep), t: Math.round(t * 1e4) / 1e4, value: this.value });
    this.nSampled += 1;
    this.sampleTimes.push(performance.now());
    if (this.sampleTimes.length > 25) this.sampleTimes.shift();
    this.statStep.textContent = `${fmtInt(step + 1)} / ${fmtInt(this.stream?.n_steps)}`;
    if (this.sampleTimes.length > 5) {
      const span = (this.sampleTimes[this.sampleTimes.length - 1] - this.sampleTimes[0]) / 1000;
      this.statRate.textContent = `${((this.sampleTimes.length - 1) / span).toFixed(1)} Hz`;
    }
  }

  private flush(): void {
    if (!this.batch.length || !this.stream) return;
    const ratings = this.batch;
    this.batch = [];
    this.outbox.push({ kind: "ratings", client_key: uuid(), body: { query_id: this.stream.query_id, ratings } });
  }

  /** Stops sampling and sends what was sampled (samples taken are real ratings). */
  private stop(): void {
    window.clearInterval(this.sampleTimer);
    window.clearInterval(this.batchTimer);
    this.running = false;
    this.player?.pause();
    this.flush();
  }

  private finish(): void {
    if (!this.running || !this.stream) return;
    if (this.player?.atEnd()) this.sample(Math.max(0, this.stream.n_steps - 1)); // the last frame stays on screen
    else this.sample();
    this.stop();
    this.done.add(this.stream.query_id);
    this.finished = true;
    this.startBtn.querySelector("span")!.textContent = "Next episode";
    this.startBtn.disabled = false;
    const next = h("button", { class: "btn btn-primary", type: "button", "data-testid": "rating-next" }, kbd("N"), h("span", { text: "Next episode" }));
    next.addEventListener("click", () => void this.loadNext());
    this.stage.append(
      h(
        "div",
        { class: "clip-overlay stream-done", "data-testid": "rating-done" },
        h("h2", { text: "Episode finished" }),
        h("p", { text: `${fmtInt(this.nSampled)} ratings recorded.` }),
        next,
      ),
    );
  }
}

/** What the rating view plays: the stream's video, or a step timeline when no video exists. */
interface Player {
  start(): void;
  pause(): void;
  playing(): boolean;
  /** The step on screen now. */
  step(): number;
  /** Whether the last step is on screen because the episode played to its end. */
  atEnd(): boolean;
  /** Call ``cb`` with the step of every frame presented from now on. */
  onFrame(cb: (step: number) => void): void;
  onEnded(cb: () => void): void;
  dispose(): void;
}

/** The stream's step shown at media time ``seconds``: frame k of the clip lasts from k / fps to
 * (k + 1) / fps at the clip's encoded fps (timing.fps, not the caption's rounded fps), and is step
 * k − still_frames. ``presented``: ``seconds`` is a presented frame's timestamp (its start, which
 * the container may round down by a tick), so it is rounded to the nearest frame. */
function stepAt(s: Stream, seconds: number, presented = false): number {
  const fps = s.timing?.fps ?? s.fps;
  const x = seconds * fps;
  const frame = presented ? Math.round(x) : Math.floor(x + 1e-3);
  return Math.max(0, Math.min(s.n_steps - 1, frame - (s.timing?.still_frames ?? 0)));
}

class VideoPlayer implements Player {
  private shown = 0;
  private rvfc: RVFC | undefined;
  private gen = 0;
  private frameCbs: ((step: number) => void)[] = [];

  constructor(
    private readonly tile: ClipTile,
    private readonly s: Stream,
  ) {
    this.rvfc = (tile.video as unknown as { requestVideoFrameCallback?: RVFC }).requestVideoFrameCallback;
  }

  start(): void {
    const v = this.tile.video;
    v.pause();
    v.currentTime = 0;
    this.shown = 0;
    const gen = ++this.gen;
    if (this.rvfc) {
      const rvfc = this.rvfc;
      // the step of the frame actually presented, not of the decoder's clock
      const onFrame = (_now: number, meta: VideoFrameMeta) => {
        if (gen !== this.gen) return;
        this.shown = stepAt(this.s, meta.mediaTime, true);
        this.frameCbs.forEach((f) => f(this.shown));
        rvfc.call(v, onFrame);
      };
      rvfc.call(v, onFrame);
    }
    void v.play().catch(() => undefined);
  }

  pause(): void {
    this.gen++;
    this.tile.video.pause();
  }

  playing(): boolean {
    const v = this.tile.video;
    return !v.paused && !v.ended;
  }

  step(): number {
    return this.rvfc ? this.shown : stepAt(this.s, this.tile.video.currentTime);
  }

  atEnd(): boolean {
    return this.tile.video.ended;
  }

  onFrame(cb: (step: number) => void): void {
    this.frameCbs = [cb];
  }

  onEnded(cb: () => void): void {
    this.tile.video.addEventListener("ended", cb);
  }

  dispose(): void {
    this.gen++;
    this.tile.dispose();
  }
}

class ClockPlayer implements Player {
  readonly el: HTMLElement;
  private fill: HTMLElement;
  private label: HTMLElement;
  private t0 = 0;
  private running = false;
  private raf = 0;
  private ended: (() => void)[] = [];
  private done = false;

  constructor(private readonly s: Stream) {
    this.fill = h("div", { class: "timeline-fill" });
    this.label = h("div", { class: "timeline-step", text: `step 1 / ${fmtInt(s.n_steps)}` });
    this.el = h(
      "div",
      { class: "clip timeline", "data-testid": "timeline" },
      h(
        "div",
        { class: "timeline-inner" },
        h("p", { class: "timeline-note", text: "No video for this environment: the stream plays as a step timeline." }),
        this.label,
        h("div", { class: "timeline-bar" }, this.fill),
      ),
    );
  }

  start(): void {
    this.t0 = performance.now();
    this.running = true;
    this.done = false;
    cancelAnimationFrame(this.raf);
    const tick = () => {
      if (!this.running) return;
      const k = this.step();
      this.label.textContent = `step ${fmtInt(k + 1)} / ${fmtInt(this.s.n_steps)}`;
      this.fill.style.width = `${((100 * (k + 1)) / Math.max(1, this.s.n_steps)).toFixed(1)}%`;
      if ((performance.now() - this.t0) / 1000 >= this.s.n_steps * this.stepSeconds()) {
        this.running = false;
        this.done = true;
        this.ended.forEach((f) => f());
        return;
      }
      this.raf = requestAnimationFrame(tick);
    };
    this.raf = requestAnimationFrame(tick);
  }

  pause(): void {
    this.running = false;
    cancelAnimationFrame(this.raf);
  }

  playing(): boolean {
    return this.running;
  }

  /** Seconds of real time per env step (the timeline plays the env's real time). */
  private stepSeconds(): number {
    return this.s.timing?.step_seconds ?? 1 / Math.max(1, this.s.fps);
  }

  step(): number {
    const k = Math.floor((performance.now() - this.t0) / 1000 / this.stepSeconds() + 1e-3);
    return Math.max(0, Math.min(this.s.n_steps - 1, k));
  }

  atEnd(): boolean {
    return this.done;
  }

  onFrame(): void {
    // no frames: the 80 ms sampling follows the timeline
  }

  onEnded(cb: () => void): void {
    this.ended.push(cb);
  }

  dispose(): void {
    this.pause();
  }
}
