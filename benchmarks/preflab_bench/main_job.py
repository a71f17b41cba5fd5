"""The main job (``preflab train`` with its defaults) against an earlier commit, side by side.

Each seed runs this tree's ``preflab train`` and the baseline commit's (checked out with
``git worktree`` into a temporary folder and imported through PYTHONPATH, same interpreter and
packages), alternating so that machine load hits both alike. Reports true return and training
wall time per side, with 95% CIs and the ratio of wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from preflab.rundir.reporting import fmt_ci, md_table, mean_ci
from preflab_bench import _paths
from preflab_bench._report import RESULTS, header, write_report

REPO = _paths.REPO


SMOKE_TRAIN = [
    "--algo", "ppo", "--total-steps", "400", "--initial-steps", "200",
    "--steps-per-round", "200", "--total-labels", "6", "--segment-length", "20",
    "--pool-size", "40", "--eval-episodes", "1", "--first-fit-epochs", "3",
]  # fmt: skip
"""``preflab train`` flags of a tiny run (``--smoke``: the test suite)."""


def _run(src: Path, run_dir: Path, seed: int, extra: list[str] | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-m", "preflab.cli.main", "train", "--seed", str(seed)]
    cmd += ["--run-dir", str(run_dir), *(extra or [])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench main_job", description=__doc__)
    ap.add_argument("--baseline", default="HEAD~1", help="git revision to compare against")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--out", type=Path, default=RESULTS / "main_job.md")
    ap.add_argument("--smoke", action="store_true", help="one seed, a tiny PPO run (tests)")
    args = ap.parse_args(argv)
    extra = SMOKE_TRAIN if args.smoke else None
    if args.smoke:
        args.seeds = args.seeds[:1]
    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.baseline],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    rows: dict[str, list[dict]] = {"this tree": [], f"baseline {rev}": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), rev],
            check=True,
            capture_output=True,
        )
        try:
            for seed in args.seeds:
                for name, src in ((f"baseline {rev}", base / "src"), ("this tree", REPO / "src")):
                    out = _run(src, Path(tmp) / f"{name.split()[0]}-{seed}", seed, extra)
                    rows[name].append(out)
                    sys.stderr.write(
                        f"{name} seed {seed}: {out['true_return']:.1f} {out['wall_s']:.0f}s\n"
                    )
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                capture_output=True,
            )
    table = []
    for name, rs in rows.items():
        table.append(
            [
                name,
                fmt_ci([r["true_return"] for r in rs]),
                fmt_ci([r["wall_s"] for r in rs]),
                fmt_ci([r["reward_accuracy"] for r in rs]),
                rs[0]["n_labels"],
                rs[0]["env_steps"],
            ]
        )
    ratio = [
        a["wall_s"] / b["wall_s"]
        for a, b in zip(rows["this tree"], rows[f"baseline {rev}"], strict=True)
    ]
    m, h = mean_ci(ratio)
    md = header(
        "Main job (`preflab train` defaults: Pendulum-v1, SAC, 100 labels, 20k steps) vs "
        f"commit {rev}",
        "main_job",
        argv,
        f"{len(args.seeds)} seeds × 2 sides, alternating in one invocation on this 2-core machine",
    )
    md += md_table(
        ["side", "true return", "train wall s", "reward accuracy", "labels", "env steps"], table
    )
    md += f"\nWall-time ratio (this tree / baseline), per seed: {', '.join(f'{r:.2f}' for r in ratio)}; mean {m:.2f} ± {h:.2f}\n"
    write_report(md, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
