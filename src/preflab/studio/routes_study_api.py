"""The study's JSON API (issue #61): a participant's progress for the studio page, and for the
owner the study's participants, their quality statistics and flags, exclusion, closing
enrolment and the payments table."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from preflab.records import Annotator
from preflab.studio import study as S
from preflab.studio.auth import current_annotator, owner
from preflab.studio.routes_owner import AnnotatorId
from preflab.studio.schemas import errors
from preflab.studio.study_assign import participant_of
from preflab.studio.study_report import payments, report
from preflab.studio.study_schemas import (
    Enrolment,
    EnrolmentBody,
    Exclusion,
    ExclusionBody,
    OwnerStudy,
    Payments,
    StudyMe,
    StudyPerson,
)

router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]
Owner = Annotated[Annotator, Depends(owner)]


@router.get("/study/me", responses=errors(401))
def study_me(request: Request, me: Me) -> StudyMe:
    """Your standing in the run's study: answers and minutes against the quota, and whether
    you are done (then the completion page has your code)."""
    store = request.app.state.store
    found = participant_of(store, me)
    if found is None:
        return StudyMe(participant=False)
    p, config = found
    prog = S.progress(store, p, config)
    return StudyMe(
        participant=True,
        answers=prog.answers,
        quota_answers=config.quota_answers,
        minutes=round(prog.minutes, 2),
        quota_minutes=config.quota_minutes,
        done=prog.done or p.completed_at is not None,
        step=S.step(p, config),
    )


def _owner_study(request: Request) -> OwnerStudy:
    store = request.app.state.store
    fps = float(request.app.state.config.default_fps)
    r = report(store, fps=fps)
    if r is None:
        return OwnerStudy(exists=False)
    stats = {s.annotator_id: s for s in r.stats.people}
    people = []
    for p in r.participants:
        s = stats[p.annotator_id]
        people.append(
            StudyPerson(
                id=p.annotator_id,
                platform=dict(p.platform),
                step=S.step(p, r.config),
                answers=s.answers,
                gold_answered=s.gold_answered,
                gold_accuracy=s.gold_accuracy,
                agreement=s.agreement,
                sml_weight=s.sml_weight,
                sml_accuracy=s.sml_accuracy,
                median_response_s=s.median_response_s,
                left_share=s.left_share,
                minutes=round(r.minutes.get(p.annotator_id, 0.0), 2),
                flags=list(s.flags),
                excluded=p.excluded_at is not None,
                excluded_reason=p.excluded_reason,
                completed=p.completed_at is not None,
            )
        )
    c = r.config
    return OwnerStudy(
        exists=True,
        title=c.title,
        closed=r.study.closed_at is not None,
        cap=c.cap,
        overlap=c.overlap,
        gold_rate=c.gold_rate,
        gold_pairs=len(store.studies.gold()),
        quota_answers=c.quota_answers,
        clip_s=round(r.clip_s, 3),
        joined=len(r.participants),
        consented=sum(p.consent_at is not None for p in r.participants),
        completed=sum(p.completed_at is not None for p in r.participants),
        aggregator=r.stats.aggregator,
        alpha=r.stats.alpha,
        alpha_low=r.stats.alpha_low,
        alpha_high=r.stats.alpha_high,
        alpha_units=r.stats.alpha_units,
        crowd_accuracy=r.stats.crowd_accuracy,
        labels_per_hour=r.stats.labels_per_hour,
        people=people,
    )


@router.get("/owner/study", responses=errors(401, 403))
async def owner_study(request: Request, me: Owner) -> OwnerStudy:
    """The run's study: its settings, participants (platform ids, step, answers, attention-check
    accuracy, agreement with the crowd's label, SML weight, median response time, time on task,
    flags) and Krippendorff's α with a bootstrap interval; ``exists`` false without a study."""
    return await run_in_threadpool(_owner_study, request)


def _study_or_404(request: Request) -> str:
    loaded = S.load(request.app.state.store)
    if loaded is None:
        raise HTTPException(
            404, "this run has no study; create one with preflab studio study RUN_DIR"
        )
    return loaded[0].id


@router.post("/owner/study/enrolment", responses=errors(401, 403, 404, 413, 422))
def set_enrolment(request: Request, me: Owner, body: EnrolmentBody) -> Enrolment:
    """Open or close the study to new people (who joined may go on)."""
    sid = _study_or_404(request)
    request.app.state.store.studies.set_closed(sid, not body.open)
    return Enrolment(closed=not body.open)


@router.post(
    "/owner/study/people/{annotator_id}/exclusion", responses=errors(401, 403, 404, 413, 422)
)
def set_exclusion(
    request: Request, me: Owner, annotator_id: AnnotatorId, body: ExclusionBody
) -> Exclusion:
    """Exclude a participant (their answers stop counting in the crowd's labels, α and the
    trainer's next fit) or take them back."""
    _study_or_404(request)
    store = request.app.state.store
    if store.studies.participant(annotator_id) is None:
        raise HTTPException(
            404, f"no participant {annotator_id!r} in this study; see GET /api/owner/study"
        )
    if body.excluded:
        store.studies.exclude(annotator_id, body.reason or "excluded by the owner")
    else:
        store.studies.include(annotator_id)
    return Exclusion(id=annotator_id, excluded=body.excluded)


@router.get("/owner/study/payments", responses=errors(401, 403, 404))
def get_payments(request: Request, me: Owner) -> Payments:
    """The payments table: platform ids, time on task, answers counted, completion code shown
    (also ``preflab studio study RUN_DIR --payments FILE.csv``)."""
    _study_or_404(request)
    r = report(request.app.state.store, n_boot=1)
    assert r is not None
    return Payments.model_validate({"rows": payments(r)})
