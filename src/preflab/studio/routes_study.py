"""A study's pages for participants (issue #61): the study link /s/SECRET, consent, instructions
with an example pair, practice pairs with feedback, and the completion page. Server-rendered
HTML (not part of the JSON API's schema); every refusal is a page saying why and what to do.

The session cookie is the participant's study key; it becomes their studio token once they
consent (the studio's API refuses it before). It is SameSite=Lax so that a person coming back
from the recruiting platform's page is recognised on the first request."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from preflab.errors import DataError
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.store.studies import Participant, StudyClosedError, StudyFullError
from preflab.studio import study as S
from preflab.studio import study_pages as P
from preflab.studio.auth import COOKIE, check_throttle, failed_sign_in
from preflab.studio.clips import request_clip
from preflab.studio.schemas import ID_PATTERN
from preflab.studio.study_config import StudyConfig

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
ROOT = "../"
"""The studio's root relative to /s/SECRET and /study/PAGE."""
SEGMENT_ID = re.compile(ID_PATTERN)
"""What a practice form's segment id looks like (anything else is not looked up)."""


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers={"cache-control": "no-store"})


def _sorry(title: str, text: str, status: int) -> HTMLResponse:
    return _html(P.message(title, text, base=ROOT), status)


def _set_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=request.app.state.config.cookie_secure,
        path="/",
        max_age=30 * 24 * 3600,
    )


FORM_FIELDS = 20
"""Most fields a study page's form may post (its own forms have at most five)."""
INDEX_DIGITS = 6
"""Most digits of a practice form's pair index."""


async def _form(request: Request) -> dict[str, str] | Response:
    """The posted form's fields (application/x-www-form-urlencoded; the first of each), or the
    page refusing a form with more than :data:`FORM_FIELDS` fields."""
    raw = (await request.body()).decode("utf-8", errors="replace")
    try:
        return {k: v[0] for k, v in parse_qs(raw, max_num_fields=FORM_FIELDS).items()}
    except ValueError:
        return _sorry(
            "This form was not sent by the study's page",
            f"A study page's form has at most {FORM_FIELDS} fields; this one has more. Go back, "
            "reload the page and answer it there.",
            400,
        )


Form = Annotated[dict[str, str] | Response, Depends(_form)]


def _go(to: str) -> RedirectResponse:
    return RedirectResponse(to, status_code=303, headers={"cache-control": "no-store"})


@router.get("/study/study.css")
def stylesheet() -> Response:
    return Response(P.CSS, media_type="text/css", headers={"cache-control": "max-age=3600"})


@router.get("/s/{secret}", response_class=HTMLResponse)
def open_link(request: Request, secret: str) -> Response:
    """The study link: join (a new pseudonymous participant) or resume, then the next page."""
    store = request.app.state.store
    check_throttle(request)  # guessing study links is throttled like wrong tokens
    try:
        study, config = S.by_secret(store, secret)
    except S.LinkError as exc:
        failed_sign_in(request)
        return _sorry("This study link is not valid", str(exc), 404)
    params = dict(request.query_params)
    try:
        joined = S.join(store, study, config, params, cookie_key=request.cookies.get(COOKIE))
    except StudyClosedError:
        return _sorry(
            "This study is closed",
            "The researcher has closed this study to new participants. Thank you for your "
            "interest; please return it on your recruiting platform.",
            403,
        )
    except S.RevokedError as exc:
        return _ended(str(exc))
    except StudyFullError:
        return _sorry(
            "This study is full",
            "This study already has as many participants as it needs. Thank you for your "
            "interest; please return it on your recruiting platform.",
            403,
        )
    except DataError as exc:
        return _sorry("This link is not complete", str(exc), 400)
    if joined.rekeyed:  # the old cookie's studio token must not live on in the token cache
        request.app.state.token_cache.forget(joined.participant.annotator_id)
    response = _go(f"{ROOT}study/{_page_of(joined.participant, config)}?joined=1")
    _set_cookie(request, response, joined.token)
    return response


def _ended(text: str = S.REVOKED_TEXT) -> HTMLResponse:
    """The page of a participant the owner revoked."""
    return _sorry("Your participation has ended", text, 403)


def _page_of(p: Participant, config: StudyConfig) -> str:
    where = S.step(p, config)
    return {
        "declined": "declined",
        "consent": "consent",
        "instructions": "instructions",
        "studio": "start",
        "done": "done",
    }[where]


def _participant(request: Request) -> tuple[Participant, StudyConfig] | Response:
    """The participant of the session cookie with their study's config, or the page saying
    what is wrong (no cookie right after joining: the browser blocks cookies)."""
    store = request.app.state.store
    key = request.cookies.get(COOKIE)
    p = store.studies.by_key(hash_token(key)) if key and len(key) <= 256 else None
    if p is None:
        if request.query_params.get("joined") == "1":
            return _sorry(
                "Your browser blocks cookies",
                "This study needs one cookie to know who you are between pages (it holds a "
                "random key, nothing else). Allow cookies for this site (or leave private "
                "browsing), then open the study link again.",
                400,
            )
        return _sorry(
            "Please open your study link",
            "We do not know who you are on this page. Open the study link from your recruiting "
            "platform again: you will continue where you left off.",
            401,
        )
    if S.revoked(store, p):
        return _ended()
    loaded = S.load(store, p.study_id)
    if loaded is None:
        return _sorry("This study no longer exists", "The researcher removed this study.", 410)
    return p, loaded[1]


