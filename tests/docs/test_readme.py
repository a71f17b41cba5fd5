"""README.md, the front door: every ``preflab ...`` command of its bash blocks runs as written
(parsed from the README, so a command added later is tested automatically; the machinery is
tests/docs/commands.py), and it keeps what a newcomer needs: the two commands exactly as CI runs
them, the main job's expected final table, at most 200 lines, and links into the site that
exist. The pages the README's long sections moved to are tested by tests/docs/test_pages.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import commands as docs

README = docs.ROOT / "README.md"
COMMANDS = docs.commands_of(README)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory README commands run in (a tiny finished run at runs/tiny is made when a
    command reads it)."""
    return docs.make_workspace(tmp_path_factory.mktemp("readme"), [README])


@pytest.fixture(scope="module")
def judge(workspace: Path) -> Iterator[str]:
    """A stand-in judge (preflab llm serve-fake) on a free port."""
    port = docs.free_port()
    cmd = docs.cli("llm", "serve-fake", "--port", str(port))
    for _proc in docs.serve(cmd, "stop with Ctrl-C"):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("command", docs.params(COMMANDS))
def test_readme_command_runs_as_written(
    command: docs.Command, workspace: Path, request: pytest.FixtureRequest
) -> None:
    docs.run_command(command, workspace, request)


def test_every_readme_command_has_a_plan() -> None:
    assert COMMANDS, "no preflab commands found in README.md"
    for c in COMMANDS:
        docs.plan_for(c.text)


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md is over 200 lines: move a section to docs/"
    # the two commands, exactly as .ci/run and a newcomer type them
    assert "\nbash scripts/setup.sh && .venv/bin/preflab train\n" in text
    assert "\nbash scripts/test.sh\n" in text
    # the main job's expected final table (the same as Getting started's)
    table = re.search(r"```\n(┏.*?┘)\n```", text, flags=re.S)
    assert table, "README.md lost the main job's expected final table"
    assert "│ true_return     │    -108.382 │" in table.group(1)
    started = (docs.ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert table.group(1) in started, "the README's table and Getting started's differ"
    assert "![" in text and "docs/screenshots/" in text, "README.md lost its studio screenshot"
    assert "## How to cite" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (docs.ROOT / link).is_file(), f"README.md links {link}, which does not exist"
