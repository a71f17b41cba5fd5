"""What a store's columns can hold, read from its schema (:mod:`preflab.store.schema`): strings
of at most a column's ``String(n)`` length and whole numbers in its ``Integer``'s range.
PostgreSQL enforces both; SQLite enforces neither, so a SQLite store can hold ids that a
PostgreSQL store refuses, and an export of it would fail part way through an import into one.
``preflab export --import`` checks every record against them before the first write."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NoReturn

from sqlalchemy import BigInteger, Integer, SmallInteger, String

from preflab.errors import DataError
from preflab.store.schema import metadata

_BITS = ((BigInteger, 64), (SmallInteger, 16), (Integer, 32))
"""Bits of each integer type (subclasses first: BigInteger and SmallInteger are Integers)."""


def check_fits_store(d: Path, tables: Iterable[tuple[str, Sequence[object]]]) -> None:
    """A DataError for the first value of a record that its store column cannot hold. Each of
    ``tables`` is (a table of the store schema, its records, whose attributes are named as its
    columns); ``d`` (the export) names the file (``<table>.parquet``), row and limit."""
    for table, records in tables:
        columns = metadata.tables[table].columns
        strings = {c.name: c.type.length for c in columns if isinstance(c.type, String)}
        ints = {c.name: _range(c.type) for c in columns if isinstance(c.type, Integer)}
        for i, record in enumerate(records, 1):
            for name, n in strings.items():
                value = getattr(record, name, None)
                if n is not None and isinstance(value, str) and len(value) > n:
                    what = f"{_short(value)} is {len(value)} characters long"
                    _refuse(d, table, i, record, name, what, f"at most {n} characters")
            for name, (lo, hi) in ints.items():
                value = getattr(record, name, None)
                if isinstance(value, int) and not lo <= value <= hi:
                    what = f"{value} is out of range"
                    _refuse(d, table, i, record, name, what, f"a whole number in {lo}..{hi}")


def _range(type_: object) -> tuple[int, int]:
    bits = next(bits for cls, bits in _BITS if isinstance(type_, cls))
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…")


def _refuse(
    d: Path, table: str, row: int, record: object, column: str, what: str, want: str
) -> NoReturn:
    ident = getattr(record, "id", None)
    of = f" (id {_short(ident)})" if isinstance(ident, str) and column != "id" else ""
    raise DataError(
        f"{d}/{table}.parquet row {row}{of}: {column} {what}, but the store's column "
        f"{table}.{column} holds {want} (PostgreSQL refuses more; SQLite does not check); "
        f"nothing was imported. Make {column} {want} in the run the export came from and "
        "export it again"
    )
