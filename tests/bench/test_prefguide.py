"""The Pref-GUIDE bench's two correlations (the run log's ``reward_corr`` and ``rating_corr``),
on hand-made items whose answer is r = 1 exactly, and which a misaligned reading breaks."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
import torch

from preflab.aggregate import Feedback
from preflab.records import Query, Rating, Segment
from preflab.reward import RewardEnsemble, SegmentBatch
from preflab_bench.prefguide import item_rating_correlation, step_correlation


class FirstFeature:
    """A stand-in reward model: the reward of a step is its first observation feature."""

    def reward(self, obs: torch.Tensor, acts: torch.Tensor) -> np.ndarray:
        assert obs.shape[0] == acts.shape[0]
        return obs[:, 0].numpy().astype(np.float64)


def _segment(sid: str, obs0: np.ndarray, true: np.ndarray) -> Segment:
    n = len(obs0)
    obs = np.stack([obs0, np.full(n, -7.0)], axis=1)
    return Segment(id=sid, obs=obs, acts=np.zeros((n, 1)), true_rewards=true)


def test_step_correlation_reads_the_real_steps_in_order() -> None:
    """Three items of 3, 1 and 2 steps, padded to 3 with garbage observations; the true reward
    of a real step is 2·obs[0] + 1, so a model whose reward is obs[0] has r = 1 with it. The
    true rewards come as the caller passes them: the items' real steps, item after item."""
    rng = np.random.default_rng(0)
    lengths = (3, 1, 2)
    feats = [rng.normal(size=n) for n in lengths]
    segs = [_segment(f"i{k}", f, 2 * f + 1) for k, f in enumerate(feats)]
    items = SegmentBatch.from_segments(segs)
    pad = items.mask == 0
    assert int(pad.sum()) == 3
    items.obs[pad] = torch.from_numpy(rng.normal(50.0, 30.0, size=(3, 2)).astype(np.float32))
    true = np.concatenate([s.true_rewards for s in segs])
    model = cast(RewardEnsemble, FirstFeature())
    assert step_correlation(model, items, true) == pytest.approx(1.0, abs=1e-6)
    # the same steps, items in another order: what a misaligned reading would pair them with
    shuffled = np.concatenate([segs[k].true_rewards for k in (2, 0, 1)])
    assert step_correlation(model, items, shuffled) < 0.9


def _rating(step: int, value: float, who: str = "e", t: float = 0.0) -> Rating:
    return Rating(annotator_id=who, stream_id="stream", step=step, t=t + step, value=value)


def _stream_feedback(ratings: list[Rating]) -> Feedback:
    """One rating stream of four items (2, 3, 2 and 2 steps) whose mean true rewards are
    1, 5, 2 and 4."""
    means, lengths = (1.0, 5.0, 2.0, 4.0), (2, 3, 2, 2)
    segs = {
        f"i{k}": Segment(
            id=f"i{k}",
            obs=np.zeros((n, 2)),
            acts=np.zeros((n, 1)),
            true_rewards=m + np.linspace(-0.5, 0.5, n),  # mean m, not constant
        )
        for k, (m, n) in enumerate(zip(means, lengths, strict=True))
    }
    q = Query(id="stream", kind="rating", a=tuple(segs))
    return Feedback(queries={q.id: q}, judgements=(), ratings=ratings, segments=segs)


def test_item_rating_correlation_pairs_each_rated_item_with_its_own_true_reward() -> None:
    """Evaluator e rates items 0, 2 and 3 (steps 0-1, 5-6, 7-8; item 1, steps 2-4, unrated),
    item 3 twice: its value is the mean. The values 0.2·m − 0.5 are linear in the items' mean
    true rewards m = 1, 2, 4, so r = 1; paired with the first three items' means (1, 5, 2), as a
    reading that forgot the unrated item would, r would be 0.05. Another evaluator's
    ratings of item 1 are not e's."""
    ratings = [
        _rating(1, -0.3),
        _rating(3, 0.9, who="other"),
        _rating(5, -0.1),
        _rating(7, 0.2),
        _rating(8, 0.4),
    ]
    fb = _stream_feedback(ratings)
    assert item_rating_correlation(fb, "e") == pytest.approx(1.0, abs=1e-12)
    assert np.corrcoef([-0.3, -0.1, 0.3], [1.0, 5.0, 2.0])[0, 1] < 0.2
    # one rating per item, all equal: no spread, no correlation
    flat = _stream_feedback([_rating(0, 0.5), _rating(5, 0.5)])
    assert np.isnan(item_rating_correlation(flat, "e"))