def _need(request: Request, want: tuple[str, ...]) -> tuple[Participant, StudyConfig] | Response:
    """The participant when their step is one of ``want``; else a redirect to their page."""
    found = _participant(request)
    if isinstance(found, Response):
        return found
    p, config = found
    where = S.step(p, config)
    if where not in want:
        return _go(_page_of(p, config))
    return p, config


@router.get("/study/consent", response_class=HTMLResponse)
def consent_page(request: Request) -> Response:
    found = _need(request, ("consent",))
    if isinstance(found, Response):
        return found
    _p, config = found
    return _html(P.consent(config.title, config.consent_md, base=ROOT))


@router.post("/study/consent", response_class=HTMLResponse)
def consent_answer(request: Request, form: Form) -> Response:
    if isinstance(form, Response):
        return form
    decision = form.get("decision", "")
    found = _need(request, ("consent",))
    if isinstance(found, Response):
        return found
    p, config = found
    store = request.app.state.store
    if decision == "accept":
        key = request.cookies[COOKIE]
        store.studies.consent(
            p.annotator_id, consent_sha256=S.consent_sha256(config), token_hash=hash_token(key)
        )
        if config.practice_pairs == 0:
            store.studies.practice_done(p.annotator_id)
        return _go("instructions")
    if decision == "decline":
        store.studies.decline(p.annotator_id)
        return _go("declined")
    return _sorry("Please choose", "Choose 'I agree' or 'I do not agree' on the consent page.", 422)


@router.get("/study/declined", response_class=HTMLResponse)
def declined(request: Request) -> Response:
    found = _need(request, ("declined",))
    if isinstance(found, Response):
        return found
    return _html(
        P.message(
            "Thank you",
            "You declined to take part, so nothing of yours is recorded beyond that choice. "
            "You can close this tab and return the study on your recruiting platform.",
            base=ROOT,
        )
    )


def _practice_pairs(request: Request, config: StudyConfig) -> list[dict[str, Any]]:
    """The practice pairs: the best and the worst segments by the env's return (the synthetic
    oracle), paired and alternated left/right; 'p' is None without a true reward."""
    return _oracle_pairs(request, config.practice_pairs)


def _example_pair(request: Request, config: StudyConfig) -> dict[str, Any] | None:
    """The instructions' example: the next such pair after the practice ones (None when the
    run has too few segments for one more)."""
    pairs = _oracle_pairs(request, config.practice_pairs + 1)
    return pairs[-1] if len(pairs) > config.practice_pairs else None


def _oracle_pairs(request: Request, n: int) -> list[dict[str, Any]]:
    top, low = request.app.state.store.studies.extremes(n)
    out = []
    for k, ((a, ra), (b, rb)) in enumerate(zip(top, low, strict=False)):
        if a == b:
            break
        left, right, rl, rr = (a, b, ra, rb) if k % 2 == 0 else (b, a, rb, ra)
        p = None if rl == rr else (1.0 if rl > rr else 0.0)
        out.append({"left": left, "right": right, "p": p})
    return out


def _shown_pair(request: Request, form: Mapping[str, str]) -> dict[str, Any] | None:
    """The practice pair the answered page showed (its form's ``left`` and ``right``), with
    ``p`` from the two segments' true returns: the practice pairs are the store's extremes,
    which the trainer moves as it stores segments, so the pair drawn now may not be the one
    the person saw. None when the form names no two stored segments (then: the pair now)."""
    left, right = form.get("left", ""), form.get("right", "")
    if not _segment_id(left) or not _segment_id(right) or left == right:
        return None
    returns = request.app.state.store.studies.true_returns([left, right])
    if len(returns) != 2:
        return None
    rl, rr = returns[left], returns[right]
    p = None if rl == rr or not math.isfinite(rl - rr) else (1.0 if rl > rr else 0.0)
    return {"left": left, "right": right, "p": p}


def _segment_id(text: str) -> bool:
    return len(text) <= 64 and SEGMENT_ID.fullmatch(text) is not None


def _clips(request: Request, pair: dict[str, Any]) -> tuple[str, bool]:
    media = request.app.state.media
    root = request.scope.get("root_path", "")
    sides = []
    pending = False
    for sid in (pair["left"], pair["right"]):
        c = request_clip(media, [sid], 0, still=True)
        url = f"{root}{c['media_url']}" if c["media_url"] else None
        pending = pending or c["status"] == "pending"
        sides.append((url, str(c["status"])))
    return P.pair(sides[0], sides[1]), pending


