"""HTML of the study's pages (issue #61): consent, instructions, practice, completion and every
"cannot go on" page. Server-rendered with no script (the studio's CSP allows none inline):
forms post back to the page, links are relative so that the pages work under a root path.
Owner-written Markdown is rendered with raw HTML off (markdown-it, CommonMark)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False})

CSS = """\
:root { color-scheme: light; --ink: #1d232b; --muted: #5b6570; --line: #d9dee4; --accent: #2457c5;
  --ok: #1f7a3d; --bad: #b3261e; }
* { box-sizing: border-box; }
body { margin: 0; font: 17px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: #f5f7fa; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 14px 24px; }
header h1 { margin: 0; font-size: 18px; font-weight: 600; }
header .step { color: var(--muted); font-size: 14px; }
main { max-width: 860px; margin: 20px auto; background: #fff; border: 1px solid var(--line);
  border-radius: 10px; padding: 20px 32px 24px; }
h1, h2 { line-height: 1.25; }
h2 { margin: 4px 0 10px; font-size: 22px; }
p { margin: 8px 0; }
.doc h1 { font-size: 26px; margin-top: 0; }
.actions { display: flex; gap: 12px; margin-top: 18px; flex-wrap: wrap; }
button, .button { font: inherit; padding: 10px 20px; border-radius: 8px; border: 1px solid var(--line);
  background: #fff; color: var(--ink); cursor: pointer; text-decoration: none; display: inline-block; }
button.primary, .button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; margin-top: 12px; }
.pair figure { margin: 0; }
.pair figcaption { color: var(--muted); font-size: 14px; margin-bottom: 4px; }
video { display: block; width: 100%; height: 46vh; object-fit: contain; background: #0f141a;
  border-radius: 6px; }
.pending { display: flex; align-items: center; justify-content: center; height: 46vh;
  background: #eef1f5; border-radius: 6px; color: var(--muted); }
main.wide { max-width: 1100px; }
.feedback { padding: 12px 16px; border-radius: 8px; margin-top: 18px; font-weight: 500; }
.feedback.ok { background: #e7f4ec; color: var(--ok); }
.feedback.bad { background: #fbeaea; color: var(--bad); }
.code { font: 600 28px/1.2 ui-monospace, "SFMono-Regular", Menlo, monospace; letter-spacing: 2px;
  padding: 14px 20px; border: 2px dashed var(--accent); border-radius: 8px; display: inline-block;
  user-select: all; }
.muted { color: var(--muted); }
progress { width: 100%; height: 10px; accent-color: var(--accent); }
"""


def markdown(text: str) -> str:
    """Owner-written Markdown as HTML (raw HTML in it is shown as text, never run)."""
    return _MD.render(text)


def page(
    title: str,
    body: str,
    *,
    step: str = "",
    base: str = "",
    wide: bool = False,
    refresh: str | None = None,
) -> str:
    """A whole page: ``title`` (escaped) in the header, ``body`` (HTML) in the card. ``base``
    is the relative path to the studio's root (for the stylesheet)."""
    meta = f'<meta http-equiv="refresh" content="{html.escape(refresh)}">' if refresh else ""
    step_html = f'<div class="step">{html.escape(step)}</div>' if step else ""
    cls = ' class="wide"' if wide else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>{meta}"
        f'<link rel="stylesheet" href="{base}study/study.css"></head><body>'
        f"<header><h1>{html.escape(title)}</h1>{step_html}</header>"
        f"<main{cls}>{body}</main></body></html>"
    )


def message(title: str, text: str, *, base: str = "", extra: str = "") -> str:
    """A page that says one thing (an error or a goodbye), in plain words."""
    return page(title, f"<h2>{html.escape(title)}</h2><p>{html.escape(text)}</p>{extra}", base=base)


def consent(title: str, consent_md: str, *, base: str) -> str:
    body = (
        f'<div class="doc">{markdown(consent_md)}</div>'
        '<form method="post" action="consent" class="actions">'
        '<button class="primary" name="decision" value="accept">I agree — continue</button>'
        '<button name="decision" value="decline">I do not agree</button></form>'
    )
    return page(title, body, step="Step 1 of 3 · Consent", base=base)


def clip(label: str, url: str | None, status: str) -> str:
    if url is not None and status == "ready":
        inner = (
            f'<video src="{html.escape(url)}" controls autoplay loop muted playsinline '
            'preload="auto"></video>'
        )
    else:
        inner = f'<div class="pending">clip {html.escape(status)}…</div>'
    return f"<figure><figcaption>{html.escape(label)}</figcaption>{inner}</figure>"


def pair(left: tuple[str | None, str], right: tuple[str | None, str]) -> str:
    return f'<div class="pair">{clip("Left", *left)}{clip("Right", *right)}</div>'


def instructions(
    title: str, instructions_md: str, task: str, example: str | None, *, base: str, n: int
) -> str:
    task_html = f"<p><strong>The task:</strong> {html.escape(task)}</p>" if task else ""
    ex = f"<h2>An example pair</h2>{example}" if example else ""
    go = (
        f'<a class="button primary" href="practice">Start the practice ({n} pairs)</a>'
        if n
        else '<a class="button primary" href="start">Start</a>'
    )
    body = f'<div class="doc">{markdown(instructions_md)}</div>{task_html}{ex}<div class="actions">{go}</div>'
    return page(title, body, step="Step 2 of 3 · Instructions", base=base, wide=True)


def practice(
    title: str,
    k: int,
    n: int,
    clips: str,
    task: str,
    *,
    base: str,
    refresh: bool,
    pair: tuple[str, str] = ("", ""),
) -> str:
    """Practice pair ``k`` of ``n``; the form names the pair shown (``pair``: the left and
    right segment ids), which the answer is then checked against."""
    task_html = f"<p><strong>The task:</strong> {html.escape(task)}</p>" if task else ""
    body = (
        f"<h2>Practice pair {k + 1} of {n}</h2>"
        '<p class="muted">Practice answers do not count.</p>'
        f"{task_html}{clips}"
        '<form method="post" action="practice" class="actions">'
        f'<input type="hidden" name="index" value="{k}">'
        f'<input type="hidden" name="left" value="{html.escape(pair[0])}">'
        f'<input type="hidden" name="right" value="{html.escape(pair[1])}">'
        '<button name="answer" value="1">Left is better</button>'
        '<button name="answer" value="0.5">About equal</button>'
        '<button name="answer" value="0">Right is better</button></form>'
    )
    return page(
        title,
        body,
        step="Step 3 of 3 · Practice",
        base=base,
        wide=True,
        refresh="3" if refresh else None,
    )


def practice_feedback(
    title: str, k: int, n: int, verdict: str | None, expected: str | None, *, base: str
) -> str:
    if verdict is None:
        fb = '<div class="feedback ok">Thank you — practice answers are not scored here.</div>'
    elif verdict == "right":
        fb = f'<div class="feedback ok">Correct: {html.escape(expected or "")}</div>'
    else:
        fb = f'<div class="feedback bad">Not quite: {html.escape(expected or "")}</div>'
    nxt = (
        '<a class="button primary" href="practice">Next practice pair</a>'
        if k + 1 < n
        else '<a class="button primary" href="start">Start the study</a>'
    )
    body = f"<h2>Practice pair {k + 1} of {n}</h2>{fb}<div class='actions'>{nxt}</div>"
    return page(title, body, step="Step 3 of 3 · Practice", base=base)


def done(
    title: str,
    code: str,
    redirect: str | None,
    *,
    base: str,
    answers: int,
    minutes: float,
) -> str:
    code_html = (
        f'<p>Your completion code:</p><p><span class="code">{html.escape(code)}</span></p>'
        if code
        else ""
    )
    go = (
        f'<div class="actions"><a class="button primary" href="{html.escape(redirect)}">'
        "Back to the recruiting platform</a></div>"
        '<p class="muted">You will be sent back automatically in 10 seconds.</p>'
        if redirect
        else '<p class="muted">You can close this tab now.</p>'
    )
    body = (
        "<h2>Thank you — you have finished</h2>"
        f"<p>You gave {answers} answers in {minutes:.0f} minutes.</p>{code_html}{go}"
    )
    return page(
        title, body, step="Finished", base=base, refresh=f"10;url={redirect}" if redirect else None
    )


def not_done(
    title: str, answers: int, quota: int, minutes: float, quota_min: float, *, base: str
) -> str:
    parts: Sequence[str] = [
        *([f"{answers} of {quota} answers"] if quota else []),
        *([f"{minutes:.0f} of {quota_min:.0f} minutes"] if quota_min else []),
    ]
    share = answers / quota if quota else (minutes / quota_min if quota_min else 0.0)
    body = (
        "<h2>Not finished yet</h2>"
        f"<p>So far: {html.escape(', '.join(parts))}.</p>"
        f'<progress max="100" value="{min(100.0, 100 * share):.0f}"></progress>'
        f'<div class="actions"><a class="button primary" href="{base}">Continue labelling</a></div>'
    )
    return page(title, body, base=base)
