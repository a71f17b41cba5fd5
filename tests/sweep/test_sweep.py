"""``preflab sweep``: spec parsing, a 2×2 smoke grid end to end (sequential and on Ray), skip
of finished trials, resume of a killed one."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.errors import ConfigError
from preflab.sweep import SweepSpec
from preflab.sweep.runner import check_trials, ray_available
from tests import warm_python

ROOT = Path(__file__).resolve().parents[2]
GRID = ("--preset", "smoke", "--axis", "total_labels=6,12", "--axis", "seed=0,1", "--name", "t")


def test_spec_from_toml_and_trial_names(tmp_path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(
        'name = "demo"\npreset = "smoke"\n[base]\nalgo = "ppo"\n[base.teacher]\nepsilon = 0.1\n'
        '[axes]\nselector = ["random", "disagreement"]\ntotal_labels = [6, 12]\nseed = [0, 1]\n'
        '"teacher.beta" = [1.0]\n'
    )
    spec = SweepSpec.load(f)
    trials = spec.trials()
    assert len(trials) == 8 and spec.x_axis == "selector"
    assert trials[0].name == "selector=random,total_labels=6,seed=0,teacher.beta=1.0"
    assert trials[-1].config.teacher.epsilon == 0.1 and trials[-1].config.teacher.beta == 1.0
    assert {t.config.total_labels for t in trials} == {6, 12}
    assert SweepSpec.from_mapping(json.loads(spec.to_json())).to_json() == spec.to_json()
    with pytest.raises(ConfigError, match="not a TrainConfig field"):
        SweepSpec(axes={"no_such": [1]})
    with pytest.raises(ConfigError, match="repeats a value"):
        SweepSpec(axes={"seed": [0, 0]})


def test_pendulum_label_spec_is_valid() -> None:
    spec = SweepSpec.load(ROOT / "benchmarks" / "sweeps" / "pendulum_labels.toml")
    trials = spec.trials()
    assert len(trials) == 12 and spec.x_axis == "total_labels"
    assert sorted({t.config.total_labels for t in trials}) == [50, 100, 200, 400]
    check_trials(trials[:1])


def _rows(d: Path) -> list[dict[str, str]]:
    with (d / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_sequential_sweep_end_to_end_then_skips_finished(tmp_path) -> None:
    d = tmp_path / "sw"
    assert main(["sweep", *GRID, "--sequential", "--out", str(d)]) == 0
    rows = _rows(d)
    assert [r["trial"] for r in rows] == [
        "total_labels=6,seed=0",
        "total_labels=6,seed=1",
        "total_labels=12,seed=0",
        "total_labels=12,seed=1",
    ]
    assert all(r["status"] == "done" for r in rows)
    assert {int(r["n_labels"]) for r in rows} == {6, 12}
    md = (d / "results.md").read_text()
    assert "True return by total_labels" in md and "± 95% CI" in md
    assert (d / "true_return.png").stat().st_size > 1000
    for r in rows:  # each trial is an ordinary run directory
        t = d / "trials" / r["trial"]
        assert (t / "config.json").is_file() and (t / "summary.json").is_file()
        assert (t / "checkpoints" / "LATEST").is_file()
    stamps = {p: p.stat().st_mtime_ns for p in d.glob("trials/*/summary.json")}
    assert main(["sweep", *GRID, "--sequential", "--out", str(d)]) == 0  # nothing runs again
    assert {p: p.stat().st_mtime_ns for p in d.glob("trials/*/summary.json")} == stamps
    # a summary that is no object is no finished trial: that one runs again, the others not
    bad = d / "trials" / "total_labels=6,seed=1" / "summary.json"
    bad.write_text("[1]")
    assert main(["sweep", *GRID, "--sequential", "--out", str(d)]) == 0
    assert isinstance(json.loads(bad.read_text()), dict)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != bad)
    # another spec in the same directory is refused
    assert main(["sweep", "--preset", "smoke", "--axis", "seed=5", "--out", str(d)]) == 1


def test_killed_sweep_resumes_its_trial(tmp_path) -> None:
    d = tmp_path / "sw"
    env = os.environ | {"PREFLAB_FAILPOINT": "round_end:2", "PYTHONPATH": str(ROOT / "src")}
    args = [
        sys.executable,
        "-m",
        "preflab.cli.main",
        "sweep",
        "--preset",
        "smoke",
        "--axis",
        "seed=0",
        "--sequential",
        "--out",
        str(d),
    ]
    # a real process, forked from a warm interpreter (tests/warm_python.py): no ~5 s of imports
    p = warm_python.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9  # SIGKILL at the failpoint, in the middle of the trial
    t = d / "trials" / "seed=0"
    assert (t / "checkpoints" / "LATEST").is_file() and not (t / "summary.json").exists()
    assert (
        main(["sweep", "--preset", "smoke", "--axis", "seed=0", "--sequential", "--out", str(d)])
        == 0
    )
    assert (t / "summary.json").is_file() and _rows(d)[0]["status"] == "done"


@pytest.mark.slow
@pytest.mark.skipif(not ray_available(), reason="ray is not installed (pip install preflab[sweep])")
def test_ray_sweep_matches_sequential(tmp_path) -> None:
    seq, ray = tmp_path / "seq", tmp_path / "ray"
    assert main(["sweep", *GRID, "--sequential", "--out", str(seq)]) == 0
    assert main(["sweep", *GRID, "--ray", "--num-cpus", "2", "--out", str(ray)]) == 0
    a, b = _rows(seq), _rows(ray)
    assert [r["true_return"] for r in a] == [r["true_return"] for r in b]  # same seeds, same runs
    assert (ray / "true_return.png").is_file() and (ray / "results.md").is_file()


def test_seeds_only_sweep_is_one_row_over_seeds(tmp_path) -> None:
    d = tmp_path / "sw"
    args = ["sweep", "--preset", "smoke", "--axis", "seed=0,1,2", "--set", "total_steps=400"]
    assert main([*args, "--set", "eval_episodes=1", "--sequential", "--out", str(d)]) == 0
    returns = [float(r["true_return"]) for r in _rows(d)]
    assert len(returns) == 3
    md = (d / "results.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| all |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:3] == ["all", "0,1,2", "3"]
    assert float(cells[3]) == pytest.approx(sum(returns) / 3, rel=1e-3)
    assert float(cells[4]) > 0  # a CI over three seeds, not nan
    assert (d / "true_return.png").stat().st_size > 1000
