"""The documentation site: its generators (docs/gen_cli.py, docs/gen_results.py) cover what they
must and copy rather than invent, and the built site loads nothing from another host.

scripts/test.sh builds the site (``mkdocs build --strict``) into ``site/`` before pytest and
names it in ``PREFLAB_DOCS_SITE``; the site test reads that build, or ``site/`` when it is newer
than the sources, or builds one into a temporary directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import gen_cli  # noqa: E402
import gen_results  # noqa: E402


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_the_cli_reference_covers_every_command() -> None:
    from preflab.cli.main import COMMANDS

    documented = {argv[0] for argv in gen_cli.COMMANDS}
    assert documented == set(COMMANDS), "docs/gen_cli.py: add the new command to COMMANDS"
    text = gen_cli.help_text(("eval", "--help"))
    assert text.startswith("usage: preflab eval") and "--episodes" in text


def test_every_result_file_is_on_a_results_page() -> None:
    pages = gen_results.generate()
    for path in gen_results.RESULTS.rglob("*.md"):
        assert gen_results.file_page(path) in pages, f"{path.name} is on no Results page"
    benches = gen_results.group_files()
    for slug, _title, _what, names in gen_results.PAPERS:
        assert f"results/paper-{slug}.md" in pages
        assert any(n in benches for n in names), f"paper {slug} has no benchmark with results"
    plan, _voids = gen_results.load_plan()
    for e in plan:
        if e["bench"] in benches:
            assert f"### `{e['id']}`" in pages[f"results/{e['bench']}.md"], e["id"]


def test_verdicts_on_the_results_pages_are_quoted_from_the_result_files() -> None:
    plan, voids = gen_results.load_plan()
    benches = gen_results.group_files()
    quoted = 0
    for e in plan:
        b = benches.get(e["bench"])
        for path, line in gen_results.verdict_lines(e["id"], b.files if b else []):
            assert _squash(line) in _squash(path.read_text(encoding="utf-8")), line[:80]
            quoted += 1
    assert quoted >= 10
    bpref = gen_results.generate()["results/bpref.md"]
    assert isinstance(bpref, str)
    for void in voids:
        block = bpref.split(f"### `{void}`", 1)[1].split("\n### ", 1)[0]
        assert "Void: no verdict" in block


def test_a_file_without_plan_entry_is_marked_exploratory() -> None:
    pages = gen_results.generate()
    page = pages["results/sweep_speed.md"]
    assert isinstance(page, str)
    assert "Exploratory: no plan entry" in page and "Verdict, as the result files" not in page


def _site() -> Path:
    built = os.environ.get("PREFLAB_DOCS_SITE")  # scripts/test.sh built it just before pytest
    if built and (Path(built) / "index.html").is_file():
        return Path(built)
    site = ROOT / "site"
    index = site / "index.html"
    sources = [ROOT / "mkdocs.yml", *DOCS.rglob("*.md"), *DOCS.glob("*.py")]
    if index.is_file() and index.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return site
    return Path()


def test_the_site_loads_nothing_from_another_host(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    assert cfg["theme"]["font"] is False, "Google Fonts would load from a CDN"
    site = _site()
    if site == Path():
        site = tmp_path / "site"
        r = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) > 50
    remote = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*(?:src|href)=["'](?:https?:)?//""")
    for page in pages:
        found = remote.search(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(site)} loads {found.group(0)}"
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("preflab.runs.train", "preflab.config.TrainConfig", "preflab.runs.load_run"):
        assert f'id="{name}"' in api, f"the API reference lost {name}"


@pytest.mark.parametrize("name", ["index.md", "getting-started.md", "tutorials/studio.md"])
def test_images_the_pages_show_exist(name: str) -> None:
    page = DOCS / name
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text(encoding="utf-8")):
        assert (page.parent / img).resolve().is_file(), f"{name} shows {img}"
