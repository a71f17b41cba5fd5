"""What a store's columns can hold, read from its schema (:mod:`preflab.store.schema`): strings
of at most a column's ``String(n)`` length and whole numbers in its ``Integer``'s range.
PostgreSQL enforces both; SQLite enforces neither, so a SQLite store can hold ids that a
PostgreSQL store refuses, and an export of it would fail part way through an import into one.
``preflab export --import`` checks every record against them before the first write, and
``preflab export --check`` runs the same check (:func:`check_fits_store`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import BigInteger, Integer, SmallInteger, String

from preflab.errors import DataError
from preflab.store.schema import metadata

_BITS = ((BigInteger, 64), (SmallInteger, 16), (Integer, 32))
"""Bits of each integer type (subclasses first: BigInteger and SmallInteger are Integers)."""
_ROWS_SHOWN = 5
"""How many further rows of one column a message names (then their count)."""


@dataclass
class _Misfit:
    """The values of one store column that it cannot hold: the first one described."""

    table: str
    column: str
    want: str
    row: int
    record: object
    what: str
    more: list[int] = field(default_factory=list)


def check_fits_store(
    d: Path,
    tables: Iterable[tuple[str, Sequence[object]]],
    *,
    outcome: str = "nothing was imported",
) -> None:
    """A DataError naming every store column that a value of a record cannot hold (each with
    its first such row and value, the other rows and the limit), or nothing. Each of ``tables``
    is (a table of the store schema, its records, whose attributes are named as its columns;
    a column no record has, e.g. one the store derives, is skipped); ``d`` (the export) names
    the files (``<table>.parquet``). ``outcome`` says what became of the command."""
    misfits: dict[tuple[str, str], _Misfit] = {}
    for table, records in tables:
        for row, record, column, what, want in _misfits(table, records):
            seen = misfits.get((table, column))
            if seen is None:
                misfits[table, column] = _Misfit(table, column, want, row, record, what)
            else:
                seen.more.append(row)
    if misfits:
        raise DataError(_message(d, list(misfits.values()), outcome))


def _misfits(table: str, records: Sequence[object]) -> Iterator[tuple[int, object, str, str, str]]:
    """(row, record, column, what is wrong, what the column holds) of each value that its
    column of the store schema's ``table`` cannot hold."""
    columns = metadata.tables[table].columns
    strings = {c.name: c.type.length for c in columns if isinstance(c.type, String)}
    ints = {c.name: _range(c.type) for c in columns if isinstance(c.type, Integer)}
    for i, record in enumerate(records, 1):
        for name, n in strings.items():
            value = getattr(record, name, None)
            if n is not None and isinstance(value, str) and len(value) > n:
                what = f"{_short(value)} is {len(value)} characters long"
                yield i, record, name, what, f"at most {n} characters"
        for name, (lo, hi) in ints.items():
            value = getattr(record, name, None)
            if isinstance(value, int) and not lo <= value <= hi:
                yield i, record, name, f"{value} is out of range", f"a whole number in {lo}..{hi}"


def _range(type_: object) -> tuple[int, int]:
    bits = next(bits for cls, bits in _BITS if isinstance(type_, cls))
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…")


def _message(d: Path, misfits: Sequence[_Misfit], outcome: str) -> str:
    """One line: what is wrong, what became of the command and how to fix it. With more than
    one misfit column, the fix for every column comes before the values (the CLI shows the
    first 800 characters of a message)."""
    if len(misfits) == 1:
        m = misfits[0]
        return (
            f"{d}/{_where(m)}: {m.column} {m.what}, but the store's column {m.table}.{m.column} "
            f"holds {m.want}{_more(m.more)} (PostgreSQL refuses more; SQLite does not check); "
            f"{outcome}. Make {m.column} {m.want} in the run the export came from and export it "
            "again"
        )
    fix = ", ".join(f"{m.table}.{m.column} {m.want}" for m in misfits)
    values = "; ".join(f"{_where(m)}: {m.column} {m.what}{_more(m.more)}" for m in misfits)
    return (
        f"{d}: {len(misfits)} of the store's columns cannot hold values of this export "
        f"(PostgreSQL refuses them; SQLite does not check); {outcome}. Make {fix} in the run "
        f"the export came from and export it again. The values: {values}"
    )


def _where(m: _Misfit) -> str:
    """The file and row of a misfit's first value (and the record's id, when not the value)."""
    ident = getattr(m.record, "id", None)
    of = f" (id {_short(ident)})" if isinstance(ident, str) and m.column != "id" else ""
    return f"{m.table}.parquet row {m.row}{of}"


def _more(rows: Sequence[int]) -> str:
    """The other rows of a misfit column: all of them when few, else the first and a count."""
    shown = ", ".join(str(r) for r in rows[:_ROWS_SHOWN])
    if len(rows) > _ROWS_SHOWN:
        return f" (and {len(rows)} more rows: {shown}, …)"
    return f" (also row{'s' if len(rows) > 1 else ''} {shown})" if rows else ""
