"""``preflab bench studio_media`` refuses counts below 1 before it starts any worker (its whole
path runs in tests/bench/test_smoke_all.py)."""

from __future__ import annotations

import pytest

from preflab_bench.studio_media import main


@pytest.mark.parametrize(
    "flag", ["--segments", "--length", "--workers", "--size", "--warm-repeats", "--capture-repeats"]
)
def test_a_count_below_one_is_refused_with_the_flag_named(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([flag, "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} must be at least 1, got 0" in err
