"""What every source that answers at once shares: the judgements nobody collected yet.

A synthetic teacher, a simulated crowd, a decision maker, an LLM judge and a noisy ranker all
answer in ``submit`` and hand the answers out in ``collect``. Each holds a
:class:`PendingJudgements` for that queue and for the parts of its ``state()`` every such
source has (its kind, its generator's state, the uncollected judgements); the source itself
keeps only how it answers and whatever else its state needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from preflab.records import Judgement
from preflab.sources.base import check_state, pending_from_json, pending_json, restore_rng, rng_json


class PendingJudgements:
    """Judgements a source made in ``submit`` that ``collect`` has not handed out yet."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        """The ``kind`` written into, and required of, the source's state."""
        self._items: list[Judgement] = []

    def __len__(self) -> int:
        return len(self._items)

    def add(self, judgement: Judgement) -> None:
        """Queue one judgement for the next :meth:`collect`."""
        self._items.append(judgement)

    def extend(self, judgements: Iterable[Judgement]) -> None:
        """Queue judgements for the next :meth:`collect`, in order."""
        self._items.extend(judgements)

    def collect(self) -> list[Judgement]:
        """Every queued judgement, oldest first; the queue is empty afterwards."""
        out, self._items = self._items, []
        return out

    def state(self, rng: np.random.Generator | None = None, **extra: Any) -> dict[str, Any]:
        """``{"kind", "rng" (when the source draws random numbers), **extra, "pending"}``:
        JSON-serialisable when ``extra`` is."""
        out: dict[str, Any] = {"kind": self.kind}
        if rng is not None:
            out["rng"] = rng_json(rng)
        out.update(extra)
        out["pending"] = pending_json(self._items)
        return out

    def load_state(
        self,
        state: Mapping[str, Any],
        rng: np.random.Generator | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        """Check that ``state`` is this kind's with the ``extra`` keys, set ``rng`` (when given)
        and the queue from it; the source reads its ``extra`` keys itself."""
        keys = (*(("rng",) if rng is not None else ()), *extra, "pending")
        check_state(state, self.kind, keys)
        if rng is not None:
            restore_rng(rng, state["rng"])
        self._items = pending_from_json(state["pending"])
