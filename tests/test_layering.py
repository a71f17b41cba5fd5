"""Import layering: the one declared order of layers (:data:`preflab._layers.LAYERS`, mirroring
the folders), every import (lazy ones inside functions included; ``if TYPE_CHECKING`` imports
excepted) points down or sideways, no import circles, no module below the top imports the
``preflab`` facade; and the finer rules (records below selection, selectors on the RewardModel
protocol only)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

import preflab
from preflab._layers import LAYERS, layer_of

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


def test_records_do_not_import_selection_or_aggregators() -> None:
    found = imports("preflab.records")
    assert not hits(found, "preflab.selection") and not hits(found, "preflab.aggregate")


def test_selection_and_groupwise_import_one_way() -> None:
    assert not hits(imports("preflab.selection.selectors"), "preflab.selection.groupwise")
    assert not hits(package_imports("preflab.selection"), "preflab.aggregate")
    assert not hits(package_imports("preflab.selection"), "preflab.sources")


def test_selectors_use_the_reward_model_protocol_only() -> None:
    for mod in (
        "preflab.selection.selectors",
        "preflab.selection.groupwise",
        "preflab.sources.deciders",
    ):
        assert not hits(imports(mod), "preflab.reward.ensemble"), mod
    for f in ("selection/selectors.py", "selection/groupwise.py", "selection/exploration.py"):
        text = (ROOT / f).read_text()
        for private in (".n_members", ".pair_variance(", ".preference_probs(", ".reward("):
            assert f"ensemble{private}" not in text, (f, private)


def test_no_duck_typing_on_sources() -> None:
    for f in ("sources/base.py", "sources/human.py", "aggregate/protocol.py"):
        text = (ROOT / f).read_text()
        assert "getattr(" not in text and "hasattr(" not in text, f


ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
"""Imports that point up, each with its reason (none today)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _all_imports(path: Path) -> set[str]:
    """Every preflab module ``path`` imports, at module level or inside functions, except
    imports under ``if TYPE_CHECKING:`` (they never run)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in node.body
        for n in ast.walk(sub)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("preflab"):
            found.update(_resolve(f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(_resolve(a.name) for a in node.names if a.name.startswith("preflab"))
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Module → the preflab modules it imports; parsed on first use, not at import (every xdist
    worker collects this file, one of them runs it)."""
    return {m: {d for d in _all_imports(p) if d and d != m} for m, p in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        layer_of(m)


def test_the_layers_list_every_folder_and_root_module_once() -> None:
    listed = [name for names in LAYERS for name in names]
    assert len(listed) == len(set(listed)), sorted({n for n in listed if listed.count(n) > 1})
    tops = {"preflab"}
    for p in ROOT.iterdir():
        if p.is_dir() and (p / "__init__.py").exists():
            tops.add(f"preflab.{p.name}")
        elif p.suffix == ".py" and p.name != "__init__.py":
            tops.add(f"preflab.{p.stem}")
    assert set(listed) == tops, (sorted(tops - set(listed)), sorted(set(listed) - tops))


def test_only_the_top_layer_imports_the_facade() -> None:
    top = len(LAYERS) - 1
    below = sorted(m for m, deps in graph().items() if "preflab" in deps and layer_of(m) < top)
    assert not below, f"modules below the top import the preflab facade: {below}"


def test_imports_point_down_or_sideways() -> None:
    upward = sorted(
        (m, d)
        for m, deps in graph().items()
        for d in deps
        if layer_of(d) > layer_of(m) and (m, d) not in ALLOWED_UPWARD
    )
    assert not upward, "imports that point up a layer: " + ", ".join(
        f"{m} -> {d}" for m, d in upward
    )


def test_no_import_circles_lazy_imports_included() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph()[v]):
            if w == "preflab" or w not in graph():
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph()):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_the_layering_check_sees_lazy_imports() -> None:
    """A lazy import inside a function counts (it once closed a circle unseen)."""
    assert "preflab.selection.groupwise" in graph()["preflab.assemble"]
    assert "preflab.sources.teacher" in graph()["preflab.assemble"]


# Each case: code run in a fresh interpreter and what it must not load. The cases run in two
# fresh interpreters, one after another in the order below (each case's modules on top of those
# of the cases before it in its chain), instead of one interpreter each: what a case is checked
# against is then a superset of what its code alone loads, so an import it must not make still
# fails it, and about 8 s of CPU (the imports the cases share, torch and SB3 above all) is spent
# once per chain. A chain holds only cases whose earlier members load nothing a later one
# forbids (torch: config, make_env, loop and runs load it; studio.app must not), checked in
# the test.
LAYER_CASES: list[tuple[str, str, set[str]]] = [
    ("light", "import preflab.records", {"preflab.selection", "torch", "stable_baselines3"}),
    ("light", "import preflab.store", {"stable_baselines3", "preflab.loop"}),
    ("light", "import preflab.studio.app", {"torch", "stable_baselines3"}),
    ("torch", "import preflab.config", {"stable_baselines3", "httpx", "preflab.llm"}),
    (
        "torch",
        "from preflab.envs import make_env\nmake_env('PrefLab/Lock-v0')",
        {"httpx", "preflab.llm"},
    ),
    ("torch", "import preflab.loop", {"preflab.assemble", "preflab.runs", "preflab.studio"}),
    # start-up time: scikit-learn, scipy.stats and pandas (about two seconds of every
    # `preflab train`) load only when a crowd's viewpoints or a confidence interval needs them
    ("torch", "import preflab.runs", {"sklearn", "scipy.stats", "pandas"}),
]

_STEP_END = "-- end of a case --"


@functools.cache
def _loaded_in_chain(chain: str) -> tuple[frozenset[str], ...]:
    """``sys.modules`` after each case of ``chain``, run in order in one fresh interpreter."""
    codes = [code for c, code, _ in LAYER_CASES if c == chain]
    show = f"print('\\n'.join(sys.modules))\nprint({_STEP_END!r}, flush=True)"
    program = "\n".join(f"{code}\nimport sys\n{show}" for code in codes)
    out = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    steps = out.split(_STEP_END)[: len(codes)]
    assert len(steps) == len(codes), out
    return tuple(frozenset(step.split()) for step in steps)


@pytest.mark.parametrize(("chain", "code", "forbidden"), LAYER_CASES)
def test_modules_do_not_pull_in_upper_layers(chain: str, code: str, forbidden: set[str]) -> None:
    k = [c for ch, c, _ in LAYER_CASES if ch == chain].index(code)
    steps = _loaded_in_chain(chain)
    earlier = steps[k - 1] & forbidden if k else frozenset()
    assert not earlier, (
        f"{sorted(earlier)} loaded by a case before this one in chain {chain!r}: "
        "give this case a chain of its own in LAYER_CASES"
    )
    assert not (steps[k] & forbidden)
