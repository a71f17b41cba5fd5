"""Run imitation 1.0.1 PreferenceComparisons (its documented Pendulum example) and write JSON.

Standalone: run it with the python of the imitation virtualenv (see
``preflab_bench.peer.ensure_imitation_venv``); it does not import preflab.

    .venv-imitation/bin/python benchmarks/peer/imitation_runner.py \
        --env Pendulum-v1 --seed 0 --labels 200 --timesteps 50000 --out out.json

The setup follows imitation's tutorial "Learning a Reward Function using Preference
Comparisons" (docs/tutorials/5_train_preference_comparisons.ipynb): BasicRewardNet with
RunningNorm, RandomFragmenter, SyntheticGatherer, PreferenceModel, BasicRewardTrainer(epochs=3),
PPO (FeedForward32Policy + NormalizeFeaturesExtractor(RunningNorm), n_steps=2048 // n_envs,
batch_size=64, ent_coef=0.01, learning_rate=2e-3, clip_range=0.1, gae_lambda=0.95, gamma=0.97,
n_epochs=10), AgentTrainer(exploration_frac=0.05), PreferenceComparisons(fragment_length=100,
transition_oversampling=1, initial_comparison_frac=0.1, allow_variable_horizon=False,
initial_epoch_multiplier=4, query_schedule="hyperbolic").

What it measures: wall time and CPU time (this process) of the whole ``train`` call; the real
number of env steps (every ``step`` of the vectorised env, counted by a wrapper under
everything: PPO rollouts plus the extra transitions imitation samples for fragments, with its
exploration), and PPO's own ``num_timesteps``; labels actually gathered (size of the preference
dataset); the final true return (mean, std over ``--eval-episodes`` episodes, deterministic
actions, a fresh env reset with ``--seed`` once). The number of agent trainings is
``num_iterations + 1`` (the initial comparisons get their own round), each at least
``total_timesteps // num_iterations`` steps rounded up to whole PPO rollouts (2048 steps).

``--ppo-only`` instead trains plain SB3 PPO with the same hyperparameters on the true reward for
``--timesteps`` steps (rounded up by SB3 to whole rollouts) and reports the same fields.

Like-for-like options (``preflab bench pendulum``):

- ``--agent sac``: SB3 SAC as the agent, the way imitation 1.0.1's own
  ``train_preference_comparisons`` script wires an off-policy learner: its replay buffer is a
  ``imitation.policies.replay_buffer_wrapper.ReplayBufferRewardWrapper`` whose ``sample``
  relabels every minibatch with ``reward_net.predict_processed(update_stats=False)``. SAC uses
  PrefLab's SAC preset (lr 1e-3, buffer 200k, batch 256, train_freq 1, gamma 0.98, tau 0.02,
  net 64x64) and ``--learning-starts`` random steps (PrefLab's initial random steps).
- ``--policy mlp``: PPO with SB3's plain ``MlpPolicy`` (32x32, no observation normaliser),
  i.e. exactly PrefLab's PPO learner; ``tutorial`` (default) is the tutorial's
  FeedForward32Policy with a RunningNorm feature extractor.
- ``--fragment-length``: segment length (the tutorial's 100 by default).
- ``--env-steps N``: choose ``total_timesteps`` so that the REAL env steps (agent training plus
  fragment sampling and exploration) come as close to N as possible without exceeding it, using
  :func:`predicted_env_steps` (exact for fixed-horizon envs such as Pendulum; the run reports
  the measured count and the prediction).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

# imitation, stable-baselines3, gymnasium and torch are imported inside the functions that use
# them, so that argument parsing works (and is testable) with any python.


def counting_vec_env(env_id: str, n_envs: int, rng: Any):
    """imitation's ``make_vec_env`` wrapped so that every env step is counted.

    The wrapper sits under everything (PPO rollouts, AgentTrainer's extra fragment sampling and
    its exploration); ``.env_steps`` is the total number of env transitions (n_envs per step).
    """
    from imitation.util.util import make_vec_env
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class StepCounter(VecEnvWrapper):
        def __init__(self, venv):
            super().__init__(venv)
            self.env_steps = 0

        def reset(self):
            return self.venv.reset()

        def step_async(self, actions):
            self.venv.step_async(actions)

        def step_wait(self):
            out = self.venv.step_wait()
            self.env_steps += self.num_envs
            return out

    return StepCounter(make_vec_env(env_id, n_envs=n_envs, rng=rng))


def query_schedule(labels: int, iterations: int, initial_frac: float = 0.1) -> list[int]:
    """Comparisons per round exactly as ``PreferenceComparisons.train`` (imitation 1.0.1)."""
    import numpy as np
    from imitation.algorithms.preference_comparisons import QUERY_SCHEDULES
    from imitation.util.util import oric

    initial = int(labels * initial_frac)
    probs = np.vectorize(QUERY_SCHEDULES["hyperbolic"])(np.linspace(0, 1, iterations))
    return [initial, *oric(probs / probs.sum() * (labels - initial)).tolist()]


def predicted_env_steps(
    timesteps: int,
    schedule: list[int],
    *,
    n_envs: int,
    fragment_length: int,
    horizon: int,
    rollout: int,
    exploration_frac: float = 0.05,
) -> int:
    """Real env steps of ``PreferenceComparisons.train`` with an ``AgentTrainer`` (1.0.1).

    Follows its code for a fixed-horizon env (every episode ``horizon`` steps, all ``n_envs``
    in step): each round samples ``2 * pairs * fragment_length`` transitions; 5% come from
    ``generate_trajectories`` with the exploration wrapper, the rest from finished episodes the
    agent's last training left in the BufferingWrapper, topped up by ``generate_trajectories``
    when too few. Each ``generate_trajectories`` resets the env and runs whole episodes of all
    envs. The agent then trains ``timesteps // iterations`` steps (the remainder in round
    ``iterations - 1``), rounded up to whole rollouts (``rollout`` = n_steps * n_envs for PPO,
    ``n_envs`` for SAC).
    """
    iterations = len(schedule) - 1
    per_round, extra = divmod(timesteps, iterations)
    batch = horizon * n_envs
    total = t = finished = 0

    def generate(n: int) -> int:
        return max(1, -(-n // batch)) * batch

    for i, pairs in enumerate(schedule):
        steps = 2 * pairs * fragment_length
        explore = int(exploration_frac * steps)
        need, avail, finished = steps - explore, finished, 0
        if avail < need:
            total, t = total + generate(need - avail), 0
        if explore > 0:
            total, t = total + generate(explore), 0
        n = per_round + (extra if i == iterations - 1 else 0)
        n = -(-n // rollout) * rollout
        if i == 0:
            t = 0  # the agent's first learn() resets the env
        per_env = n // n_envs
        finished += (t + per_env) // horizon * batch
        t = (t + per_env) % horizon
        total += n
    return total


def timesteps_for(env_steps: int, schedule: list[int], **kw: Any) -> int:
    """The ``total_timesteps`` whose predicted real env steps come closest to ``env_steps``
    from below (the largest such budget on ties).

    A scan, not a bisection: more agent training leaves more finished episodes to cut fragments
    from, so the real count is not monotone in ``total_timesteps``.
    """
    best_t, best = 0, -1
    for t in range(env_steps, 0, -1):
        steps = predicted_env_steps(t, schedule, **kw)
        if best < steps <= env_steps:
            best_t, best = t, steps
            if steps == env_steps:
                break
    if best_t == 0:
        raise ValueError(
            f"--env-steps {env_steps} is below the fragment sampling alone "
            f"({predicted_env_steps(1, schedule, **kw)}); raise it or lower --labels"
        )
    return best_t


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--env", default="Pendulum-v1", help="gymnasium env id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--labels", type=int, default=200, help="total_comparisons")
    p.add_argument("--timesteps", type=int, default=50_000, help="total_timesteps")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument(
        "--iterations",
        type=int,
        default=10,
        help="num_iterations of PreferenceComparisons (the tutorial uses 5, 'set to 60 for "
        "better performance')",
    )
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--ppo-only", action="store_true", help="plain PPO on the true reward")
    p.add_argument("--agent", choices=("ppo", "sac"), default="ppo")
    p.add_argument(
        "--policy",
        choices=("tutorial", "mlp"),
        default="tutorial",
        help="PPO policy: the tutorial's (RunningNorm features) or plain MlpPolicy 32x32",
    )
    p.add_argument("--fragment-length", type=int, default=100)
    p.add_argument("--learning-starts", type=int, default=1000, help="SAC random steps")
    p.add_argument(
        "--env-steps",
        type=int,
        default=0,
        help="choose --timesteps so that the real env steps come closest to this (0: off)",
    )
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = p.parse_args(argv)
    names = ("labels", "timesteps", "n_envs", "eval_episodes", "iterations", "threads")
    for name in (*names, "fragment_length"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.env_steps < 0 or args.learning_starts < 0:
        p.error("--env-steps and --learning-starts must be >= 0")
    if 2048 % args.n_envs:
        p.error(f"--n-envs must divide 2048 (PPO n_steps = 2048 // n_envs), got {args.n_envs}")
    return args


SAC_KWARGS = dict(
    learning_rate=1e-3,
    buffer_size=200_000,
    batch_size=256,
    train_freq=1,
    gradient_steps=1,
    gamma=0.98,
    tau=0.02,
)
"""PrefLab's SAC preset (preflab.policy.presets.PRESETS['sac'] minus learning_starts)."""


