"""Counting what a store reads: which queries a call decodes from their rows."""

from __future__ import annotations

import pytest

from preflab.records import Query


def count_query_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the queries decoded from stored rows from now on (``Query.from_row``), in the
    order read: a list the test reads after the calls it counts."""
    read: list[str] = []
    from_row = Query.from_row

    def counted(row):  # type: ignore[no-untyped-def]
        read.append(row["id"])
        return from_row(row)

    monkeypatch.setattr(Query, "from_row", staticmethod(counted))
    return read
