"""Clips under /media (preflab.studio.routes_static): Range requests per RFC 9110, refusals as
JSON in the studio's format saying what to ask for, 416 with ``Content-Range: bytes */SIZE``,
and HEAD."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from preflab.studio.config import StudioConfig
from tests.studio.api_server import Studio, start_studio


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.0))
    yield s
    s.stop()


def clip(studio: Studio) -> tuple[httpx.Client, str, bytes]:
    alice = studio.client("alice")
    url = alice.get("/api/queries/q1").json()["query"]["a"][0]["media_url"]
    whole = alice.get(url)
    assert whole.status_code == 200
    return alice, url, whole.content


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ("bytes=10-5", "'10-5' ends before it starts"),
        ("bytes=abc", "'abc' is not FIRST-LAST"),
        ("bytes=", "names no range"),
        ("bytes=-", "'-' is not FIRST-LAST"),
        ("bytes=0-1,x", "'x' is not FIRST-LAST"),
        ("nonsense", "no '='"),
    ],
)
def test_a_malformed_range_is_a_json_400_saying_what_to_ask(
    studio: Studio, header: str, words: str
) -> None:
    alice, url, _ = clip(studio)
    r = alice.get(url, headers={"Range": header})
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    detail = r.json()["detail"]
    assert words in detail and "bytes=FIRST-LAST" in detail and "bytes=0-1023" in detail


@pytest.mark.parametrize("first", ["SIZE", "99999", "9" * 5000])
def test_a_range_past_the_end_is_416_with_the_size(studio: Studio, first: str) -> None:
    alice, url, whole = clip(studio)
    size = len(whole)
    header = "bytes=" + first.replace("SIZE", str(size)) + "-"
    for h in (header, "bytes=-0"):
        r = alice.get(url, headers={"Range": h})
        assert r.status_code == 416, (h[:20], r.status_code)
        assert r.headers["content-range"] == f"bytes */{size}"
        assert r.headers["content-type"] == "application/json"
        assert f"has {size} bytes" in r.json()["detail"]


def test_satisfiable_ranges_are_served(studio: Studio) -> None:
    alice, url, whole = clip(studio)
    size = len(whole)
    cases = {
        "bytes=10-49": (10, 49),
        "bytes=-20": (size - 20, size - 1),
        f"bytes=5-{'9' * 5000}": (5, size - 1),  # a last past the end: up to the end
        f"bytes=-{'9' * 5000}": (0, size - 1),
        f"bytes=0-3, {size}-": (0, 3),  # the unsatisfiable one is left out
    }
    for header, (a, b) in cases.items():
        r = alice.get(url, headers={"Range": header})
        assert r.status_code == 206, (header[:20], r.status_code, r.text[:200])
        assert r.headers["content-range"] == f"bytes {a}-{b}/{size}"
        assert r.content == whole[a : b + 1]
    # another unit than bytes: the header is ignored (RFC 9110), the whole clip
    r = alice.get(url, headers={"Range": "items=0-1"})
    assert r.status_code == 200 and r.content == whole


def test_head_gives_the_clips_headers(studio: Studio) -> None:
    alice, url, whole = clip(studio)
    r = alice.head(url)
    assert r.status_code == 200 and r.content == b""
    assert r.headers["content-length"] == str(len(whole))
    assert r.headers["content-type"] == "video/mp4" and r.headers["accept-ranges"] == "bytes"
    assert studio.client().head(url).status_code == 401
    assert alice.head("/media/" + "0" * 32 + ".mp4").status_code == 404


def test_byte_ranges_parses_what_rfc_9110_allows() -> None:
    from preflab.studio.routes_static import RangeError, byte_ranges

    assert byte_ranges("bytes=0-0,-1", 10) == [(0, 0), (9, 9)]
    assert byte_ranges("BYTES = 2-", 10) == [(2, 9)]
    assert byte_ranges("pages=1-2", 10) is None
    with pytest.raises(RangeError) as err:
        byte_ranges("bytes=10-", 10)
    assert err.value.status == 416
    with pytest.raises(RangeError) as err:
        byte_ranges("bytes=\u00b2-3", 10)  # digits other than 0-9 are not numbers here
    assert err.value.status == 400
