"""Peer benchmark: imitation 1.0.1 PreferenceComparisons, run in its own virtual environment.

imitation 1.0.1 pins gymnasium ~0.29 and stable-baselines3 ~2.2.1, so it cannot share
PrefLab's environment. ``ensure_imitation_venv`` creates a separate virtualenv on demand
(idempotent) and ``run_imitation`` runs ``benchmarks/peer/imitation_runner.py`` in it as a
subprocess and returns the JSON it writes.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from preflab.errors import ConfigError, SourceError
from preflab_bench import _paths

log = logging.getLogger(__name__)

IMITATION_REQUIREMENT = "imitation==1.0.1"
TORCH_REQUIREMENT = "torch==2.13.0"
REPO_ROOT = _paths.REPO
DEFAULT_VENV = REPO_ROOT / ".venv-imitation"
RUNNER = REPO_ROOT / "benchmarks" / "peer" / "imitation_runner.py"


def venv_python(path: Path) -> Path:
    """Path of the python interpreter inside the virtualenv at ``path``."""
    return Path(path) / "bin" / "python"


def _has_imitation(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import imitation, torch, stable_baselines3"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0


def _run(cmd: list[str], what: str) -> None:
    log.info("%s: %s", what, " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SourceError(
            f"{what} failed (exit code {proc.returncode}); expected it to succeed. "
            f"Command: {' '.join(cmd)}\n--- stderr (tail) ---\n{_tail(proc.stderr)}\n"
            "Fix: check network access to the package index and free disk space "
            "(the imitation venv needs ~1.7 GB), then delete the half-built venv and retry."
        )


def _tail(text: str, n_lines: int = 30) -> str:
    lines = (text or "").strip().splitlines()
    return "\n".join(lines[-n_lines:]) if lines else "(empty)"


def pip_find_links(python: Path | None = None) -> list[Path]:
    """Local folders pip is configured to take wheels from (``find-links``, config or env)."""
    exe = str(python) if python is not None else sys.executable
    proc = subprocess.run(
        [exe, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    )
    folders: list[Path] = []
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if not key.strip().endswith("find-links"):
            continue
        for item in value.strip().strip("'\"").split():
            item = item.removeprefix("file://")
            folder = Path(item)
            if folder.is_dir() and folder not in folders:
                folders.append(folder)
    return folders


def local_torch_wheel(version: str = "2.13.0", python: Path | None = None) -> Path | None:
    """A torch wheel of ``version`` lying in one of pip's find-links folders, else None."""
    for folder in pip_find_links(python):
        for wheel in sorted(folder.glob(f"torch-{version}*.whl")):
            return wheel
    return None


def ensure_imitation_venv(path: Path = DEFAULT_VENV) -> Path:
    """Create (once) a virtualenv at ``path`` with imitation 1.0.1; return its python.

    Idempotent: when ``imitation`` already imports there, nothing is installed. Otherwise it
    creates the venv, installs ``torch==2.13.0`` first when a local wheel of it lies in pip's
    find-links (so no multi-GB CUDA build is pulled), then ``imitation==1.0.1``.
    Takes ~70 s and ~1.7 GB the first time.
    """
    path = Path(path).resolve()
    python = venv_python(path)
    if _has_imitation(python):
        log.info("imitation venv ready at %s", path)
        return python
    if path.exists() and not python.exists():
        raise SourceError(
            f"expected {path} to be a virtualenv (with bin/python) or not to exist, but it is "
            "something else; fix: delete it or pass another path"
        )
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(path)], "creating the imitation venv")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    wheel = local_torch_wheel("2.13.0", python)
    if wheel is not None:
        _run([*pip, TORCH_REQUIREMENT], f"installing {TORCH_REQUIREMENT} (local wheel {wheel})")
    else:
        log.info("no local torch 2.13.0 wheel in pip's find-links; leaving torch to pip")
    _run([*pip, IMITATION_REQUIREMENT], f"installing {IMITATION_REQUIREMENT}")
    if not _has_imitation(python):
        raise SourceError(
            f"installed {IMITATION_REQUIREMENT} into {path} but `import imitation` still fails "
            "there; fix: delete the venv and retry, or run its pip by hand to see why"
        )
    return python


