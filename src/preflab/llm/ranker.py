"""A synthetic noisy ranker: answers like an error-prone language model, from the ground truth.

Each answer is the ground-truth ranking (from :func:`preflab.llm.progress.true_preference`)
with probability ``accuracy`` and the opposite otherwise, independently per query; a tie is
answered yes or no at random. Asking each pair ``n_queries`` times and averaging gives the
confidence (paper 004 §5.4.1, Fig. 7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds.registry import pair_of
from preflab.llm.progress import true_preference
from preflab.records import Judgement, Query, Segment, new_id
from preflab.sources.immediate import PendingJudgements

TruthFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(obs_a (n, D), obs_b (n, D)) → ground-truth P(a ≻ b) in {0, 0.5, 1}, shape (n,)."""


def noisy_answers(
    truth: np.ndarray, accuracy: float, n_queries: int, rng: np.random.Generator
) -> np.ndarray:
    """Answers P(a ≻ b) ∈ {0, 1} of shape (n, n_queries): correct with prob. ``accuracy``."""
    _check(accuracy, n_queries)
    t = np.asarray(truth, dtype=np.float64).reshape(-1)
    if np.any((t != 0) & (t != 1) & (t != 0.5)):
        raise DataError("ground-truth preferences must be 0, 0.5 or 1")
    correct = rng.random((t.shape[0], n_queries)) < accuracy
    coin = (rng.random((t.shape[0], n_queries)) < 0.5).astype(np.float64)
    right = np.where(correct, t[:, None], 1.0 - t[:, None])
    return np.where(t[:, None] == 0.5, coin, right)


def noisy_confidences(
    truth: np.ndarray, accuracy: float, n_queries: int, rng: np.random.Generator
) -> np.ndarray:
    """Soft labels: the share of ``n_queries`` noisy answers preferring a, shape (n,)."""
    return noisy_answers(truth, accuracy, n_queries, rng).mean(axis=1)


def _check(accuracy: float, n_queries: int) -> None:
    if not 0.5 <= accuracy <= 1.0:
        raise ConfigError(
            f"accuracy must be in [0.5, 1] (share of correct rankings), got {accuracy}"
        )
    if n_queries < 1:
        raise ConfigError(f"n_queries must be ≥ 1, got {n_queries}")


class NoisyRanker:
    """FeedbackSource answering pair queries with a chosen accuracy, ``n_queries`` times each."""

    def __init__(
        self,
        env_id: str,
        *,
        accuracy: float,
        n_queries: int = 1,
        rng: np.random.Generator,
        truth_fn: TruthFn | None = None,
        annotator_id: str | None = None,
    ) -> None:
        _check(accuracy, n_queries)
        self.env_id = env_id
        self.accuracy = accuracy
        self.n_queries = n_queries
        self.rng = rng
        self.truth_fn: TruthFn = truth_fn or (lambda a, b: true_preference(a, b, env_id))
        self.annotator_id = annotator_id or f"ranker:{accuracy:.2f}"
        self._pending = PendingJudgements("noisy_ranker")

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        pairs = []
        for q in queries:
            a, b = pair_of(q, "the ranker")
            try:
                pairs.append((q, segments[a], segments[b]))
            except KeyError as exc:
                raise DataError(
                    f"query {q.id} names segment {exc} that was not passed to submit"
                ) from None
        if not pairs:
            return
        obs_a = np.stack([a.obs[-1] for _, a, _ in pairs])
        obs_b = np.stack([b.obs[-1] for _, _, b in pairs])
        truth = self.truth_fn(obs_a, obs_b)
        answers = noisy_answers(truth, self.accuracy, self.n_queries, self.rng)
        for (q, _, _), t, row in zip(pairs, truth, answers, strict=True):
            for k, p in enumerate(row):
                self._pending.add(
                    Judgement(
                        id=new_id("j"),
                        query_id=q.id,
                        annotator_id=self.annotator_id,
                        source="synthetic",
                        p=float(p),
                        response_time_s=0.0,
                        meta={"truth": float(t), "sample": k, "accuracy": self.accuracy},
                    )
                )

    def collect(self) -> list[Judgement]:
        return self._pending.collect()

    # ----- FeedbackSource state ------------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Generator state and uncollected judgements (JSON-serialisable)."""
        return self._pending.state(self.rng)

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (of a source built with the same arguments)."""
        self._pending.load_state(state, self.rng)
