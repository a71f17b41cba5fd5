"""Property-based tests of every input boundary (hypothesis): records, TrainConfig JSON, the
store. Property: a correct result, or a PrefLab error with a message — never a library
traceback, never a partly written store."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from preflab.config import TrainConfig
from preflab.errors import PrefLabError
from preflab.records import Judgement, Query, Segment
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

dtypes = st.sampled_from(
    [
        np.float64,
        np.float32,
        np.float16,
        np.int64,
        np.int8,
        np.uint8,
        np.bool_,
        np.complex64,
        np.str_,
        np.object_,
    ]
)


@st.composite
def arrays(draw):
    dt = draw(dtypes)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    if dt is np.object_:
        return np.array(
            [
                draw(st.one_of(st.none(), st.text(max_size=3), st.integers()))
                for _ in range(int(np.prod(shape)))
            ],
            dtype=object,
        ).reshape(shape)
    elements = None
    if np.dtype(dt).kind == "f":
        elements = st.floats(allow_nan=True, allow_infinity=True, width=np.dtype(dt).itemsize * 8)
    return draw(hnp.arrays(dt, shape, elements=elements))


plain = st.one_of(
    arrays(),
    st.lists(st.lists(st.floats(allow_nan=True), max_size=4), max_size=4),  # ragged
    st.just([[1e300, 2.0]]),
    st.just([[10**40, 1]]),
)


@SETTINGS
@given(obs=plain, acts=plain, rew=plain)
def test_segment_is_valid_or_refused_clearly(obs, acts, rew) -> None:
    try:
        s = Segment(id="s1", obs=obs, acts=acts, true_rewards=rew)
    except PrefLabError as exc:
        assert str(exc)
        return
    assert s.obs.dtype == np.float32 and s.obs.ndim == 2 and s.length >= 1
    assert s.acts.shape[0] == s.length and s.true_rewards.shape == (s.length,)
    assert np.isfinite(s.obs).all() and np.isfinite(s.acts).all()
    assert np.isfinite(s.true_rewards).all()


@SETTINGS
@given(
    p=st.one_of(
        st.none(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(),
        st.text(max_size=4),
        st.booleans(),
    ),
    rt=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    source=st.sampled_from(["human", "llm", "robot", ""]),
)
def test_judgement_is_valid_or_refused_clearly(p, rt, source) -> None:
    try:
        j = Judgement(
            id="j", query_id="q", annotator_id="a", source=source, p=p, response_time_s=rt
        )
    except PrefLabError as exc:
        assert str(exc)
        return
    assert j.p is None or 0.0 <= j.p <= 1.0
    assert j.response_time_s is None or j.response_time_s >= 0


json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=8,
)
fields = st.sampled_from(
    [
        "env_id",
        "algo",
        "seed",
        "total_steps",
        "total_labels",
        "initial_label_frac",
        "initial_steps",
        "segment_length",
        "selector",
        "net_arch",
        "reward",
        "fit",
        "teacher",
        "agent_kwargs",
        "store_url",
        "n_envs",
        "schedule",
        "no_such_field",
    ]
)


@SETTINGS
@given(st.dictionaries(fields, json_values, max_size=4))
def test_train_config_from_json_is_valid_or_refused(data) -> None:
    base = json.loads(TrainConfig.smoke().to_json())
    try:
        text = json.dumps(base | data)
    except (TypeError, ValueError):
        return
    try:
        c = TrainConfig.from_json(text)
    except PrefLabError as exc:
        assert str(exc)
        return
    assert c.total_steps >= 1 and c.seed >= 0 and 0 <= c.initial_label_frac <= 1


@SETTINGS
@given(st.one_of(st.text(max_size=50), st.binary(max_size=50).map(lambda b: b.decode("latin-1"))))
def test_train_config_from_garbage_text(text) -> None:
    with contextlib.suppress(PrefLabError):
        TrainConfig.from_json(text)


# ----- the store: a refused write leaves nothing behind ------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = FeedbackStore(tmp_path_factory.mktemp("prop") / "feedback.db")
    segs = make_segments(2, rng=np.random.default_rng(0), length=3, random_rewards=False)
    s.segments.add(segs)
    s.queries.add([Query(id="q", kind="pair", a=(segs[0].id,), b=(segs[1].id,))])
    return s


def snapshot(s: FeedbackStore) -> tuple[int, int, int]:
    return s.segments.count(), s.queries.count(), s.answers.count()


ids = st.one_of(
    st.text(max_size=70),
    st.just("../../etc/passwd"),
    st.just("s-0123456789abcdef0123"),
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,20}\Z"),
)


@SETTINGS
@given(sid=ids, meta=json_values, qid=st.sampled_from(["q", "missing"]), jid=ids)
def test_store_writes_are_whole_or_nothing(store, sid, meta, qid, jid) -> None:
    before = snapshot(store)
    o = np.ones((3, 2))
    try:
        n = store.segments.add(
            [Segment(id=sid, obs=o, acts=np.ones((3, 1)), true_rewards=np.zeros(3))]
        )
    except PrefLabError as exc:
        assert str(exc) and snapshot(store) == before
    else:
        assert snapshot(store)[0] == before[0] + n
    before = snapshot(store)
    try:
        j = Judgement(
            id=jid or "x", query_id=qid, annotator_id="a", source="human", p=1.0, meta={"m": meta}
        )
        written = store.answers.add([j, j] if len(jid) % 2 else [j])
    except PrefLabError as exc:
        assert str(exc) and snapshot(store) == before
    else:
        assert snapshot(store)[2] == before[2] + written


def test_path_traversal_ids_never_touch_the_file_system(tmp_path) -> None:
    s = FeedbackStore(tmp_path / "run" / "feedback.db")
    for bad in ("../x", "..", "a/b", "/etc/passwd", "x" * 65, "", "a.b"):
        with pytest.raises(PrefLabError, match="not a valid segment id"):
            s.segments.add(
                [
                    Segment(
                        id=bad, obs=np.ones((2, 1)), acts=np.ones((2, 1)), true_rewards=np.zeros(2)
                    )
                ]
            )
    assert sorted(p.name for p in tmp_path.rglob("*.npz")) == []
