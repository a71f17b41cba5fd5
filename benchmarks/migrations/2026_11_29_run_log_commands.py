"""Give every row of the run logs written before their benches recorded commands the command
that made it, reconstructed from what the result file documents (issue #27: "commands in every
row"). Run once from the checkout's top: ``python benchmarks/migrations/2026_11_29_run_log_commands.py``.

Each filled row gets ``command`` and ``command_source`` (where the command was read, and that
it was reconstructed, not recorded when the run ran). A row that already holds a command is
left alone, so running this again changes nothing. A row that matches no documented command,
or more than one, stops the script before anything is written.

- ``mujoco_runs.jsonl`` (``preflab bench mujoco`` wrote no command before 805e88f): the command
  blocks of ``mujoco_termination.md`` (tags ``t200k``, ``hopper60k``, ``hopper60k_seg25``),
  one invocation per env, seed and arm as the blocks say (``--seeds 0 1`` where a block ran
  two seeds in one invocation).
- ``prefguide_runs.jsonl`` (likewise before 805e88f): one invocation per seed with the bench's
  options set to the config every row records (all rows share one); the budget rows from
  ``--reference-budgets 2000 2500 3000``, the budgets they hold.
- ``llm_fig7_runs.jsonl`` and ``llm_fig7_40k_runs.jsonl`` (written before the bench recorded
  commands): the invocations that ``llm_fig7.md`` and ``llm_fig7_40k.md`` list, one per seed;
  a row belongs to the invocation whose seeds, accuracies and queries hold it (an exact
  ranking, accuracy 1.0, is recorded with one query).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path("benchmarks/results")
Row = dict[str, Any]

MUJOCO_T200K = (
    "preflab bench mujoco --steps 200000 --labels 700 --n-envs 4 --segment-seconds 1.5 "
    "--eval-episodes 10 --tag t200k"
)
MUJOCO_60K = (
    "preflab bench mujoco --envs Hopper-v5 --steps 60000 --labels 700 --n-envs 4 "
    "--segment-seconds 1.5 --eval-episodes 5 --tag hopper60k"
)
MUJOCO_SEG25 = (
    "preflab bench mujoco --envs Hopper-v5 --seeds 0 1 --steps 60000 --labels 700 --n-envs 4 "
    "--segment-length 25 --eval-episodes 5 --tag hopper60k_seg25 --variants today absorbing "
    "--baselines none"
)


def mujoco(row: Row) -> list[str]:
    tag, kind, variant, env, seed = (row[k] for k in ("tag", "kind", "variant", "env", "seed"))
    if tag == "t200k":
        if kind == "preflab":
            return [
                f"{MUJOCO_T200K} --envs {env} --seeds {seed} --variants {variant} --baselines none"
            ]
        arm = "fixed_horizon" if variant == "fixed_horizon" else "absorbing"
        return [f"{MUJOCO_T200K} --envs {env} --seeds {seed} --variants {arm} --baselines only"]
    if tag == "hopper60k":
        if kind == "preflab":
            return [f"{MUJOCO_60K} --seeds {seed} --variants {variant} --baselines none"]
        if variant == "standard":
            return [f"{MUJOCO_60K} --seeds 0 1 --variants today --baselines only"]
        return [f"{MUJOCO_60K} --seeds {seed} --variants fixed_horizon --baselines only"]
    if tag == "hopper60k_seg25":
        return [MUJOCO_SEG25]
    return []


def prefguide(row: Row) -> list[str]:
    seed = row["seed"]
    if row["kind"] == "budget":
        budgets = " ".join(str(b) for b in row["budgets"])
        return [f"preflab bench prefguide --reference-budgets {budgets} --seeds {seed}"]
    cfg = row["config"]
    env, algo, population, n_eval = row["key"].split("|")[:4]
    if env != cfg["env_id"] or algo != cfg["algo"]:
        return []
    opts = [
        f"--population {population}",
        f"--evaluators {n_eval.removeprefix('S=')}",
        f"--human-steps {cfg['human_steps']}",
        f"--post-steps {cfg['post_steps']}",
        f"--steps-per-round {cfg['steps_per_round']}",
        f"--item-length {cfg['item_length']}",
        f"--max-pairs {cfg['max_pairs']}",
        f"--algo {cfg['algo']}",
        f"--n-envs {cfg['n_envs']}",
        f"--eval-episodes {cfg['eval_episodes']}",
    ]
    return [f"preflab bench prefguide {' '.join(opts)} --seeds {seed}"]


LLM = "nice -n 10 python -m preflab.bench.llm_fig7 --env PrefLab/NoLock-v0 --pairs 2500"
LLM_20K = [  # llm_fig7.md, "How these runs were produced": (seeds, accuracies, queries)
    ((0, 1), (1.0, 0.6), (10, 1)),
    ((2, 3), (1.0, 0.6), (10,)),
    ((0, 1), (0.8,), (1, 10)),
    ((0, 1), (0.6,), (3, 5)),
]
LLM_40K = [((0, 1, 2), (1.0, 0.6), (10,))]  # llm_fig7_40k.md


def llm(invocations: list, steps: int, tail: str) -> Callable[[Row], list[str]]:
    def commands(row: Row) -> list[str]:
        if row["steps"] != steps or row["env"] != "PrefLab/NoLock-v0" or row["pairs"] != 2500:
            return []
        out = []
        for seeds, accs, queries in invocations:
            exact = row["accuracy"] == 1.0 and row["queries"] == 1
            if (
                row["seed"] in seeds
                and row["accuracy"] in accs
                and (exact or row["queries"] in queries)
            ):
                a = " ".join(str(x) for x in accs)
                q = " ".join(str(x) for x in queries)
                out.append(
                    f"{LLM} --steps {steps} --accuracies {a} --queries {q} --seeds {row['seed']}{tail}"
                )
        return out

    return commands


LOGS: dict[str, tuple[Callable[[Row], list[str]], str]] = {
    "mujoco_runs.jsonl": (mujoco, "mujoco_termination.md's command blocks"),
    "prefguide_runs.jsonl": (
        prefguide,
        "the config each row records (prefguide.md lists no invocation)",
    ),
    "llm_fig7_runs.jsonl": (llm(LLM_20K, 20000, ""), "llm_fig7.md's list of invocations"),
    "llm_fig7_40k_runs.jsonl": (
        llm(
            LLM_40K,
            40000,
            " --runs benchmarks/results/llm_fig7_40k_runs.jsonl --out benchmarks/results/llm_fig7_40k.md",
        ),
        "llm_fig7_40k.md's command",
    ),
}


def main() -> int:
    done: dict[Path, list[str]] = {}
    for name, (commands, where) in LOGS.items():
        path = RESULTS / name
        lines = []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            row = json.loads(line)
            if "command" not in row:
                found = commands(row)
                if len(found) != 1:
                    raise SystemExit(f"{name}:{i}: {len(found)} documented commands match {row}")
                row |= {
                    "command": found[0],
                    "command_source": f"reconstructed on 2026-11-29 from {where}; the bench did "
                    "not record commands when this row was written",
                }
            lines.append(json.dumps(row))
        done[path] = lines
    for path, lines in done.items():
        path.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
