"""MkDocs hooks (mkdocs.yml ``hooks:``): the generated pages and their place in the navigation.

- Results: one page per paper and per benchmark from ``benchmarks/results/`` (gen_results.py);
- CLI reference: every command's ``--help`` (gen_cli.py);
- Guides: every ``docs/guide/*.md`` that exists when the site is built, by its first heading;
- the claims page (concepts/claims.md): its runs-done counts and entry table (gen_claims.py);
- the API reference: the docstrings' Sphinx roles (``:func:`x```) shown as plain code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_claims  # noqa: E402
import gen_cli  # noqa: E402
import gen_results  # noqa: E402


def _guides() -> list[object]:
    out: list[object] = []
    for p in sorted((HERE / "guide").glob("*.md")):
        m = re.search(r"^# (.+)$", p.read_text(encoding="utf-8"), re.M)
        out.append({(m.group(1).strip() if m else p.stem): f"guide/{p.name}"})
    return out


def on_config(config: Any) -> Any:
    nav = config["nav"]
    nav.append({"Results": gen_results.nav()})
    guides = _guides()
    if guides:
        nav.append({"Guides": guides})
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    generated: dict[str, str | Path] = {"cli.md": gen_cli.page()}
    generated.update(gen_results.generate())
    for uri, content in generated.items():
        if isinstance(content, Path):
            files.append(File.generated(config, uri, abs_src_path=str(content)))
        else:
            files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "concepts/claims.md":
        return gen_claims.fill(markdown)
    return markdown


SPHINX_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|obj|exc):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return SPHINX_ROLE.sub("", html)
