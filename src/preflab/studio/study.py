"""A study with real people (issue #61), without HTTP: the study link, joining and resuming by it
(with the recruiting platform's ids), where a participant stands (consent, practice, labelling,
done) and their progress against the quota. The pages are :mod:`preflab.studio.routes_study`."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from preflab.errors import ConflictError, DataError
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.store.answers import Quota
from preflab.store.studies import Participant, Study
from preflab.studio.study_config import PID_RE, StudyConfig

STUDY_ID = "main"
"""The id of a run's study (``preflab studio study`` manages this one)."""
PLATFORM_KEYS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "pid")
"""The platform ids a study link carries into the data: Prolific's three and a generic pid."""
PERSON_KEYS = ("PROLIFIC_PID", "pid")
"""The ids that name the person (the same one resumes the same identity)."""
SLUG_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
"""What a study link's secret looks like."""


class LinkError(DataError):
    """A study link that no study of this studio has (mistyped or forged)."""


class RevokedError(DataError):
    """The owner revoked this participant: the study link never admits them again."""


REVOKED_TEXT = (
    "Your participation in this study was ended by the researcher; contact them if you think "
    "this is a mistake. This study link no longer lets you in."
)
"""What a revoked participant reads on every study page."""


def revoked(store: FeedbackStore, p: Participant) -> bool:
    """Whether the owner revoked ``p`` (POST /api/owner/annotators/ID/revoke)."""
    return store.annotators.is_revoked(p.annotator_id)


@dataclass(frozen=True)
class Joined:
    """The outcome of opening a study link."""

    participant: Participant
    token: str
    """Their new (or kept) study key: the session cookie's value."""
    resumed: bool
    """An identity that had joined before (by cookie or by platform id)."""
    rekeyed: bool = False
    """It came back on another browser and got a new key: the old cookie (and studio token)
    must stop working at once."""


def new_secret() -> str:
    """A fresh study link secret (the part after /s/)."""
    return secrets.token_urlsafe(18)


def create(
    store: FeedbackStore,
    config: StudyConfig,
    *,
    study_id: str = STUDY_ID,
    secret: str | None = None,
) -> str:
    """Create the study with a link (replacing any link it had): ``secret``, or a new one
    (:func:`new_secret`); returns the secret."""
    secret = secret or new_secret()
    store.studies.put(study_id, link_hash=hash_token(secret), config=config.to_json())
    return secret


def load(store: FeedbackStore, study_id: str = STUDY_ID) -> tuple[Study, StudyConfig] | None:
    """The stored study and its config, or None."""
    study = store.studies.get(study_id)
    return None if study is None else (study, StudyConfig.from_json(dict(study.config)))


def by_secret(store: FeedbackStore, secret: str) -> tuple[Study, StudyConfig]:
    """The study whose link has this secret; :class:`LinkError` otherwise."""
    study = store.studies.by_link(hash_token(secret)) if SLUG_RE.match(secret) else None
    if study is None:
        raise LinkError(
            "this study link is not valid: check that you copied the whole link from the "
            "study's page, or ask the researcher for the link"
        )
    return study, StudyConfig.from_json(dict(study.config))


def platform_ids(params: Mapping[str, str]) -> dict[str, str]:
    """The platform ids among a link's query parameters, checked (DataError naming the bad
    one and what it should look like)."""
    out: dict[str, str] = {}
    for key in PLATFORM_KEYS:
        value = params.get(key)
        if value is None or value == "":
            continue
        if not PID_RE.match(value):
            raise DataError(
                f"the link's {key} {value[:40]!r} is not a platform id (1 to 128 letters, "
                "digits or . _ - : @); open the study from your platform's page again"
            )
        out[key] = value
    return out


def person_id(ids: Mapping[str, str]) -> str | None:
    """The id naming the person (Prolific's PROLIFIC_PID, else the generic pid)."""
    for key in PERSON_KEYS:
        if key in ids:
            return ids[key]
    return None


