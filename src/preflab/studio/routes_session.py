"""Sign-in, who am I, and the run's progress as one annotator sees it."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response

from preflab.kinds import RATING, get_kind
from preflab.records import Annotator
from preflab.studio.auth import (
    COOKIE,
    check_throttle,
    current_annotator,
    failed_sign_in,
    lookup,
    public,
)
from preflab.studio.heartbeat import trainer_liveness
from preflab.studio.schemas import (
    Health,
    Instance,
    Liveness,
    LoggedOut,
    LoginBody,
    PublicAnnotator,
    Status,
    errors,
)
from preflab.studio.study_assign import participant_of

router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]


@router.get("/health")
def health() -> Health:
    """Liveness probe (public; says nothing about the run)."""
    return Health(ok=True, app="preflab-studio")


@router.post("/login", responses=errors(401, 413, 422, 429))
def login(request: Request, response: Response, body: LoginBody) -> PublicAnnotator:
    """Exchange a token (from the personal link) for an HttpOnly session cookie."""
    check_throttle(request)
    annotator = lookup(request.app.state.store, body.token)
    if annotator is None:
        failed_sign_in(request)
        raise HTTPException(
            401,
            "this token is not valid for this studio; ask the run's owner for a new link",
        )
    response.set_cookie(
        COOKIE,
        body.token,
        httponly=True,
        samesite="strict",
        secure=request.app.state.config.cookie_secure,
        path="/",
        max_age=30 * 24 * 3600,
    )
    return PublicAnnotator.model_validate(public(annotator))


@router.post("/logout")
def logout(response: Response) -> LoggedOut:
    """Forget the session cookie."""
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return LoggedOut(ok=True)


@router.get("/me", responses=errors(401))
def me(me: Me) -> PublicAnnotator:
    """Who you are signed in as."""
    return PublicAnnotator.model_validate(public(me))


@router.get("/status", responses=errors(401))
def status(request: Request, me: Me) -> Status:
    """The trainer's latest round and your progress in it."""
    store = request.app.state.store
    rounds = store.rounds.all()
    last = rounds[-1] if rounds else None
    rnd = last["round"] if last else None
    answered_round, answered_total = store.answers.counts_of(me.id, round=rnd)
    times = [
        t for t in (last and last["published_at"], store.rounds.cursor_updated_at("trainer")) if t
    ]
    waiting = bool(last and last["status"] == "waiting")
    wait = last["metrics"] if last else {}
    study = participant_of(store, me)  # a participant's queue is their study's assignment
    by_kind = (  # per kind, counted in the store: a participant's from their study's queue
        request.app.state.assigner.counts(store, me, study[1], kind=None)
        if study is not None
        else store.people.counts(me.id, repeat_share=request.app.state.config.repeat_share)
    )
    views: Counter[str] = Counter()
    for name, n in by_kind.items():
        views[get_kind(name).studio_view] += n
    return Status(
        round=rnd,
        status=last["status"] if last else None,
        env_id=last["env_id"] if last else None,
        env_steps=last["env_steps"] if last else 0,
        total_steps=last["total_steps"] if last else 0,
        n_labels=(last["metrics"].get("n_labels") if last else None),
        answered_round=answered_round,
        answered_total=answered_total,
        waiting=sum(by_kind.values()),
        trainer_updated_at=max(times) if times else None,
        round_answered=wait.get("answered") if waiting else None,
        round_asked=wait.get("asked") if waiting else None,
        to_rate=0
        if study is not None  # a study asks only its pairs
        else len(store.queries.open_for(me.id, kind=RATING.name, limit=10)),
        views=dict(views),
    )


@router.get("/instance")
def instance(request: Request) -> Instance:
    """Which studio process answers: the random id it was started with (public). The trainer
    that started the studio compares it with its own, so that it never talks to another run's
    studio left on the same port."""
    return Instance(instance=request.app.state.config.instance)


@router.get("/liveness", responses=errors(401))
def liveness(request: Request, me: Me) -> Liveness:
    """Whether the trainer is alive (from its heartbeat in the store); pages poll it and say
    "trainer stopped" when it is not."""
    store = request.app.state.store
    seen = trainer_liveness(store, stale_s=request.app.state.config.trainer_stale_s)
    rounds = store.rounds.all()
    finished = bool(rounds) and rounds[-1]["status"] == "finished"
    return Liveness.model_validate({**seen, "finished": finished})
