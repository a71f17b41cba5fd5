"""A small JSON Schema checker for the subset FastAPI and pydantic emit ($ref, anyOf, type,
enum, const, properties, required, additionalProperties, items), used to check the studio's
real responses against its own /openapi.json (jsonschema is not a dependency)."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, Any] = {
    "string": str,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _is(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def problems(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (refs resolved in ``root``); empty when it conforms."""
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return problems(value, target, root, at)
    if "allOf" in schema:
        return [p for s in schema["allOf"] for p in problems(value, s, root, at)]
    if "anyOf" in schema:
        options = [problems(value, s, root, at) for s in schema["anyOf"]]
        if any(not p for p in options):
            return []
        return [f"{at}: matches none of anyOf ({'; '.join(p[0] for p in options)})"]
    out: list[str] = []
    if "type" in schema and not _is(value, schema["type"]):
        return [f"{at}: expected {schema['type']}, got {type(value).__name__} {value!r:.60}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: {value!r} != {schema['const']!r}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{at}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                out += problems(v, props[k], root, f"{at}.{k}")
            elif extra is False:
                out.append(f"{at}: undeclared key {k!r}")
            elif isinstance(extra, dict):
                out += problems(v, extra, root, f"{at}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += problems(v, schema["items"], root, f"{at}[{i}]")
    return out


def declared(schema: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any]:
    """The declared response of an operation for ``status`` ({} content when it has none)."""
    op = schema["paths"][path][method.lower()]
    responses = op["responses"]
    assert str(status) in responses, (
        f"{method} {path} answered {status}, which /openapi.json does not declare "
        f"(declared: {sorted(responses)}); add it with responses=errors(...)"
    )
    return responses[str(status)]


def check(schema: dict[str, Any], response: Any, method: str, path: str) -> None:
    """The httpx ``response`` to ``method path`` (a path template of the schema) is declared
    there: its status, its content type and, for JSON, its body."""
    decl = declared(schema, method, path, response.status_code)
    content = decl.get("content", {})
    ctype = response.headers.get("content-type", "").split(";")[0].strip()
    if not content:
        assert not response.content, f"{method} {path}: body sent where none is declared"
        return
    assert ctype in content, f"{method} {path}: content type {ctype} not in {sorted(content)}"
    if ctype == "application/json":
        found = problems(response.json(), content[ctype]["schema"], schema)
        assert not found, f"{method} {path} {response.status_code}: " + "; ".join(found[:5])