def join(
    store: FeedbackStore,
    study: Study,
    config: StudyConfig,
    params: Mapping[str, str],
    *,
    cookie_key: str | None,
) -> Joined:
    """Open the study link: resume the person of the session cookie (``cookie_key``) or of the
    platform id, or enrol a new pseudonymous participant. Raises DataError for bad platform
    ids, :class:`~preflab.store.studies.StudyClosedError` / ``StudyFullError`` for a new person
    when enrolment is closed or full, :class:`RevokedError` for a person the owner revoked."""
    ids = platform_ids(params)
    pid = person_id(ids)
    if cookie_key:
        mine = store.studies.by_key(hash_token(cookie_key))
        if mine is not None and mine.study_id == study.id and pid in (None, mine.platform_pid):
            if revoked(store, mine):
                raise RevokedError(REVOKED_TEXT)
            return Joined(mine, cookie_key, resumed=True)
    if pid is not None:
        known = store.studies.by_pid(study.id, pid)
        if known is not None:
            return _rekey(store, known)
    aid = "p-" + uuid.uuid4().hex[:16]
    token = secrets.token_urlsafe(24)
    try:
        store.studies.enrol(
            study.id,
            aid,
            key_hash=hash_token(token),
            platform=ids,
            platform_pid=pid,
            cap=config.cap,
        )
    except ConflictError:
        known = store.studies.by_pid(study.id, pid) if pid is not None else None
        if known is None:
            raise
        return _rekey(store, known)  # the same person opened the link twice at once
    joined = store.studies.participant(aid)
    assert joined is not None
    return Joined(joined, token, resumed=False)


def _rekey(store: FeedbackStore, p: Participant) -> Joined:
    """A returning person on a new browser: a new key (the old cookie stops working). A revoked
    person is refused (:class:`RevokedError`); their token stays refused even when a revoke
    lands between this check and the new key (the store refuses revoked annotators' tokens)."""
    if revoked(store, p):
        raise RevokedError(REVOKED_TEXT)
    token = secrets.token_urlsafe(24)
    ready = p.consent_at is not None and p.declined_at is None
    store.studies.rekey(
        p.annotator_id, hash_token(token), token_hash=hash_token(token) if ready else None
    )
    fresh = store.studies.participant(p.annotator_id)
    assert fresh is not None
    return Joined(fresh, token, resumed=True, rekeyed=True)


def consent_sha256(config: StudyConfig) -> str:
    """SHA-256 of the consent text (stored with an acceptance: which text was accepted)."""
    return hashlib.sha256(config.consent_md.encode()).hexdigest()


# ----- where a participant stands -------------------------------------------------------------------
@dataclass(frozen=True)
class Progress:
    """A participant's progress against the study's quota."""

    answers: int
    """Answers that count (undone ones left out), attention checks included."""
    minutes: float
    """Minutes on task: from the end of the practice (or consent) to their last answer."""
    quota_answers: int
    quota_minutes: float
    done: bool
    """They reached the answer or the time quota."""


def progress(store: FeedbackStore, p: Participant, config: StudyConfig) -> Progress:
    """How far ``p`` is (the last answer's time bounds time on task)."""
    _r, n = store.answers.counts_of(p.annotator_id, round=None)
    last = store.answers.by_annotator(p.annotator_id, limit=1)
    start = started_at(p)
    end = last[0][1].created_at if last else start
    minutes = max(0.0, (end - start) / 60.0) if start and end else 0.0
    limit = deadline(p, config)
    done = (config.quota_answers > 0 and n >= config.quota_answers) or (
        limit is not None and bool(last) and last[0][1].created_at >= limit
    )
    return Progress(n, minutes, config.quota_answers, config.quota_minutes, done)


def started_at(p: Participant) -> float | None:
    """When ``p``'s time on task starts: the end of the practice, or consent without one."""
    return p.practice_done_at or p.consent_at


def deadline(p: Participant, config: StudyConfig) -> float | None:
    """When ``p``'s time quota runs out (:func:`started_at` plus ``quota_minutes``): once their
    latest answer came at or after it, they are done. None without a time quota or a start."""
    start = started_at(p)
    if config.quota_minutes <= 0 or not start:
        return None
    return start + config.quota_minutes * 60.0


def quota(p: Participant, config: StudyConfig) -> Quota | None:
    """``p``'s quota as the store checks it where it stores an answer (and where it stamps the
    completion, :meth:`~preflab.store.answers.Answers.complete_study`); None without one."""
    limit = deadline(p, config)
    if config.quota_answers <= 0 and limit is None:
        return None
    return Quota(p.annotator_id, max(0, config.quota_answers), deadline=limit)


def step(p: Participant, config: StudyConfig) -> str:
    """Which page a participant belongs on: 'declined', 'consent', 'instructions' (practice
    not finished), 'studio' (labelling) or 'done' (completed)."""
    if p.declined_at is not None:
        return "declined"
    if p.consent_at is None:
        return "consent"
    if p.completed_at is not None:
        return "done"
    if config.practice_pairs > 0 and p.practice_done_at is None:
        return "instructions"
    return "studio"


def mark_practice_done_if_none(store: FeedbackStore, p: Participant, config: StudyConfig) -> None:
    """A study without practice pairs: labelling starts at consent."""
    if config.practice_pairs == 0 and p.practice_done_at is None:
        store.studies.practice_done(p.annotator_id)


def now() -> float:
    return time.time()
