"""preflab_bench._run_curves: a run's metrics.csv column read back, the IQM curve across runs and
its reading at fractions of the step budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.rundir.output import RunOutput
from preflab_bench._run_curves import at_fractions, iqm_curve, read_column


def test_a_missing_file_reads_as_none_and_non_finite_values_are_dropped(tmp_path: Path) -> None:
    assert read_column(tmp_path / "metrics.csv", "train_true_return") is None
    out = RunOutput(tmp_path)
    for step, value in ((100, float("nan")), (200, 5.0), (300, 7.0), (300, 9.0)):
        out.append_metrics({"env_steps": step, "train_true_return": value})
    # the step written twice (a resumed run) keeps its last row
    assert read_column(tmp_path / "metrics.csv", "train_true_return") == {200.0: 5.0, 300.0: 9.0}


def test_the_curve_keeps_the_steps_every_run_has_and_reads_fractions_at_or_below(
    tmp_path: Path,
) -> None:
    runs = [
        {100.0: 1.0, 200.0: 2.0, 300.0: 3.0},
        {200.0: 4.0, 300.0: 5.0},
        {200.0: 6.0, 300.0: 7.0},
    ]
    c = iqm_curve(runs)
    assert c.steps.tolist() == [200.0, 300.0] and c.n_runs == 3
    # IQM of three values: scipy's 25 % trim drops none of 3 (int(0.75) = 0), so the mean
    assert [p.point for p in c.points] == pytest.approx([4.0, 5.0])
    got = at_fractions(c, 400.0, (0.25, 0.5, 0.75, 1.0))
    assert got[0] is None  # no step at or below 100
    assert [g[0] for g in got[1:] if g] == [200.0, 300.0, 300.0]
    assert iqm_curve([{1.0: 1.0}, {2.0: 2.0}]).points == ()  # no common step: no point
