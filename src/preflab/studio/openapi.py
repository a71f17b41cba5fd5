"""The studio's OpenAPI schema: the committed copy (its final form: :func:`schemas.tidy`).

``python -m preflab.studio.openapi`` writes the schema to ``studio/web/openapi.json`` (or the
path given), from which ``npm run gen:api`` in studio/web generates ``src/api-types.ts``;
``tests/studio/test_contract.py`` fails when the committed copy is stale."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

REFRESH = "python -m preflab.studio.openapi && (cd studio/web && npm run gen:api)"
"""The command that refreshes the committed schema and the generated TypeScript types."""
DEFAULT_PATH = Path("studio/web/openapi.json")


def studio_schema() -> dict[str, Any]:
    """The schema of a studio app (it does not depend on the run, so any store will do)."""
    from preflab.store import FeedbackStore
    from preflab.studio.app import create_app

    with tempfile.TemporaryDirectory(prefix="preflab-openapi-") as tmp:
        store = FeedbackStore(Path(tmp) / "feedback.db")
        try:
            return create_app(store).openapi()
        finally:
            store.close()


def render(schema: dict[str, Any]) -> str:
    """The committed form: 2-space indented JSON, keys in FastAPI's order, newline at the end."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    args = p.parse_args(argv)
    args.path.write_text(render(studio_schema()), encoding="utf-8")


if __name__ == "__main__":
    main()
