"""Nothing imports upward: checked on fresh interpreters and on the module-level import graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "preflab"


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return set(out.split())


@pytest.mark.parametrize(
    ("code", "forbidden"),
    [
        ("import preflab.records", {"preflab.groupwise", "torch", "stable_baselines3"}),
        ("import preflab.config", {"stable_baselines3", "httpx", "preflab.llm"}),
        (
            "from preflab.envs import make_env\nmake_env('PrefLab/Lock-v0')",
            {"httpx", "preflab.llm"},
        ),
        ("import preflab.store", {"stable_baselines3", "preflab.loop"}),
    ],
)
def test_modules_do_not_pull_in_upper_layers(code: str, forbidden: set[str]) -> None:
    assert not (_loaded_after(code) & forbidden)


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:  # module level only: imports inside functions are deliberate
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("preflab"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("preflab"))
    return found


def test_no_import_cycles_between_modules() -> None:
    graph = {
        _module_name(p): _top_level_imports(p)
        for p in SRC.rglob("*.py")
        if p.name != "__init__.py"  # packages re-export; cycles through them are not layering
    }
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m: str, stack: list[str]) -> bool:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle.extend([*stack[stack.index(d) :], d] if d in stack else [m, d])
                return True
            if state.get(d) is None and visit(d, [*stack, d]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if state.get(m) is None and visit(m, [m]):
            break
    assert not cycle, " -> ".join(cycle)
