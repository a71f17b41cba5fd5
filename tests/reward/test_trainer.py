"""The trainer evaluates each member's distinct segments once per minibatch (issue #11, part 5)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from preflab.errors import ConfigError
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.reward.trainer import member_returns, unique_rows


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
        elements=st.integers(0, 9),
    )
)
def test_unique_rows_rebuilds_every_row_from_its_distinct_values(rows: np.ndarray) -> None:
    t = torch.from_numpy(rows)
    uniq, inv = unique_rows(t)
    assert torch.equal(torch.gather(uniq, 1, inv), t)
    widest = max(len(set(r.tolist())) for r in rows)
    assert uniq.shape == (rows.shape[0], widest)
    for m, r in enumerate(rows):
        assert set(uniq[m].tolist()) == set(r.tolist())  # padding repeats a value of its own row


def test_member_returns_equal_evaluating_every_repeat() -> None:
    """Returns and gradients match the naive evaluation of all 2B rows, repeats included."""
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(12, 7, 3)).astype(np.float32)
    acts = rng.normal(size=(12, 7, 2)).astype(np.float32)
    segments = SegmentBatch.from_arrays(obs, acts)
    rows = torch.from_numpy(rng.integers(0, 12, size=(3, 20)))  # many repeats per member
    assert any(len(set(r.tolist())) < 20 for r in rows)

    def grads(fn) -> tuple[torch.Tensor, list[torch.Tensor]]:
        ens = RewardEnsemble(3, 2, RewardConfig(members=3, hidden=(8, 8)), seed=0)
        ret = fn(ens)
        weights = torch.from_numpy(rng.normal(size=ret.shape).astype(np.float32))
        (ret * weights).sum().backward()
        return ret.detach(), [p.grad.clone() for p in ens.parameters()]

    state = rng.bit_generator.state
    got, got_g = grads(lambda ens: member_returns(ens, segments, rows))
    rng.bit_generator.state = state  # the same loss weights for both

    def naive(ens: RewardEnsemble) -> torch.Tensor:
        r = ens.forward_members(segments.obs[rows], segments.acts[rows])
        return (r * segments.mask[rows]).sum(-1)

    want, want_g = grads(naive)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_g, want_g, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_members_on_their_own_rows_equal_each_member_on_shared_rows() -> None:
    """The training path (one addmm chain per member) is the inference path (batched) per member."""
    ens = RewardEnsemble(4, 0, RewardConfig(members=3, hidden=(8, 6), use_actions=False), seed=1)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 11, 4)).astype(np.float32))
    per_member = ens.net(x)  # (3, 11): member m on x[m]
    assert per_member.shape == (3, 11)
    for m in range(3):
        torch.testing.assert_close(per_member[m], ens.net(x[m])[m])


@pytest.mark.parametrize(
    ("warm_min_steps", "warm"), [(None, True), (0, False), (0, True), (7, True)]
)
def test_step_floor_of_cold_and_warm_fits(warm_min_steps: int | None, warm: bool) -> None:
    """40 labels in batches of 16 are 3 steps per epoch: 2 epochs are 6 steps, under the floor
    of 50 (17 epochs, 51 steps); a warm fit uses warm_min_steps as its floor when it is set."""
    rng = np.random.default_rng(0)
    segments = SegmentBatch.from_arrays(rng.normal(size=(20, 5, 2)).astype(np.float32))
    a = rng.integers(0, 20, 40)
    labels = LabelBatch.from_arrays(a, (a + 1) % 20, rng.uniform(size=40))
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=2, hidden=(4,)), seed=0)
    cfg = FitConfig(epochs=2, batch_size=16, min_steps=50, warm_min_steps=warm_min_steps)
    report = RewardTrainer(ens, cfg).fit(segments, labels, rng, warm=warm)
    floor = 50 if not warm or warm_min_steps is None else warm_min_steps
    assert report.steps == 3 * max(2, -(-floor // 3))


def test_negative_step_floors_are_refused() -> None:
    with pytest.raises(ConfigError, match="warm_min_steps"):
        FitConfig(warm_min_steps=-1)
    with pytest.raises(ConfigError, match="min_steps"):
        FitConfig(min_steps=-5)
