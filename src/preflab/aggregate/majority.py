"""Majority vote over a crowd's votes."""

from __future__ import annotations

from typing import cast

import numpy as np

from preflab.aggregate.votes import VotesLike, as_votes


def majority(votes: VotesLike) -> np.ndarray:
    """Majority label per query: sign of the column sum of ``votes``.

    ``votes`` is (annotators × queries) with +1 / −1 / 0 (0 = missing, skipped or tie; no
    vote). Ties — as many +1 as −1 votes, including queries nobody answered — give 0, never a
    coin flip, so a caller can tell them apart (the crowd adapter turns a tie among answers
    into p = 0.5 and a query without answers into no label). Returns int8 of shape (queries,).
    """
    m = as_votes(votes)
    s = np.asarray(m.sum(axis=0)).ravel()
    return cast(np.ndarray, np.sign(s).astype(np.int8))
