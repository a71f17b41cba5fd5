"""Owner-only endpoints: overview of annotators and rounds, new annotators, export."""

from __future__ import annotations

import io
import secrets
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi import Path as Path_

from preflab.records import Annotator
from preflab.studio.auth import current_annotator, owner, role_of
from preflab.studio.owner_stats import activity_rows, latest_reward_accuracy, owner_overview
from preflab.studio.schemas import (
    ID_PATTERN,
    FinishState,
    Invite,
    NewAnnotatorBody,
    Overview,
    OwnerActivity,
    Revoked,
    Task,
    TaskBody,
    errors,
)

router = APIRouter(prefix="/api/owner")
Owner = Annotated[Annotator, Depends(owner)]


def round_rows(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat metrics rows: the trainer's metrics plus round, status, env and step counts."""
    out = []
    for r in rounds:
        row = dict(r.get("metrics") or {})
        row.update({k: r[k] for k in ("round", "status", "env_id", "env_steps", "total_steps")})
        row["published_at"] = r["published_at"]
        out.append(row)
    return out


@router.get("/overview", response_model=Overview, responses=errors(401, 403))
def overview(request: Request, me: Owner) -> dict[str, Any]:
    """Every annotator with counts, agreement and SML weight; every published round."""
    store = request.app.state.store
    judgements = [j for _s, j in store.answers.judgements()]  # undone ones left out
    rows, pairs = owner_overview(store.annotators.all(), store.annotators.activity(), judgements)
    return {
        "annotators": rows,
        "agreement_pairs": pairs,
        "rounds": round_rows(store.rounds.all()),
    }


@router.post("/annotators", status_code=201, responses=errors(401, 403, 413, 422))
def add_annotator(request: Request, me: Owner, body: NewAnnotatorBody) -> Invite:
    """Create an annotator and return their personal link (the token is shown only now)."""
    token = secrets.token_urlsafe(24)
    aid = "h-" + uuid.uuid4().hex[:12]
    request.app.state.store.annotators.add(
        Annotator(id=aid, source="human", name=body.name, meta={"role": body.role}), token=token
    )
    base = str(request.base_url).rstrip("/")
    return Invite(
        id=aid, name=body.name, role=body.role, token=token, link=f"{base}/#token={token}"
    )


@router.get(
    "/export",
    response_class=Response,
    responses={
        200: {
            "description": "preflab-export.zip (attachment)",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        },
        **errors(401, 403),
    },
)
def export(request: Request, me: Owner) -> Response:
    """A zip of the open-format export (:func:`preflab.export.feedback.export_run`, the same files
    as ``preflab export``): undone judgements left out, labels from the ones that count,
    real-time ratings in ratings.parquet."""
    from preflab.export.feedback import export_run
    from preflab.runs.export import RunExportParts, run_export_parts
    from preflab.studio.study_report import export_files

    store = request.app.state.store
    run_dir = request.app.state.run_dir
    parts = run_export_parts(run_dir) if run_dir is not None else RunExportParts()
    buf = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="preflab-export-") as tmp:
        export_run(
            store,
            tmp,
            source_run="studio",
            aggregator=parts.aggregator,
            simulated=parts.simulated,
        )
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(Path(tmp).iterdir()):
                zf.write(f, f"preflab-export/{f.name}")
            # a study's payments table and agreement statistics (issue #61), when there is one
            for name, text in export_files(store, fps=request.app.state.config.default_fps).items():
                zf.writestr(f"preflab-export/{name}", text)
    return Response(
        buf.getvalue(),
        media_type="application/zip",
        headers={"content-disposition": 'attachment; filename="preflab-export.zip"'},
    )


# ----- task instructions, activity, revoke, finish now (issue #25) -----------------------------
task_router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]
AnnotatorId = Annotated[str, Path_(min_length=1, max_length=128, pattern=ID_PATTERN)]