def make_sac(venv, seed: int, learning_starts: int, relabel_fn=None):
    """SB3 SAC (64x64); with ``relabel_fn`` its replay buffer relabels every sampled batch."""
    from stable_baselines3 import SAC
    from stable_baselines3.common.buffers import ReplayBuffer

    extra: dict[str, Any] = {}
    if relabel_fn is not None:
        from imitation.policies.replay_buffer_wrapper import ReplayBufferRewardWrapper

        extra = dict(
            replay_buffer_class=ReplayBufferRewardWrapper,
            replay_buffer_kwargs=dict(replay_buffer_class=ReplayBuffer, reward_fn=relabel_fn),
        )
    return SAC(
        "MlpPolicy",
        venv,
        seed=seed,
        policy_kwargs=dict(net_arch=[64, 64]),
        learning_starts=learning_starts,
        device="cpu",
        **SAC_KWARGS,
        **extra,
    )


def make_agent(venv, seed: int, policy: str = "tutorial"):
    """PPO as in imitation's preference-comparisons tutorial (``policy='mlp'``: plain 32x32)."""
    from imitation.policies.base import FeedForward32Policy, NormalizeFeaturesExtractor
    from imitation.util.networks import RunningNorm
    from stable_baselines3 import PPO

    kwargs: dict[str, Any] = dict(
        policy=FeedForward32Policy,
        policy_kwargs=dict(
            features_extractor_class=NormalizeFeaturesExtractor,
            features_extractor_kwargs=dict(normalize_class=RunningNorm),
        ),
    )
    if policy == "mlp":
        kwargs = dict(policy="MlpPolicy", policy_kwargs=dict(net_arch=[32, 32]))
    return PPO(
        **kwargs,
        device="cpu",
        env=venv,
        seed=seed,
        n_steps=2048 // venv.num_envs,
        batch_size=64,
        ent_coef=0.01,
        learning_rate=2e-3,
        clip_range=0.1,
        gae_lambda=0.95,
        gamma=0.97,
        n_epochs=10,
    )


