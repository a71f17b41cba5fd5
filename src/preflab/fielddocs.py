"""The docstrings under dataclass fields, read from source without importing it.

``preflab train --help`` takes its one-line descriptions from here (so help stays fast: the config
modules import torch), and ``--print-config`` writes them as comments.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class FieldDoc:
    """One dataclass field as written in its source."""

    name: str
    """The field's name."""
    annotation: str
    """Its type annotation, as written."""
    default: str
    """Its default, as written ('' when it has none or a default factory)."""
    doc: str
    """The docstring under it, whitespace collapsed ('' when there is none)."""

    @property
    def summary(self) -> str:
        """The docstring's first sentence."""
        return first_sentence(self.doc)


def first_sentence(text: str) -> str:
    """The text up to the first period that ends a sentence (one followed by a space or the end;
    not the period of 'e.g.', 'i.e.', 'vs.' or 'et al.')."""
    text = " ".join(text.split())
    match = re.search(
        r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\bal)(?<!\bAlg)(?<!\bFig)(?<!\bEq)(?<!\bSec)\.(\s|$)",
        text,
    )
    return text if match is None else text[: match.start() + 1]


@cache
def _module_tree(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)


def class_docs(path: str | Path, class_name: str) -> dict[str, FieldDoc]:
    """The fields of class ``class_name`` defined in the module file ``path``, in order."""
    tree = _module_tree(str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return _fields(node)
    raise KeyError(f"no class {class_name} in {path}")


def module_literal(path: str | Path, name: str) -> tuple[str, ...]:
    """The values of a module-level ``Name = Literal[...]`` alias in ``path`` (empty if none)."""
    for node in _module_tree(str(path)).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Subscript)
        ):
            elts = node.value.slice
            items = elts.elts if isinstance(elts, ast.Tuple) else [elts]
            return tuple(
                str(e.value)
                for e in items
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return ()


def docs_of(cls: type) -> dict[str, FieldDoc]:
    """The fields of an imported dataclass ``cls`` (its source file is read)."""
    path = inspect.getsourcefile(cls)
    if path is None:
        return {}
    try:
        return class_docs(path, cls.__name__)
    except (KeyError, OSError):
        return {}


def _fields(node: ast.ClassDef) -> dict[str, FieldDoc]:
    out: dict[str, FieldDoc] = {}
    body = node.body
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        doc = ""
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            doc = " ".join(nxt.value.value.split())
        default = ""
        if stmt.value is not None and not (
            isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "field"
        ):
            default = ast.unparse(stmt.value)
        out[stmt.target.id] = FieldDoc(
            name=stmt.target.id,
            annotation=ast.unparse(stmt.annotation),
            default=default,
            doc=doc,
        )
    return out


__all__ = ["FieldDoc", "class_docs", "docs_of", "first_sentence", "module_literal"]
