"""GET /api/owner/routing (issue 58): a routed run's split, live, for the Owner page.

The trainer and the studio are separate processes that share the store: a router with people in
the studio publishes its report (:meth:`preflab.sources.routing.router.RoutingSource.
routing_report`) into the store setting :data:`~preflab.sources.routing.router.ROUTING_SETTING`
after each submit and each collect that brought people's answers; this route reads it. A run
that does not route has no such setting: ``routes`` is false and the page shows no section.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from preflab.records import Annotator
from preflab.studio.auth import owner
from preflab.studio.schemas import errors

router = APIRouter(prefix="/api/owner")
Owner = Annotated[Annotator, Depends(owner)]
_OUT = ConfigDict(extra="ignore")
ROUTING_SETTING = "routing"
"""The store setting the router writes (``preflab.sources.routing.router.ROUTING_SETTING``, the
same name; not imported: the router's package pulls in torch, the studio does not need it)."""


class RoutingAccuracy(BaseModel):
    """The AI's accuracy against people on the calibration queries, and the threshold it sets."""

    model_config = _OUT
    records: int = Field(description="calibration queries both the AI and people answered")
    agreed: int = Field(description="of those, where the AI agreed with people")
    accuracy: float | None = Field(description="agreed / records (None before any)")
    interval: list[float | None] = Field(description="Wilson interval [low, high] at `level`")
    level: float
    threshold: float | None = Field(
        description="the AI's confidence threshold in force (None: it does not answer alone yet)"
    )
    target_error: float = Field(
        description="the label error the user stated (--route.target-error)"
    )


class OwnerRouting(BaseModel):
    """GET /api/owner/routing."""

    model_config = _OUT
    routes: bool = Field(description="false when the run does not route (no section is shown)")
    ai: str = ""
    people: str = ""
    labels: dict[str, int] = Field(
        default_factory=dict, description="labels handed out per answerer"
    )
    asked: dict[str, int] = Field(default_factory=dict, description="budget used per answerer")
    budgets: dict[str, int | None] = Field(
        default_factory=dict, description="budget per answerer (None: no limit)"
    )
    reasons: dict[str, int] = Field(default_factory=dict, description="queries routed, by reason")
    unrouted: int = 0
    calibration_share: float | None = None
    ai_accuracy: RoutingAccuracy | None = None
    ai_true_accuracy: float | None = Field(
        default=None, description="the simulated judge's true accuracy (known only for it)"
    )
    updated_at: float | None = Field(default=None, description="when the trainer published it")


@router.get("/routing", responses=errors(401, 403))
def routing(request: Request, me: Owner) -> OwnerRouting:
    """The routing split and the AI's measured accuracy with its interval, as the trainer last
    published them; ``routes: false`` when the run does not route."""
    value: Any = request.app.state.store.settings.get(ROUTING_SETTING)
    if not isinstance(value, dict):
        return OwnerRouting(routes=False)
    try:
        return OwnerRouting.model_validate({**value, "routes": True})
    except ValidationError:  # a report of another version: say it routes, show what is sure
        return OwnerRouting(routes=True, updated_at=value.get("updated_at"))
