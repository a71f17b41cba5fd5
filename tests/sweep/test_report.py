"""The sweep report of trials that differ only by seed: one row per configuration with the mean
and a Student-t 95% CI over seeds (checked against a hand-computed interval), and a plot of
learning curves over seeds; read from synthetic trial directories (no training)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import matplotlib
import pytest

from preflab.sweep import SweepSpec
from preflab.sweep.report import band, over_seeds, write_report

T_975_3 = 3.182446305
"""Student t quantile t(0.975; 3 degrees of freedom), from a printed table."""


def _row(seed: int, ret: float, status: str = "done", **axes: object) -> dict[str, object]:
    return {"trial": f"seed={seed}", "seed": seed, "status": status, "true_return": ret, **axes}


def test_rows_differing_only_by_seed_are_one_row_with_a_t_interval() -> None:
    rows = [_row(s, r, algo="ppo") for s, r in enumerate([1.0, 2.0, 3.0, 4.0])]
    rows += [_row(0, 10.0, algo="sac"), _row(1, math.nan, algo="sac")]
    rows += [_row(2, 99.0, status="failed", algo="sac")]
    ppo, sac = over_seeds(rows, ["algo", "seed"])
    # mean 2.5; sample variance (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3; half = t · s / √4
    assert ppo["configuration"] == "algo=ppo" and ppo["n"] == 4 and ppo["seeds"] == "0,1,2,3"
    assert ppo["true_return"] == 2.5
    assert ppo["ci95"] == pytest.approx(T_975_3 * math.sqrt(5 / 3) / 2, rel=1e-6)
    assert (ppo["min"], ppo["max"]) == (1.0, 4.0)
    # a failed trial and a nan return do not count; one seed has no interval
    assert sac["n"] == 1 and sac["true_return"] == 10.0 and math.isnan(sac["ci95"])


def test_band_is_mean_and_t_interval_per_step() -> None:
    steps, mean, half = band([([1.0, 2.0], [0.0, 2.0]), ([1.0, 2.0], [2.0, 4.0]), ([2.0], [6.0])])
    assert steps == [1.0, 2.0] and mean == [1.0, 4.0]
    # step 1: {0, 2}, s = √2, t(0.975; 1) = 12.7062047; step 2: {2, 4, 6}, s = 2, t(0.975; 2)
    assert half[0] == pytest.approx(12.7062047 * math.sqrt(2) / math.sqrt(2), rel=1e-6)
    assert half[1] == pytest.approx(4.30265273 * 2 / math.sqrt(3), rel=1e-6)


def _trial(d: Path, name: str, ret: float, curve: list[tuple[int, float]]) -> None:
    t = d / "trials" / name
    t.mkdir(parents=True)
    (t / "summary.json").write_text(json.dumps({"true_return": ret, "n_labels": 5}))
    with (t / "metrics.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "env_steps", "train_true_return"])
        w.writerows([i, s, r] for i, (s, r) in enumerate(curve))


def _report_svg(spec: SweepSpec, out) -> dict:
    """write_report under the svg backend, the caller's backend put back afterwards."""
    before = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        return write_report(spec, out)
    finally:
        matplotlib.use(before)


def test_seeds_only_sweep_report_from_trial_directories(tmp_path) -> None:
    spec = SweepSpec(preset="smoke", axes={"seed": [0, 1, 2, 3]}, name="s")
    for seed, ret in enumerate([1.0, 2.0, 3.0, 4.0]):
        _trial(tmp_path, f"seed={seed}", ret, [(200, math.nan), (400, -5.0 + seed)])
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # the caller's backend (a notebook's, say) is left as it is
    try:
        paths = write_report(spec, tmp_path)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    md = paths["md"].read_text()
    assert "Student t interval (scipy.stats.t)" in md and "n = seeds" in md
    line = next(x for x in md.splitlines() if x.startswith("| all |"))
    assert line == "| all | 0,1,2,3 | 4 | 2.5 | 2.054 | 1 | 4 |"
    with paths["by_configuration"].open() as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["n"]) == 4 and float(row["ci95"]) == pytest.approx(2.0543, abs=1e-4)
    assert paths["plot"].stat().st_size > 1000


def test_an_axis_of_list_values_is_grouped_and_shown_as_written(tmp_path) -> None:
    # net_arch = [[16, 16], [8, 8]]: list values, unhashable as they are
    spec = SweepSpec(preset="smoke", axes={"net_arch": [[16, 16], [8, 8]], "seed": [0, 1]})
    rets = {(16, 0): 1.0, (16, 1): 3.0, (8, 0): 5.0, (8, 1): 7.0}
    for t in spec.trials():
        ret = rets[(t.values["net_arch"][0], t.values["seed"])]
        _trial(tmp_path, t.name, ret, [(200, ret)])
    paths = _report_svg(spec, tmp_path)
    md = paths["md"].read_text()
    assert "| all | [16, 16] | 2 | 2 |" in md and "| all | [8, 8] | 2 | 6 |" in md
    assert paths["plot"].stat().st_size > 1000


@pytest.mark.parametrize("summary", ["[1]", "{", '"done"'])
def test_a_summary_json_that_is_no_object_is_an_unreadable_trial(tmp_path, summary) -> None:
    """A rerun sweep reads each finished trial's summary.json: one that is not a JSON object is
    reported as 'unreadable' (as one that is not JSON), and the report is still written."""
    spec = SweepSpec(preset="smoke", axes={"seed": [0, 1]}, name="s")
    _trial(tmp_path, "seed=0", 1.0, [(200, 1.0)])
    _trial(tmp_path, "seed=1", 2.0, [(200, 2.0)])
    (tmp_path / "trials" / "seed=1" / "summary.json").write_text(summary)
    paths = _report_svg(spec, tmp_path)
    with paths["csv"].open() as f:
        status = {r["trial"]: r["status"] for r in csv.DictReader(f)}
    assert status == {"seed=0": "done", "seed=1": "unreadable"}
