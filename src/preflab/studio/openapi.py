"""The studio's OpenAPI schema: its final form (``tidy``) and the committed copy.

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

_FASTAPI_422 = ("#/components/schemas/HTTPValidationError",)


def tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the 422 responses FastAPI adds on its own (they declare its default body, which the
    studio never sends: routes declare their real 422 with ``schemas.ValidationErrorBody``)."""
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            r = op.get("responses", {}).get("422")
            if r is not None and any(ref in json.dumps(r) for ref in _FASTAPI_422):
                del op["responses"]["422"]
    defs = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        defs.pop(name, None)
    return schema


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
