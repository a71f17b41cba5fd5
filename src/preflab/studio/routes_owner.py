"""Owner-only endpoints: overview of annotators and rounds, new annotators, export."""

from __future__ import annotations

import io
import secrets
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from preflab.records import Annotator
from preflab.studio.auth import owner
from preflab.studio.owner_stats import agreement, latest_votes, overview_rows
from preflab.studio.schemas import Invite, NewAnnotatorBody, Overview, errors

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
    judgements = [j for _s, j in store.judgements()]  # undone ones left out
    _agree, pairs = agreement(latest_votes(judgements))
    return {
        "annotators": overview_rows(store.annotators(), store.activity(), judgements),
        "agreement_pairs": pairs,
        "rounds": round_rows(store.rounds()),
    }


@router.post("/annotators", status_code=201, responses=errors(401, 403, 413, 422))
def add_annotator(request: Request, me: Owner, body: NewAnnotatorBody) -> Invite:
    """Create an annotator and return their personal link (the token is shown only now)."""
    token = secrets.token_urlsafe(24)
    aid = "h-" + uuid.uuid4().hex[:12]
    request.app.state.store.add_annotator(
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
    """A zip of the open-format export (:func:`preflab.exporting.export_run`, the same files
    as ``preflab export``): undone judgements left out, labels from the ones that count,
    real-time ratings in ratings.parquet."""
    from preflab.exporting import export_run

    store = request.app.state.store
    buf = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="preflab-export-") as tmp:
        export_run(store, tmp, source_run="studio")
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(Path(tmp).iterdir()):
                zf.write(f, f"preflab-export/{f.name}")
    return Response(
        buf.getvalue(),
        media_type="application/zip",
        headers={"content-disposition": 'attachment; filename="preflab-export.zip"'},
    )
