"""docs/guide/efficiency-bench.md: its command parses with the bench's options (nothing runs),
the flag values its table states are the bench's defaults, and the files it names exist."""

from __future__ import annotations

import re
import shlex

from preflab_bench.efficiency import arm_parts, parser
from tests.docs import commands as docs

PAGE = docs.ROOT / "docs" / "guide" / "efficiency-bench.md"
BENCH = [c for c in docs.commands_of(PAGE) if c.text.startswith("preflab bench efficiency")]


def test_the_guides_command_parses_and_its_combo_has_five_parts() -> None:
    (command,) = BENCH
    args = parser().parse_args(shlex.split(command.text)[3:])
    assert arm_parts(args, "combo") == ("pretrain", "surf", "qpa", "rime", "rune")
    assert args.stop_accuracy == 0.97


def test_the_flag_values_the_guide_states_are_the_defaults() -> None:
    text = PAGE.read_text()
    defaults = vars(parser().parse_args([]))
    stated = re.findall(r"--(surf|qpa|rune)-([a-z-]+) ([\d.e-]+)", text.split("Before issue")[0])
    assert len(stated) == 10
    for part, name, value in stated:
        assert float(defaults[f"{part}_{name.replace('-', '_')}"]) == float(value), name


def test_the_guide_names_files_that_exist() -> None:
    named = set(
        re.findall(r"`((?:src|tests|benchmarks|docs)/[\w/.]+?\.(?:py|toml|md))`", PAGE.read_text())
    )
    named |= set(re.findall(r"(docs/guide/[\w-]+\.md)", PAGE.read_text()))
    assert named
    missing = sorted(p for p in named if not (docs.ROOT / p).is_file())
    assert not missing, missing
