"""docs/guide/ray.md: every option it names is one that ``preflab sweep`` or
``benchmarks/run_queue.py run`` accepts, and the files it names exist."""

from __future__ import annotations

import re

import pytest

from preflab.cli.main import main
from tests.bench.test_queue_ray import queue
from tests.docs import commands as docs

PAGE = docs.ROOT / "docs" / "guide" / "ray.md"
RAY_START = {"--head", "--port", "--num-gpus", "--node-ip-address", "--resources"}
"""Options of ``ray start`` in the recipe (Ray's own CLI, not PrefLab's)."""


def _help(capsys: pytest.CaptureFixture[str], run: object, argv: list[str]) -> str:
    with pytest.raises(SystemExit):
        run(argv)  # type: ignore[operator]
    return capsys.readouterr().out


def test_the_options_the_guide_names_exist(capsys: pytest.CaptureFixture[str]) -> None:
    sweep = _help(capsys, main, ["sweep", "--help"])
    run = _help(capsys, queue.main, ["run", "--help"])
    named = set(re.findall(r"(--[a-z][a-z-]+)", PAGE.read_text()))
    assert {"--cpus-per-trial", "--gpus-per-trial", "--storage", "--cpus-per-run"} <= named
    unknown = sorted(f for f in named - RAY_START if f not in sweep and f not in run)
    assert not unknown, unknown


def test_the_guide_names_files_that_exist() -> None:
    text = PAGE.read_text()
    named = set(re.findall(r"`((?:src|tests|benchmarks|docs)/[\w/.]+?\.(?:py|toml|md))", text))
    named |= {f"docs/guide/{m}" for m in re.findall(r"\]\(([\w-]+\.md)\)", text)}
    assert len(named) >= 6
    missing = sorted(p for p in named if not (docs.ROOT / p).is_file())
    assert not missing, missing
