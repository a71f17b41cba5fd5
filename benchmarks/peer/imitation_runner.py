"""Run imitation 1.0.1 PreferenceComparisons (its documented Pendulum example) and write JSON.

Standalone: run it with the python of the imitation virtualenv (see
``preflab.bench.peer.ensure_imitation_venv``); it does not import preflab.

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
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = p.parse_args(argv)
    for name in ("labels", "timesteps", "n_envs", "eval_episodes", "iterations", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if 2048 % args.n_envs:
        p.error(f"--n-envs must divide 2048 (PPO n_steps = 2048 // n_envs), got {args.n_envs}")
    return args


def make_agent(venv, seed: int):
    """PPO exactly as in imitation's preference-comparisons tutorial."""
    from imitation.policies.base import FeedForward32Policy, NormalizeFeaturesExtractor
    from imitation.util.networks import RunningNorm
    from stable_baselines3 import PPO

    return PPO(
        policy=FeedForward32Policy,
        policy_kwargs=dict(
            features_extractor_class=NormalizeFeaturesExtractor,
            features_extractor_kwargs=dict(normalize_class=RunningNorm),
        ),
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
    agent = make_agent(venv, args.seed)
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
        fragment_length=100,
        transition_oversampling=1,
        initial_comparison_frac=0.1,
        allow_variable_horizon=False,
        initial_epoch_multiplier=4,
        query_schedule="hyperbolic",
    )
    t0, c0 = time.perf_counter(), time.process_time()
    stats = pref_comparisons.train(total_timesteps=args.timesteps, total_comparisons=args.labels)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    mean, std = evaluate(agent, args.env, args.eval_episodes, args.seed)
    return {
        "mode": "preference_comparisons",
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
    agent = make_agent(counter, args.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    agent.learn(total_timesteps=args.timesteps)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    mean, std = evaluate(agent, args.env, args.eval_episodes, args.seed)
    return {
        "mode": "ppo_only",
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
