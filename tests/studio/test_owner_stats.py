"""The owner overview's numbers (:mod:`preflab.studio.owner_stats`): the annotators' votes and
their agreement counted once per overview, the rows and the pairwise table as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from preflab.kinds import PAIR
from preflab.records import Annotator, Judgement
from preflab.store import FeedbackStore
from preflab.studio import owner_stats, routes_owner
from preflab.studio.app import create_app
from preflab.studio.owner_stats import agreement, latest_votes, owner_overview, sml_weights
from preflab.testing.factories import make_segments

TOKEN = "tok-owner-" + "c" * 24
PEOPLE = ("owner", "h-ann", "h-bob", "h-cat", "h-dan")


def answered_store(path: Path) -> FeedbackStore:
    """A store whose four annotators (and an owner who did not answer) voted on 12 pairs,
    seeded: some answered twice (the latest counts), some skipped or tied."""
    rng = np.random.default_rng(5)
    store = FeedbackStore(path / "feedback.db", array_dir=path / "segments")
    segs = make_segments(8, rng=rng)
    store.segments.add(segs)
    queries = [PAIR.query(a.id, b.id) for a, b in list(combinations(segs, 2))[:12]]
    store.queries.add(queries)
    store.annotators.add(
        Annotator(id="owner", source="human", name="Owner", meta={"role": "owner"}), token=TOKEN
    )
    for who in PEOPLE[1:]:
        store.annotators.add(Annotator(id=who, source="human", name=who))
    choices = (0.0, 1.0, 1.0, 0.0, 0.5, None)
    store.answers.add(
        [
            Judgement(
                id=f"j{k}",
                query_id=queries[int(rng.integers(len(queries)))].id,
                annotator_id=PEOPLE[1 + int(rng.integers(4))],
                source="human",
                p=choices[int(rng.integers(len(choices)))],
                created_at=float(k),
            )
            for k in range(80)
        ]
    )
    return store


def counted(monkeypatch: pytest.MonkeyPatch, modules: tuple[Any, ...]) -> dict[str, int]:
    """How often ``latest_votes`` and ``agreement`` run from now on, through any of
    ``modules`` (each holds its own name for them)."""
    calls = {"latest_votes": 0, "agreement": 0}

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name] += 1
            return real(*args)

        return call

    for module in modules:
        for name, real in (("latest_votes", latest_votes), ("agreement", agreement)):
            monkeypatch.setattr(module, name, spy(name, real), raising=False)
    return calls


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FeedbackStore]:
    store = answered_store(tmp_path)
    yield store
    store.close()


def test_owner_overview_counts_votes_and_agreement_once_with_the_same_rows_and_pairs(
    store: FeedbackStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    judgements = [j for _s, j in store.answers.judgements()]
    annotators, activity = store.annotators.all(), store.annotators.activity()
    votes = latest_votes(judgements)
    agree, pairs = agreement(votes)
    weights = sml_weights(votes)
    assert len(pairs) == 6 and len(weights) == 4  # every two of the four shared a query
    calls = counted(monkeypatch, (owner_stats,))
    rows, got_pairs = owner_overview(annotators, activity, judgements)
    assert calls == {"latest_votes": 1, "agreement": 1}
    assert got_pairs == pairs
    assert [(r["id"], r["agreement"], r["sml_weight"]) for r in rows] == [
        (a.id, agree.get(a.id), weights.get(a.id)) for a in annotators
    ]


def test_the_overview_endpoint_counts_votes_and_agreement_once(
    store: FeedbackStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    judgements = [j for _s, j in store.answers.judgements()]
    want_rows, want_pairs = owner_overview(
        store.annotators.all(), store.annotators.activity(), judgements
    )
    app = create_app(store)
    app.state.groupwise.close()
    calls = counted(monkeypatch, (owner_stats, routes_owner))
    with TestClient(app) as c:
        r = c.get("/api/owner/overview", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    assert calls == {"latest_votes": 1, "agreement": 1}
    body = r.json()
    assert body["agreement_pairs"] == want_pairs
    assert [(a["id"], a["agreement"], a["sml_weight"]) for a in body["annotators"]] == [
        (a["id"], a["agreement"], a["sml_weight"]) for a in want_rows
    ]
