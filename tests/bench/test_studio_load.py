"""Smoke run of the studio load benchmark (tiny: 3 annotators, 2 s)."""

from __future__ import annotations

from preflab_bench import studio_load
from tests.bench.test_smoke_all import check_tables


def test_studio_load_smoke(tmp_path) -> None:
    out = tmp_path / "studio_load.md"
    argv = ["--annotators", "3", "--duration", "2", "--saturation-duration", "1"]
    assert studio_load.main([*argv, "--round-s", "0.5", "--per-round", "5", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Studio load") and "Command: `preflab bench studio_load" in text
    assert "acknowledged but missing: 0." in text and "(0 seen twice)" in text
    check_tables(out)
