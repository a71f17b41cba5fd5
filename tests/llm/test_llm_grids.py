"""Grid worlds: registration, observation round trip, dynamics and the exact progress heuristic."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from preflab.env_families.grids import DIR_VEC, LAYOUTS, GridState, encode_state
from preflab.errors import ConfigError, DataError
from preflab.llm import (
    ENV_IDS,
    TransitionSelector,
    cost_to_go,
    decode_obs,
    progress,
    sample_transitions,
    true_preference,
)
from preflab.llm.sampling import randomize_grid_state


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_registered_and_obs_round_trip(env_id: str) -> None:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=3)
    assert obs.shape == env.observation_space.shape
    state = env.unwrapped.grid_state()
    assert decode_obs(obs, env_id) == state
    np.testing.assert_array_equal(encode_state(state), obs)


def _greedy_episode(env_id: str, seed: int) -> tuple[int, int, bool]:
    """Follow the heuristic greedily (one-step look-ahead on copies of the real env)."""
    env = gym.make(env_id).unwrapped
    obs, _ = env.reset(seed=seed)
    c0 = cost_to_go(decode_obs(obs, env_id))
    steps, done = 0, False
    while not done and steps < 200:
        best = None
        for a in range(4):
            e2 = copy.deepcopy(env)
            o2, _, term, _, _ = e2.step(a)
            c = 0 if term else cost_to_go(decode_obs(o2, env_id))
            if best is None or c < best[0]:
                best = (c, a)
        _, _, done, trunc, _ = env.step(best[1])
        steps += 1
        done = done or trunc
    return c0, steps, bool(done)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_cost_to_go_is_exact_on_the_real_dynamics(env_id: str) -> None:
    # following the heuristic downhill reaches the goal in exactly cost_to_go(start) steps
    for seed in range(4):
        c0, steps, success = _greedy_episode(env_id, seed)
        assert success and steps == c0


def test_hand_computed_costs_on_nolock() -> None:
    # agent at (1, 1) facing east, goal at (3, 1): two moves forward
    s = GridState(
        layout="NoLock",
        agent=(1, 1),
        direction=0,
        carrying=(),
        door_open=(),
        keys=(),
        doors=(),
        goal=(3, 1),
    )
    assert cost_to_go(s) == 2
    # facing west: turn twice, then two moves
    assert cost_to_go(GridState(**{**s.__dict__, "direction": 2})) == 4
    # on the goal
    assert cost_to_go(GridState(**{**s.__dict__, "agent": (3, 1)})) == 0


def test_hand_computed_cost_on_lock() -> None:
    # Lock: wall at x=3, door (3, 2); key at (1, 3); goal (5, 2); agent (1, 1) facing south.
    s = GridState(
        layout="Lock",
        agent=(1, 1),
        direction=1,
        carrying=(False,),
        door_open=(False,),
        keys=((1, 3),),
        doors=((3, 2),),
        goal=(5, 2),
    )
    # forward to (1,2) [1], pick up key in front [2]; turn to east [3]; forward to (2,2) [4];
    # unlock door in front [5]; forward onto door (3,2) [6], (4,2) [7], goal (5,2) [8]
    assert cost_to_go(s) == 8
    carrying = GridState(
        **{**s.__dict__, "carrying": (True,), "keys": (None,), "agent": (2, 2), "direction": 0}
    )
    assert cost_to_go(carrying) == 4


def test_key_is_used_up_and_success_reward() -> None:
    env = gym.make("PrefLab/Lock-v0").unwrapped
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    randomize_grid_state(env, rng, phase=1)
    door = env._doors[0]
    env.agent_pos = (int(door.cur_pos[0]) - 1, int(door.cur_pos[1]))
    env.agent_dir = 0
    obs, r, term, _, _ = env.step(3)
    state = decode_obs(obs, "PrefLab/Lock-v0")
    assert state.door_open == (True,) and state.carrying == (False,) and r == 0.0 and not term


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError, match="unknown grid world"):
        decode_obs(np.zeros(20), "PrefLab/Nope-v0")
    with pytest.raises(DataError, match="20 numbers"):
        decode_obs(np.zeros(7), "PrefLab/Lock-v0")
    env = gym.make("PrefLab/Lock-v0")
    env.reset(seed=0)
    with pytest.raises(DataError, match=r"action must be 0\.\.3"):
        env.step(5)


def test_sampled_transitions_cover_every_stage() -> None:
    a, b = sample_transitions("PrefLab/MultiLock-v0", 400, np.random.default_rng(0))
    assert a.shape == b.shape == (400, LAYOUTS["MultiLock"].obs_dim)
    phases = {decode_obs(o, "PrefLab/MultiLock-v0").phase for o in a}
    assert phases == {0, 1, 2, 3, 4}
    # one action lowers the optimal cost-to-go by at most one (Bellman), and some do lower it
    d = progress(b, "PrefLab/MultiLock-v0") - progress(a, "PrefLab/MultiLock-v0")
    assert np.all(d <= 1) and np.any(d == 1) and np.any(d < 0)
    t = true_preference(a, b, "PrefLab/MultiLock-v0")
    assert set(np.unique(t)) <= {0.0, 0.5, 1.0}


def _faced_target(state: GridState) -> tuple[int, int]:
    """The stage's target of a decoded state: the next key, the next door, or the goal."""
    opened = sum(state.door_open)
    if opened == len(state.doors):
        return state.goal
    if state.carrying[opened]:
        return state.doors[opened]
    key = state.keys[opened]
    assert key is not None
    return key


def _facing(state: GridState) -> tuple[int, int]:
    dx, dy = DIR_VEC[state.direction]
    return state.agent[0] + dx, state.agent[1] + dy


def test_at_target_pairs_start_in_front_of_their_stages_target() -> None:
    env_id = "PrefLab/MultiLock-v0"
    a, b = sample_transitions(env_id, 300, np.random.default_rng(3), at_target=1.0)
    states = [decode_obs(o, env_id) for o in a]
    assert all(_facing(s) == _faced_target(s) for s in states)
    assert {s.phase for s in states} == {0, 1, 2, 3, 4}
    # from in front of the goal, 'forward' ends the episode on it: those pairs exist now
    after = [decode_obs(o, env_id) for o in b]
    assert sum(s.agent == s.goal for s in after) >= 300 // 5 // 4 // 2
    # a share: about that many face their target (uniform poses do so only now and then)
    a, _ = sample_transitions(env_id, 1000, np.random.default_rng(4), at_target=0.4)
    share = np.mean([_facing(s) == _faced_target(s) for s in (decode_obs(o, env_id) for o in a)])
    assert 0.35 < share < 0.55
    # the option off draws nothing more: the pairs of a seed are the ones without the option
    x0, y0 = sample_transitions(env_id, 50, np.random.default_rng(5))
    x1, y1 = sample_transitions(env_id, 50, np.random.default_rng(5), at_target=0.0)
    assert np.array_equal(x0, x1) and np.array_equal(y0, y1)


def test_at_target_bad_inputs() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match=r"at_target is a share of the pairs in \[0, 1\]"):
        sample_transitions("PrefLab/Lock-v0", 5, rng, at_target=1.5)
    with pytest.raises(ConfigError, match="apply to the grid worlds"):
        sample_transitions("Pendulum-v1", 5, rng, at_target=0.5)
    with pytest.raises(ConfigError, match=r"at_target is a share"):
        TransitionSelector("PrefLab/Lock-v0", 5, at_target=-0.1)
