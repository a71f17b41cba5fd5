"""docs/guide/routing.md: its `preflab train` commands parse and pass the config checks
(resolved with --print-config, nothing runs), and the files and options it names exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from preflab.cli.train import main
from tests.docs import commands as docs

PAGE = docs.ROOT / "docs" / "guide" / "routing.md"
TRAIN = [c for c in docs.commands_of(PAGE) if c.text.startswith("preflab train")]


@pytest.mark.parametrize("command", TRAIN, ids=lambda c: c.text[:60])
def test_the_guides_train_commands_resolve(command: docs.Command, tmp_path: Path) -> None:
    out = tmp_path / "run.toml"
    argv = shlex.split(command.text)[2:]
    assert main([*argv, "--print-config", str(out)]) == 0
    text = out.read_text()
    assert 'source = "route"' in text


def test_the_files_the_guide_names_exist() -> None:
    named = set(re.findall(r"`((?:src|tests|benchmarks)/[\w/.]+?\.py)", PAGE.read_text()))
    assert named, "the guide names the files its claims rest on"
    missing = sorted(p for p in named if not (docs.ROOT / p).is_file())
    assert not missing, missing
