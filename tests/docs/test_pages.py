"""The site's pages as a reader runs them: every ``preflab ...`` command of the bash blocks of
Getting started, the tutorials and the concepts pages runs as written, at tiny budgets
(tests/docs/commands.py), and each page's python blocks run in order as one script. A command
the README also shows is run by tests/docs/test_readme.py only; a command on two pages, once.
Pages written by other features (docs/guide/*.md) carry their own tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import commands as docs

DOCS = docs.ROOT / "docs"
PAGES = [
    DOCS / "getting-started.md",
    *sorted((DOCS / "tutorials").glob("*.md")),
    *sorted((DOCS / "concepts").glob("*.md")),
]
"""The pages whose commands and code the tests run."""


def _commands() -> list[docs.Command]:
    seen = {c.text for c in docs.commands_of(docs.ROOT / "README.md")}
    out = []
    for page in PAGES:
        for c in docs.commands_of(page):
            if c.text not in seen:
                seen.add(c.text)
                out.append(c)
    return out


COMMANDS = _commands()
PYTHON_PAGES = [p for p in PAGES if docs.python_code(p)[0].strip()]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return docs.make_workspace(tmp_path_factory.mktemp("pages"), PAGES)


@pytest.fixture(scope="module")
def judge(workspace: Path) -> Iterator[str]:
    """A stand-in language-model judge (preflab llm serve-fake) on a free port."""
    port = docs.free_port()
    for _proc in docs.serve(docs.cli("llm", "serve-fake", "--port", str(port)), "stop with Ctrl-C"):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def vlm(workspace: Path) -> Iterator[str]:
    """The stand-in vision-language server (python -m preflab.testing.vlmserver) on a free port."""
    import sys

    port = docs.free_port()
    cmd = [sys.executable, "-m", "preflab.testing.vlmserver", "--rule", "upright"]
    for _proc in docs.serve([*cmd, "--port", str(port)], "stand-in VLM server"):
        yield f"http://127.0.0.1:{port}/v1"


def test_the_pages_have_commands_and_code() -> None:
    tutorials = {p.stem for p in PYTHON_PAGES} | {Path(c.page).stem for c in COMMANDS}
    for page in (DOCS / "tutorials").glob("*.md"):
        if page.stem != "index":
            assert page.stem in tutorials, f"tutorial {page.name} has nothing the tests run"
    for c in COMMANDS:
        docs.plan_for(c.text)


@pytest.mark.parametrize("command", docs.params(COMMANDS))
def test_page_command_runs_as_written(
    command: docs.Command, workspace: Path, request: pytest.FixtureRequest
) -> None:
    docs.run_command(command, workspace, request)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: p.stem)
def test_page_python_runs_as_written(page: Path, tmp_path: Path) -> None:
    docs.make_workspace(tmp_path, [page])
    docs.run_python(page, tmp_path)