def evaluate(agent, env_id: str, n_episodes: int, seed: int) -> tuple[float, float]:
    """True return of ``agent`` (deterministic actions) on a fresh env.

    The env is reset with ``seed`` once, then episode after episode without reseeding.
    """
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        total, done = 0.0, False
        while not done:
            action, _ = agent.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        obs, _ = env.reset()
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


def run_preference_comparisons(args: argparse.Namespace) -> dict:
    import numpy as np
    from imitation.algorithms import preference_comparisons
    from imitation.rewards.reward_nets import BasicRewardNet
    from imitation.util.networks import RunningNorm

    rng = np.random.default_rng(args.seed)
    counter = counting_vec_env(args.env, args.n_envs, rng)
    venv = counter

    reward_net = BasicRewardNet(
        venv.observation_space, venv.action_space, normalize_input_layer=RunningNorm
    )
    fragmenter = preference_comparisons.RandomFragmenter(warning_threshold=0, rng=rng)
    gatherer = preference_comparisons.SyntheticGatherer(rng=rng)
    preference_model = preference_comparisons.PreferenceModel(reward_net)
    reward_trainer = preference_comparisons.BasicRewardTrainer(
        preference_model=preference_model,
        loss=preference_comparisons.CrossEntropyRewardLoss(),
        epochs=3,
        rng=rng,
    )
    if args.agent == "sac":
        relabel = functools.partial(reward_net.predict_processed, update_stats=False)
        agent = make_sac(venv, args.seed, args.learning_starts, relabel)
    else:
        agent = make_agent(venv, args.seed, args.policy)
    trajectory_generator = preference_comparisons.AgentTrainer(
        algorithm=agent,
        reward_fn=reward_net,
        venv=venv,
        exploration_frac=0.05,
        rng=rng,
    )
    pref_comparisons = preference_comparisons.PreferenceComparisons(
        trajectory_generator,
        reward_net,
        num_iterations=args.iterations,
        fragmenter=fragmenter,
        preference_gatherer=gatherer,
        reward_trainer=reward_trainer,
        fragment_length=args.fragment_length,
        transition_oversampling=1,
        initial_comparison_frac=0.1,
        allow_variable_horizon=False,
        initial_epoch_multiplier=4,
        query_schedule="hyperbolic",
    )
    schedule = query_schedule(args.labels, args.iterations)
    shape = dict(
        n_envs=args.n_envs,
        fragment_length=args.fragment_length,
        horizon=int(venv.get_attr("spec")[0].max_episode_steps),
        rollout=args.n_envs if args.agent == "sac" else 2048 // args.n_envs * args.n_envs,
    )
    timesteps = (
        timesteps_for(args.env_steps, schedule, **shape) if args.env_steps else args.timesteps
    )
    t0, c0 = time.perf_counter(), time.process_time()
    stats = pref_comparisons.train(total_timesteps=timesteps, total_comparisons=args.labels)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    mean, std = evaluate(agent, args.env, args.eval_episodes, args.seed)
    return {
        "mode": "preference_comparisons",
        "agent": args.agent,
        "policy": args.policy if args.agent == "ppo" else "MlpPolicy 64x64",
        "fragment_length": args.fragment_length,
        "timesteps": timesteps,
        "predicted_env_steps": predicted_env_steps(timesteps, schedule, **shape),
        "query_schedule": schedule,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "env_steps": int(counter.env_steps),
        "agent_timesteps": int(agent.num_timesteps),
        "labels": len(pref_comparisons.dataset),
        "true_return_mean": mean,
        "true_return_std": std,
        "reward_loss": float(stats["reward_loss"]),
        "reward_accuracy": float(stats["reward_accuracy"]),
    }


