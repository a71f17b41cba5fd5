"""``export --check`` on truncated or tampered exports (hypothesis): a DataError, never a
library traceback."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.errors import PrefLabError
from preflab.export.feedback import FILES, export_run, read_export
from preflab.kinds import PAIR
from preflab.records import Judgement
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("exp")
    store = FeedbackStore(d / "run" / "feedback.db")
    segs = make_segments(3, rng=np.random.default_rng(0), length=4, random_rewards=False)
    store.segments.add(segs)
    q = PAIR.query(segs[0].id, segs[1].id)
    store.queries.add([q])
    store.answers.add([Judgement(id="j", query_id=q.id, annotator_id="a", source="human", p=1.0)])
    export_run(store, d / "exp")
    return d / "exp"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from([*FILES, "manifest.json"]),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), max_size=3),
    check_digests=st.booleans(),
)
def test_damaged_exports_are_refused_clearly(
    tmp_path, export_dir, name, cut, flips, check_digests
) -> None:
    d = tmp_path / "e"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(export_dir, d)
    p = d / name
    raw = bytearray(p.read_bytes())
    raw = raw[: int(len(raw) * cut)] if cut < 1.0 else raw
    for pos, x in flips:
        if raw:
            raw[int(pos * (len(raw) - 1))] ^= x
    p.write_bytes(bytes(raw))
    if not check_digests and name != "manifest.json":  # the reader must cope without digests too
        import json

        m = json.loads((d / "manifest.json").read_text())
        m["version"] = 1
        (d / "manifest.json").write_text(json.dumps(m))
    try:
        data = read_export(d)
    except PrefLabError as exc:
        assert str(exc)
        return
    assert len(data.judgements) == 1  # unchanged bytes (or a harmless change) read back
