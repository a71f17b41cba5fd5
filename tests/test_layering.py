"""Import layering (issue #8): records below groupwise, no selection ↔ groupwise circle,
aggregators below nothing they feed, and selectors depending on the RewardModel protocol only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import preflab

ROOT = Path(preflab.__file__).parent


def imports(module: str) -> set[str]:
    """Every preflab module a module (or package) imports, lazily or not."""
    rel = module.removeprefix("preflab").lstrip(".").replace(".", "/")
    path = ROOT / rel / "__init__.py" if (ROOT / rel).is_dir() else ROOT / f"{rel}.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("preflab"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("preflab"))
    return out


def package_imports(package: str) -> set[str]:
    base = ROOT / package.removeprefix("preflab.").replace(".", "/")
    out: set[str] = set()
    for f in base.rglob("*.py"):
        mod = "preflab." + ".".join(f.relative_to(ROOT).with_suffix("").parts)
        out |= imports(mod.removesuffix(".__init__"))
    return out


def hits(found: set[str], prefix: str) -> set[str]:
    return {m for m in found if m == prefix or m.startswith(prefix + ".")}


def test_records_do_not_import_groupwise_or_aggregators() -> None:
    found = imports("preflab.records")
    assert not hits(found, "preflab.groupwise") and not hits(found, "preflab.aggregate")


def test_selection_and_groupwise_import_one_way() -> None:
    assert not hits(imports("preflab.selection"), "preflab.groupwise")
    grp = package_imports("preflab.groupwise")
    assert not hits(grp, "preflab.selection"), "groupwise must use preflab.selection"
    assert not hits(grp, "preflab.aggregate")


def test_selectors_use_the_reward_model_protocol_only() -> None:
    for mod in (
        "preflab.selection",
        "preflab.groupwise.selector",
        "preflab.groupwise.deciders",
    ):
        assert not hits(imports(mod), "preflab.reward.ensemble"), mod
    for f in ("selection_base.py", "groupwise/selector.py", "groupwise/exploration.py"):
        text = (ROOT / f).read_text()
        for private in (".n_members", ".pair_variance(", ".preference_probs(", ".reward("):
            assert f"ensemble{private}" not in text, (f, private)


def test_no_duck_typing_on_sources() -> None:
    for f in ("sources/base.py", "sources/human.py", "aggregate/protocol.py"):
        text = (ROOT / f).read_text()
        assert "getattr(" not in text and "hasattr(" not in text, f


SRC = ROOT


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