def predicted_agent_timesteps(
    timesteps: int, num_iterations: int = 10, n_envs: int = 8, n_steps_total: int = 2048
) -> int:
    """PPO steps imitation 1.0.1's ``PreferenceComparisons.train`` really takes.

    ``train`` runs ``num_iterations + 1`` rounds (the initial comparisons get a round of their
    own) and trains the agent in each for ``timesteps // num_iterations`` steps (the remainder
    goes to round ``num_iterations - 1``); SB3 rounds every ``learn`` call up to whole rollouts of
    ``n_steps * n_envs`` (2048 with the tutorial's ``n_steps = 2048 // n_envs``). The env steps
    imitation spends on sampling fragments come on top (measured by the runner).
    """
    if timesteps < 1 or num_iterations < 1 or n_envs < 1:
        raise ConfigError(
            f"timesteps, num_iterations and n_envs must be >= 1, got {timesteps}, "
            f"{num_iterations}, {n_envs}"
        )
    rollout = (n_steps_total // n_envs) * n_envs
    per_round, extra = divmod(timesteps, num_iterations)
    total = 0
    for i in range(num_iterations + 1):
        steps = per_round + (extra if i == num_iterations - 1 else 0)
        total += -(-steps // rollout) * rollout
    return total


def runner_command(
    python: Path,
    *,
    env_id: str,
    seed: int,
    labels: int,
    timesteps: int,
    out: Path,
    n_envs: int = 8,
    eval_episodes: int = 10,
    iterations: int = 10,
    ppo_only: bool = False,
    env_steps: int = 0,
    agent: str = "ppo",
    policy: str = "tutorial",
    fragment_length: int = 100,
    learning_starts: int = 1000,
    runner: Path = RUNNER,
) -> list[str]:
    """The command line that runs ``imitation_runner.py`` with ``python``."""
    for name, value in (
        ("labels", labels),
        ("timesteps", timesteps),
        ("n_envs", n_envs),
        ("eval_episodes", eval_episodes),
        ("iterations", iterations),
        ("fragment_length", fragment_length),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an int >= 1, got {value!r}; pass a positive count")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be an int >= 0, got {seed!r}")
    if 2048 % n_envs:
        raise ConfigError(
            f"n_envs must divide 2048 (imitation's PPO uses n_steps = 2048 // n_envs), "
            f"got {n_envs}; use 1, 2, 4, 8 or 16"
        )
    if not env_id:
        raise ConfigError("env_id must be a gymnasium id such as 'Pendulum-v1', got ''")
    if agent not in ("ppo", "sac") or policy not in ("tutorial", "mlp"):
        raise ConfigError(
            f"agent must be 'ppo' or 'sac' and policy 'tutorial' or 'mlp', got {agent!r}, "
            f"{policy!r}"
        )
    if env_steps < 0 or learning_starts < 0:
        raise ConfigError(
            f"env_steps and learning_starts must be >= 0, got {env_steps}, {learning_starts}"
        )
    cmd = [
        str(python),
        str(runner),
        "--env",
        env_id,
        "--seed",
        str(seed),
        "--labels",
        str(labels),
        "--timesteps",
        str(timesteps),
        "--n-envs",
        str(n_envs),
        "--eval-episodes",
        str(eval_episodes),
        "--iterations",
        str(iterations),
        "--agent",
        agent,
        "--policy",
        policy,
        "--fragment-length",
        str(fragment_length),
        "--learning-starts",
        str(learning_starts),
        "--env-steps",
        str(env_steps),
        "--out",
        str(out),
    ]
    if ppo_only:
        cmd.append("--ppo-only")
    return cmd


RESULT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "mode": str,
    "wall_s": (int, float),
    "env_steps": int,
    "agent_timesteps": int,
    "labels": int,
    "true_return_mean": (int, float),
    "true_return_std": (int, float),
}


def parse_result(text: str, *, source: str = "runner output") -> dict:
    """Parse and check the runner's JSON; raise SourceError when it is not what is expected."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(
            f"expected JSON from {source}, got unparsable text ({exc}); first 200 chars: "
            f"{text[:200]!r}. Fix: rerun the runner by hand and look at its stderr"
        ) from exc
    if not isinstance(data, dict):
        raise SourceError(f"expected a JSON object from {source}, got {type(data).__name__}")
    missing = [k for k in RESULT_FIELDS if k not in data]
    if missing:
        raise SourceError(
            f"expected fields {sorted(RESULT_FIELDS)} in {source}, missing {missing}; "
            "fix: the runner and preflab_bench.peer are out of sync, update the runner"
        )
    for key, kind in RESULT_FIELDS.items():
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise SourceError(
                f"field {key!r} in {source} should be {kind}, got {value!r}; "
                "fix: the runner and preflab_bench.peer are out of sync"
            )
    return data


def run_imitation(
    python: Path,
    *,
    env_id: str = "Pendulum-v1",
    seed: int,
    labels: int = 200,
    timesteps: int = 50_000,
    n_envs: int = 8,
    eval_episodes: int = 10,
    iterations: int = 10,
    ppo_only: bool = False,
    env_steps: int = 0,
    agent: str = "ppo",
    policy: str = "tutorial",
    fragment_length: int = 100,
    learning_starts: int = 1000,
    timeout_s: float = 900.0,
    nice: int = 0,
    runner: Path = RUNNER,
) -> dict:
    """Run imitation's PreferenceComparisons (or ``ppo_only``) once in a subprocess.

    ``python`` is the imitation venv's interpreter (from ``ensure_imitation_venv``). Returns
    the runner's JSON as a dict (``env_steps`` > 0: the runner picks ``total_timesteps`` so that
    the real env steps come closest to it; ``agent='sac'``: SAC with imitation's
    ReplayBufferRewardWrapper): mode, wall_s (the ``train`` call), env_steps (every env step,
    incl. imitation's extra fragment sampling), agent_timesteps (PPO's num_timesteps), labels,
    true_return_mean, true_return_std, and the settings and package versions used.
    Raises SourceError (with the subprocess's stderr tail) when the run fails or times out.
    """
    python = Path(python)
    if not python.exists():
        raise SourceError(
            f"expected a python interpreter at {python}, found nothing; fix: call "
            "ensure_imitation_venv(path) first and pass the path it returns"
        )
    if not Path(runner).exists():
        raise SourceError(f"expected the peer runner at {runner}, found nothing")
    with tempfile.TemporaryDirectory(prefix="preflab-peer-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = runner_command(
            python,
            env_id=env_id,
            seed=seed,
            labels=labels,
            timesteps=timesteps,
            out=out,
            n_envs=n_envs,
            eval_episodes=eval_episodes,
            iterations=iterations,
            ppo_only=ppo_only,
            env_steps=env_steps,
            agent=agent,
            policy=policy,
            fragment_length=fragment_length,
            learning_starts=learning_starts,
            runner=runner,
        )
        if nice:
            cmd = ["nice", "-n", str(int(nice)), *cmd]
        log.info("running peer: %s", " ".join(cmd))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        env.pop("PYTHONPATH", None)
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr
            raise SourceError(
                f"the imitation runner did not finish within {timeout_s:.0f} s "
                f"(command: {' '.join(cmd)}); stderr tail:\n{_tail(stderr or '')}\n"
                "Fix: lower timesteps/labels or raise timeout_s"
            ) from exc
        if proc.returncode != 0:
            raise SourceError(
                f"the imitation runner failed with exit code {proc.returncode}; expected 0. "
                f"Command: {' '.join(cmd)}\n--- stderr (tail) ---\n{_tail(proc.stderr)}\n"
                "Fix: run it with the imitation venv's python "
                "(preflab_bench.peer.ensure_imitation_venv) and check the error above"
            )
        if not out.exists():
            raise SourceError(
                f"the imitation runner exited 0 but wrote no {out.name}; stderr tail:\n"
                f"{_tail(proc.stderr)}"
            )
        return parse_result(out.read_text(), source=f"runner JSON ({' '.join(cmd[-2:])})")


def _format_table(rows: list[dict]) -> str:
    head = (
        "| seed | mode | true return (mean ± std) | labels | env steps | PPO steps | wall s "
        "| CPU s |"
    )
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['mode']} | {r['true_return_mean']:.1f} ± "
            f"{r['true_return_std']:.1f} | {r['labels']} | {r['env_steps']} | "
            f"{r['agent_timesteps']} | {r['wall_s']:.1f} | {r.get('cpu_s', float('nan')):.1f} |"
        )
    if len(rows) > 1:
        means = [r["true_return_mean"] for r in rows]
        lines.append(
            f"| mean | | {sum(means) / len(means):.1f} | | "
            f"{sum(r['env_steps'] for r in rows) / len(rows):.0f} | | "
            f"{sum(r['wall_s'] for r in rows) / len(rows):.1f} | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the peer for several seeds and print a markdown table (manual use)."""
    import argparse
    import datetime
    import shlex

    p = argparse.ArgumentParser(
        prog="python -m preflab_bench.peer",
        description="imitation 1.0.1 PreferenceComparisons (peer) on one env, several seeds",
    )
    p.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="imitation virtualenv")
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--labels", type=int, default=200)
    p.add_argument("--timesteps", type=int, default=50_000)
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--ppo-only", action="store_true")
    p.add_argument("--nice", type=int, default=10)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    python = ensure_imitation_venv(args.venv)
    rows = []
    for seed in args.seeds:
        result = run_imitation(
            python,
            env_id=args.env,
            seed=seed,
            labels=args.labels,
            timesteps=args.timesteps,
            n_envs=args.n_envs,
            eval_episodes=args.eval_episodes,
            iterations=args.iterations,
            ppo_only=args.ppo_only,
            timeout_s=args.timeout,
            nice=args.nice,
        )
        rows.append(result)
        print(json.dumps(result), flush=True)
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m preflab_bench.peer " + shlex.join(given)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    header = (
        f"# imitation peer: {args.env}\n\n"
        f"Command: `{command}`  \n"
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC  \n"
        + (
            f"Budgets: plain PPO on the true reward, total_timesteps={args.timesteps}, "
            if args.ppo_only
            else f"Budgets: total_comparisons={args.labels}, total_timesteps={args.timesteps}, "
            f"num_iterations={args.iterations}, "
        )
        + f"n_envs={args.n_envs}, eval episodes={args.eval_episodes}  \n"
        f"Load average at the end (1/5/15 min): {load}; wall times grow with load, "
        "CPU s (of the run's process) less so  \n"
        f"Versions: {rows[0]['versions'] if rows else '-'}\n\n"
    )
    text = header + _format_table(rows) + "\n"
    print(text)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
