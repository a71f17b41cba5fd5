"""The crowd file reader on arbitrary bytes (hypothesis): rows read correctly, or a DataError
with a message — never a csv/Unicode traceback."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.cli.crowd import read_table
from preflab.errors import PrefLabError

cell = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400))
def test_random_bytes(tmp_path, data) -> None:
    f = tmp_path / "x.csv"
    f.write_bytes(b"query,annotator,answer\n" + data)
    try:
        q, a, ans = read_table(f)
    except PrefLabError as exc:
        assert str(exc)
        return
    assert len(q) == len(a) == len(ans)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.tuples(cell, cell, cell), max_size=10),
    bom=st.booleans(),
    enc=st.sampled_from(["utf-8", "utf-16", "latin-1"]),
)
def test_well_formed_rows_come_back(tmp_path, rows, bom, enc) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["query", "annotator", "answer"])
    w.writerows(rows)
    text = ("\ufeff" if bom else "") + buf.getvalue()
    try:
        raw = text.encode(enc)
    except UnicodeEncodeError:
        return
    f = tmp_path / "x.csv"
    f.write_bytes(raw)
    try:
        q, a, ans = read_table(f)
    except PrefLabError as exc:
        assert enc != "utf-8" or any("\x00" in c for r in rows for c in r), exc
        return
    if enc == "utf-8":
        assert list(zip(q, a, ans, strict=True)) == [tuple(c.strip() for c in r) for r in rows]


@pytest.mark.parametrize("n", [131_073, 1_000_000])
def test_huge_fields_refused(tmp_path, n) -> None:
    f = tmp_path / "x.csv"
    f.write_text("query,annotator,answer\nq1," + "a" * n + ",1\n")
    with pytest.raises(PrefLabError, match="characters"):
        read_table(f)
