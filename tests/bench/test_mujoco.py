"""The MuJoCo reproduction's verdict on the 80% target, paired by seed."""

from __future__ import annotations

from preflab_bench.mujoco import verdict


def test_verdict_reads_the_ci_of_the_paired_difference() -> None:
    assert verdict([10.0, 12.0, 14.0]).endswith("met")  # 12 ± 5: above 0
    assert verdict([-30.0, 10.0, 40.0]).endswith("not shown")  # spans 0
    assert verdict([-14.0, -12.0, -10.0]).endswith("missed")
    assert "one seed" in verdict([5.0]) and verdict([]) == "—"
