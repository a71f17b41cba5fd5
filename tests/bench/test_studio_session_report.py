"""``preflab bench studio_session --report``: a plan entry's report rebuilt from the run log,
with the return target judged on the interval corrected for the plan's looks."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from scipy import stats

from preflab_bench.studio_session import main

LOG = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "studio_session_runs.jsonl"


def test_report_rebuilds_a_plan_entry_with_the_look_corrected_interval(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    shutil.copyfile(LOG, runs)
    rows = [json.loads(x) for x in runs.read_text().splitlines() if "/tmp/ss3/s" in x]
    studio = {r["seed"]: r["true_return"] for r in rows if r["arm"] == "studio"}
    oracle = {r["seed"]: r["true_return"] for r in rows if r["arm"] == "oracle"}
    seeds = sorted(studio.keys() & oracle.keys())
    assert len(seeds) >= 2
    ratios = [100 * studio[s] / oracle[s] for s in seeds]
    # the interval computed independently: Student t at 1 − 0.05/3 (Bonferroni over 3 looks)
    n = len(ratios)
    mean = sum(ratios) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in ratios) / (n - 1))
    half = stats.t.ppf(1 - 0.05 / 3 / 2, n - 1) * sd / math.sqrt(n)
    out = tmp_path / "report.md"
    argv = ["--env-id", "Hopper-v5", "--labels", "200", "--total-steps", "40000"]
    argv += ["--looks", "3", "--report", "/tmp/ss3/s", "--runs", str(runs), "--out", str(out)]
    assert main(argv) == 0
    text = out.read_text()
    assert f"seeds {sorted(studio)}" in text
    assert f"98.3% CI over 3 look(s): [{mean - half:.1f}, {mean + half:.1f}] %" in text
    row = next(line for line in text.splitlines() if line.startswith("| return ≥ 80%"))
    assert ("met" in row) == (mean - half >= 80)
