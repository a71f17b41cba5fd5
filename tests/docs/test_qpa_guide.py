"""docs/guide/qpa.md: its `preflab train` commands parse and pass the config checks with QPA's
three parts on (resolved with --print-config, nothing runs), and the files it names exist."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from preflab.cli.train import main
from tests.docs import commands as docs

PAGE = docs.ROOT / "docs" / "guide" / "qpa.md"
TRAIN = [c for c in docs.commands_of(PAGE) if c.text.startswith("preflab train")]


@pytest.mark.parametrize("command", TRAIN, ids=lambda c: c.text[:60])
def test_the_guides_train_commands_resolve(command: docs.Command, tmp_path: Path) -> None:
    out = tmp_path / "run.toml"
    argv = shlex.split(command.text)[2:]
    assert main([*argv, "--print-config", str(out)]) == 0
    config = tomllib.loads(out.read_text())
    assert config["selector"] == "policy-aligned"
    assert config["replay"]["hybrid"] is True
    assert config["fit"]["snippets"]["copies"] == 20


def test_the_guide_has_its_commands_and_names_files_that_exist() -> None:
    assert len(TRAIN) == 2
    named = set(re.findall(r"`((?:src|tests)/[\w/.]+?\.(?:py|toml))`", PAGE.read_text()))
    assert named, "the guide names the files its claims rest on"
    missing = sorted(p for p in named if not (docs.ROOT / p).is_file())
    assert not missing, missing