def task_of(store: Any) -> dict[str, Any]:
    """The run's task instructions {text, updated_at} (empty text when none were given)."""
    t = store.settings.get("task")
    if isinstance(t, dict):
        return {"text": str(t.get("text", "")), "updated_at": t.get("updated_at")}
    return {"text": t if isinstance(t, str) else "", "updated_at": None}


@task_router.get("/task", responses=errors(401))
def get_task(request: Request, me: Me) -> Task:
    """What the owner asked the agent to do, shown above the clips in every view."""
    return Task.model_validate(task_of(request.app.state.store))


@router.put("/task", responses=errors(401, 403, 413, 422))
def put_task(request: Request, me: Owner, body: TaskBody) -> Task:
    """Set (or, with empty text, clear) the task instructions every annotator sees."""
    text = body.text.strip()
    value = {"text": text, "updated_at": time.time(), "by": me.id}
    request.app.state.store.settings.set("task", value)
    return Task.model_validate(task_of(request.app.state.store))


@router.get("/activity", responses=errors(401, 403))
def activity(request: Request, me: Owner) -> OwnerActivity:
    """Per annotator: answers per minute, median response time, last active, revoked; the
    latest reward accuracy (when the env has a true reward); the task; 'Finish now' state."""
    store = request.app.state.store
    # one read of the judgements (undone ones included, for 'last active'); the ones that
    # count are those not undone
    everything = [j for _s, j in store.answers.judgements(include_retracted=True)]
    undone = store.answers.retracted_ids()
    counting = [j for j in everything if j.id not in undone]
    acc, acc_round = latest_reward_accuracy(store.rounds.all())
    finish = store.settings.get("finish")
    return OwnerActivity.model_validate(
        {
            "annotators": activity_rows(
                store.annotators.all(),
                counting,
                everything,
                now=time.time(),
                with_token=store.annotators.with_token(),
                revoked={**(store.settings.get("revoked") or {}), **store.annotators.revoked()},
            ),
            "reward_accuracy": acc,
            "reward_accuracy_round": acc_round,
            "task": task_of(store),
            "finish": {"by": str(finish["by"]), "at": float(finish["at"])}
            if isinstance(finish, dict) and "by" in finish and "at" in finish
            else None,
        }
    )


@router.post("/annotators/{annotator_id}/revoke", responses=errors(401, 403, 404, 409, 422))
def revoke(request: Request, me: Owner, annotator_id: AnnotatorId) -> Revoked:
    """Revoke an annotator's link at once and for good: neither the link nor a study link
    lets them in again (their answers so far stay and count)."""
    store = request.app.state.store
    target = store.annotators.get(annotator_id)
    if target is None:
        raise HTTPException(404, f"no annotator {annotator_id!r} in this run")
    if target.id == me.id or role_of(target) == "owner":
        raise HTTPException(409, "the owner's own link cannot be revoked here")
    # durable: no study link or stored token lets them in again until the owner gives them a
    # new link (Annotators.set_token)
    at = store.annotators.revoke_token(target.id, by=me.id)
    request.app.state.token_cache.forget(target.id)
    # one transaction: a concurrent revoke (another tab or worker) keeps its entry too
    store.settings.update_entry("revoked", target.id, {"by": me.id, "at": at})
    return Revoked(id=target.id, revoked_at=at)


@router.post("/finish", responses=errors(401, 403))
def finish_now(request: Request, me: Owner) -> FinishState:
    """Ask the trainer to end the run now (it finishes the round and writes its results).
    Pressing again keeps the first request."""
    store = request.app.state.store
    # one transaction: of two presses at once (two tabs or workers) the first one's stays
    kept = store.settings.setdefault(
        "finish", {"by": me.id, "at": time.time()}, keep=_is_finish_request
    )
    return FinishState(by=str(kept["by"]), at=float(kept["at"]))


def _is_finish_request(value: Any) -> bool:
    """Whether a stored "finish" setting is a whole request (who pressed it and when)."""
    return isinstance(value, dict) and "by" in value and "at" in value
