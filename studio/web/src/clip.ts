// A video tile: spinner while the clip renders (polls /api/media/{key}), then a muted inline video.
import { api, type Clip } from "./api";
import { h, sleep, spinner } from "./dom";

/** What a tile needs of a clip or stream (the key and URL are null unless it can render). */
export type ClipSource = Pick<Clip, "media_key" | "media_url" | "status">;

export class ClipTile {
  readonly el: HTMLElement;
  readonly video: HTMLVideoElement;
  private overlay: HTMLElement | null = null;
  private cancelled = false;
  /** Resolves true when the video can play, false when no video will come. */
  readonly ready: Promise<boolean>;

  constructor(src: ClipSource, opts: { label?: string; side?: string; loop?: boolean } = {}) {
    this.video = h("video", { muted: true, playsinline: true, preload: "auto", "data-testid": `video-${opts.side ?? "main"}` });
    this.video.muted = true; // the attribute alone does not mute in every browser
    this.video.loop = opts.loop ?? false;
    this.video.disablePictureInPicture = true;
    this.el = h("div", { class: "clip", "data-side": opts.side ?? "" }, this.video);
    this.video.addEventListener("loadedmetadata", () => {
      const { videoWidth: w, videoHeight: hgt } = this.video;
      if (w > 0 && hgt > 0) {
        this.el.style.aspectRatio = `${w} / ${hgt}`; // the tile takes the clip's shape: no black bars
        this.el.classList.add("clip-sized");
      }
    });
    if (opts.label) this.el.append(h("div", { class: "clip-label", text: opts.label }));
    this.ready = this.load(src);
  }

  dispose(): void {
    this.cancelled = true;
    this.video.pause();
    this.video.removeAttribute("src");
    this.video.load();
  }

  private setOverlay(node: HTMLElement | null): void {
    this.overlay?.remove();
    this.overlay = node;
    if (node) this.el.append(node);
  }

  private async load(src: ClipSource): Promise<boolean> {
    let status = src.status;
    let url = src.media_url;
    if (status === "pending") this.setOverlay(spinner("Rendering clip…"));
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
    if (this.cancelled) return false;
    if (status !== "ready" || url === null) {
      const why =
        status === "unavailable"
          ? "No video: this environment has no renderer. Answer from the description or press ↓."
          : "The clip could not be rendered.";
      this.setOverlay(h("div", { class: "clip-overlay clip-missing", "data-testid": "clip-missing" }, h("span", { text: why })));
      return false;
    }
    this.setOverlay(spinner("Loading…"));
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
      this.video.src = url;
      this.video.load();
    });
    if (this.cancelled) return false;
    this.setOverlay(
      ok ? null : h("div", { class: "clip-overlay clip-missing" }, h("span", { text: "The video failed to load." })),
    );
    return ok;
  }
}
