"""QPA's hybrid experience replay: a share ω of every batch from the newest N episodes' worth of
transitions, the rest uniformly from the whole buffer; hand-computed cases and a real SAC."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from preflab.errors import ConfigError
from preflab.policy.hybrid_replay import (
    HybridReplayBuffer,
    hybrid_buffer_kwargs,
    hybrid_rows,
    note_labels_asked,
    recent_slots,
)
from preflab.policy.replay_config import ReplayConfig


def test_recent_slots_interleave_the_share_exactly() -> None:
    # position k is recent when floor((k+1)·ω) > floor(k·ω)
    assert recent_slots(8, 0.5).tolist() == [False, True] * 4
    assert np.flatnonzero(recent_slots(8, 0.25)).tolist() == [3, 7]
    assert np.flatnonzero(recent_slots(6, 1 / 3)).tolist() == [2, 5]
    assert not recent_slots(10, 0.0).any() and recent_slots(10, 1.0).all()
    # SBX samples all of a call's gradient steps at once and cuts the rows into batches of B:
    # every batch holds exactly B·ω recent rows
    slots = recent_slots(256 * 7, 0.5).reshape(7, 256)
    assert slots.sum(1).tolist() == [128] * 7
    assert recent_slots(255, 0.5).sum() == 127  # ⌊B·ω⌋ for an odd batch


def test_a_batchs_rows_by_hand() -> None:
    # 30 rows filled of 100, a window of the last 10 (rows 20 … 29), ω = 0.5, 1,000 rows drawn
    rows = hybrid_rows(
        np.random.default_rng(0), 1000, pos=30, full=False, buffer_size=100, window=10, ratio=0.5
    )
    recent, uniform = rows[1::2], rows[0::2]
    assert set(recent.tolist()) == set(range(20, 30))  # the window, all of it, nothing else
    assert uniform.min() >= 0 and uniform.max() <= 29 and len(set(uniform.tolist())) == 30
    # share of the batch inside the window: ω + (1 − ω)·10/30 = 2/3; the recent half is exact,
    # the uniform half is Binomial(500, 1/3) (sd ≈ 10.5): within 5 sd
    in_window = int((rows >= 20).sum())
    assert abs(in_window - (500 + 500 / 3)) < 5 * np.sqrt(500 * (1 / 3) * (2 / 3))


def test_the_window_wraps_around_a_full_buffer_and_is_capped_by_its_fill() -> None:
    rng = np.random.default_rng(1)
    rows = hybrid_rows(rng, 400, pos=3, full=True, buffer_size=50, window=10, ratio=1.0)
    assert set(rows.tolist()) == {43, 44, 45, 46, 47, 48, 49, 0, 1, 2}
    rows = hybrid_rows(rng, 400, pos=5, full=False, buffer_size=50, window=100, ratio=1.0)
    assert set(rows.tolist()) == {0, 1, 2, 3, 4}


def _buffer(**kw: object) -> HybridReplayBuffer:
    """A buffer of 1,000 rows on a 1-d space, rows 0 … 99 written with reward = row index."""
    box = spaces.Box(-1.0, 1.0, (1,), np.float32)
    args: dict = {"recent_rows": 10, "recent_ratio": 0.5, "seed": 3} | kw
    buf = HybridReplayBuffer(1000, box, box, device="cpu", **args)
    for t in range(100):
        o = np.zeros((1, 1), np.float32)
        buf.add(o, o, o, np.array([float(t)]), np.array([False]), [{}])
    return buf


def test_the_buffer_samples_hybrid_batches_until_the_labels_are_spent() -> None:
    buf = _buffer()
    got = buf.sample(64).rewards.numpy().ravel().astype(int)
    assert set(got[1::2].tolist()) <= set(range(90, 100))  # the 32 recent rows
    assert got[0::2].min() < 90  # the uniform rows reach back
    note_labels_asked(buf_agent(buf), asked=0, budget=12)
    assert not buf.active  # nothing asked yet (PEBBLE's pre-training): uniform
    note_labels_asked(buf_agent(buf), asked=11, budget=12)
    assert buf.active  # one label still to ask
    note_labels_asked(buf_agent(buf), asked=12, budget=12)
    assert not buf.active
    olds = [buf.sample(64).rewards.numpy().ravel()[1::2] for _ in range(5)]
    assert min(o.min() for o in olds) < 90  # uniform again: odd slots reach back too
    kept = _buffer(until_labels_spent=False)
    note_labels_asked(buf_agent(kept), asked=12, budget=12)
    assert kept.active


def buf_agent(buf: HybridReplayBuffer) -> object:
    """An object with the buffer where an SB3 agent keeps it."""

    class Holder:
        replay_buffer = buf

    return Holder()


def test_the_sampler_state_brings_back_the_same_draws() -> None:
    buf = _buffer()
    buf.sample(16)
    state = buf.sampler_state()
    first = buf.sample(32).rewards.numpy().copy()
    other = _buffer(seed=99)  # another stream until the state is loaded
    other.load_sampler_state(state)
    assert np.array_equal(other.sample(32).rewards.numpy(), first)
    import json

    assert json.loads(json.dumps(state)) == state  # strict JSON, as state.json holds it


def test_config_defaults_are_the_papers_and_bad_values_are_refused() -> None:
    c = ReplayConfig()
    assert not c.hybrid  # off by default
    assert (c.recent_ratio, c.recent_episodes, c.until_labels_spent) == (0.5, 10, True)
    kw = hybrid_buffer_kwargs(ReplayConfig(hybrid=True), horizon=1000, n_envs=1, seed=7)
    assert kw["replay_buffer_class"] is HybridReplayBuffer
    assert kw["replay_buffer_kwargs"]["recent_rows"] == 10_000  # N × episode limit (QPA)
    assert kw["replay_buffer_kwargs"]["active"] is False  # until the loop asks its first labels
    assert (
        hybrid_buffer_kwargs(c, horizon=1000, n_envs=4, seed=7)["replay_buffer_kwargs"][
            "recent_rows"
        ]
        == 2500
    )
    with pytest.raises(ConfigError, match="recent_ratio"):
        ReplayConfig(recent_ratio=1.5)
    with pytest.raises(ConfigError, match="recent_episodes"):
        ReplayConfig(recent_episodes=0)
    box = spaces.Box(-1.0, 1.0, (1,), np.float32)
    with pytest.raises(ConfigError, match="optimize_memory_usage"):
        HybridReplayBuffer(10, box, box, optimize_memory_usage=True, recent_rows=5)


# SBX's first learn() compiles its JAX functions (6 to 17 s on the 2-core machine): slow set
@pytest.mark.parametrize("backend", ["sb3", pytest.param("sbx", marks=pytest.mark.slow)])
def test_sac_trains_on_the_hybrid_buffer(backend: str) -> None:
    """SB3's and SBX's SAC take the buffer through replay_buffer_class and train on it."""
    if backend == "sbx":
        pytest.importorskip("sbx")
    from stable_baselines3.common.env_util import make_vec_env

    from preflab.policy.agents import make_agent

    venv = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    kw = hybrid_buffer_kwargs(
        ReplayConfig(hybrid=True, recent_episodes=1), horizon=200, n_envs=1, seed=0
    )
    agent = make_agent(
        "sac", venv, seed=0, net_arch=[8], backend=backend, batch_size=16, learning_starts=50, **kw
    )
    assert isinstance(agent.replay_buffer, HybridReplayBuffer)
    assert not agent.replay_buffer.active  # uniform until a loop has asked labels
    note_labels_asked(agent, asked=1, budget=10)
    assert agent.replay_buffer.active
    draws = agent.replay_buffer.sampler_state()["bit_generator"]
    agent.learn(total_timesteps=120)
    assert agent.replay_buffer.sampler_state()["bit_generator"] != draws  # it sampled
    assert agent.replay_buffer.recent_rows == 200