def _task(request: Request) -> str:
    t = request.app.state.store.settings.get("task") or {}
    return str(t.get("text", "")) if isinstance(t, dict) else ""


@router.get("/study/instructions", response_class=HTMLResponse)
def instructions_page(request: Request) -> Response:
    found = _need(request, ("instructions", "studio"))
    if isinstance(found, Response):
        return found
    _p, config = found
    pairs = _practice_pairs(request, config)
    shown = _example_pair(request, config)
    example = _clips(request, shown)[0] if shown else None
    return _html(
        P.instructions(
            config.title,
            config.instructions_md,
            _task(request),
            example,
            base=ROOT,
            n=len(pairs),
        )
    )


@router.get("/study/practice", response_class=HTMLResponse)
def practice_page(request: Request) -> Response:
    found = _need(request, ("instructions",))
    if isinstance(found, Response):
        return found
    p, config = found
    pairs = _practice_pairs(request, config)
    k = len(p.practice)
    if k >= len(pairs):
        request.app.state.store.studies.practice_done(p.annotator_id)
        return _go("start")
    clips, pending = _clips(request, pairs[k])
    shown = (pairs[k]["left"], pairs[k]["right"])
    return _html(
        P.practice(
            config.title,
            k,
            len(pairs),
            clips,
            _task(request),
            base=ROOT,
            refresh=pending,
            pair=shown,
        )
    )


@router.post("/study/practice", response_class=HTMLResponse)
def practice_answer(request: Request, form: Form) -> Response:
    if isinstance(form, Response):
        return form
    answer = form.get("answer", "")
    found = _need(request, ("instructions",))
    if isinstance(found, Response):
        return found
    p, config = found
    index = _index(form.get("index", ""))
    if index is None:
        return _sorry(
            "This form was not sent by the practice page",
            f"The practice form's index must be the pair's number (0 to {10**INDEX_DIGITS - 1}, "
            "digits 0-9 only). Go back to the practice page, reload it and answer there.",
            422,
        )
    pairs = _practice_pairs(request, config)
    k = len(p.practice)
    if index != k or k >= len(pairs):  # a resent form: show the pair they are on
        return _go("practice")
    if answer not in ("1", "0.5", "0"):
        return _sorry("Please choose", "Choose left, about equal or right.", 422)
    given = float(answer)
    pair = _shown_pair(request, form) or pairs[k]
    want = pair["p"]
    verdict = None if want is None else ("right" if given == want else "wrong")
    store = request.app.state.store
    answer_record = {"left": pair["left"], "right": pair["right"], "p": given}
    if not store.studies.add_practice(p.annotator_id, answer_record, index=k):
        return _go("practice")  # the same form sent twice at once: one answer counts
    if k + 1 >= len(pairs):
        store.studies.practice_done(p.annotator_id)
    expected = None
    if want is not None:
        expected = (
            f"the {'left' if want == 1.0 else 'right'} clip scores higher on the task "
            "(the env's own reward)."
        )
    return _html(P.practice_feedback(config.title, k, len(pairs), verdict, expected, base=ROOT))


def _index(text: str) -> int | None:
    """A practice form's pair index: ASCII digits, at most :data:`INDEX_DIGITS` of them."""
    ok = 0 < len(text) <= INDEX_DIGITS and text.isascii() and text.isdigit()
    return int(text) if ok else None


@router.get("/study/start")
def start(request: Request) -> Response:
    """After the practice: the studio itself (it signs in with the same cookie)."""
    found = _need(request, ("studio", "instructions"))
    if isinstance(found, Response):
        return found
    p, config = found
    if S.step(p, config) == "instructions":
        return _go("practice")
    return _go(ROOT)


@router.get("/study/done", response_class=HTMLResponse)
def done_page(request: Request) -> Response:
    found = _participant(request)
    if isinstance(found, Response):
        return found
    p, config = found
    where = S.step(p, config)
    if where in ("consent", "declined", "instructions"):
        return _go(_page_of(p, config))
    store = request.app.state.store
    prog = S.progress(store, p, config)
    if p.completed_at is None and not _complete(store, p, config, prog):
        prog = S.progress(store, p, config)  # an undo may have come first: show where they are
        return _html(
            P.not_done(
                config.title,
                prog.answers,
                config.quota_answers,
                prog.minutes,
                config.quota_minutes,
                base=ROOT,
            )
        )
    return _html(
        P.done(
            config.title,
            config.completion_code,
            config.redirect_url or None,
            base=ROOT,
            answers=prog.answers,
            minutes=prog.minutes,
        )
    )


def _complete(store: FeedbackStore, p: Participant, config: StudyConfig, prog: S.Progress) -> bool:
    """Stamp ``p`` completed (the code is shown) when they reached the quota: counted again in
    the transaction that stamps it, under the lock an undo takes, so an undo between ``prog``
    and the stamp is seen (not completed) and an undo after it is refused."""
    q = S.quota(p, config)
    return prog.done and q is not None and store.answers.complete_study(q)