def run_ppo_only(args: argparse.Namespace) -> dict:
    import numpy as np

    rng = np.random.default_rng(args.seed)
    counter = counting_vec_env(args.env, args.n_envs, rng)
    if args.agent == "sac":
        agent = make_sac(counter, args.seed, args.learning_starts)
    else:
        agent = make_agent(counter, args.seed, args.policy)
    t0, c0 = time.perf_counter(), time.process_time()
    agent.learn(total_timesteps=args.timesteps)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    mean, std = evaluate(agent, args.env, args.eval_episodes, args.seed)
    return {
        "mode": "ppo_only",
        "agent": args.agent,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "env_steps": int(counter.env_steps),
        "agent_timesteps": int(agent.num_timesteps),
        "labels": 0,
        "true_return_mean": mean,
        "true_return_std": std,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import gymnasium as gym
    import imitation
    import numpy as np
    import stable_baselines3
    import torch

    torch.set_num_threads(args.threads)
    # Not in the tutorial: seed python/numpy/torch globally too, so that the reward net (built
    # before PPO seeds torch) is initialised reproducibly and runs repeat exactly.
    from stable_baselines3.common.utils import set_random_seed

    set_random_seed(args.seed)
    result = run_ppo_only(args) if args.ppo_only else run_preference_comparisons(args)
    result.update(
        env_id=args.env,
        seed=args.seed,
        requested_labels=args.labels,
        requested_timesteps=args.timesteps,
        n_envs=args.n_envs,
        eval_episodes=args.eval_episodes,
        num_iterations=args.iterations,
        versions={
            "python": platform.python_version(),
            "imitation": imitation.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "gymnasium": gym.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
