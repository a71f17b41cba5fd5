"""The vision-language judge: a FeedbackSource that shows a model frames of two segments and
asks which achieves the task better (RL-VLM-F; PRIMT's clip comparisons).

Each pair query is asked ``samples`` times. Two-stage (the default, RL-VLM-F): request 1 shows
both clips' key frames and asks the model to describe them and how they differ for the goal;
request 2 gives it that text and asks for the verdict. One-stage: one request with the frames
and the question. Each sample becomes one judgement with p = P(a ≻ b): 1.0 (clip 1), 0.0
(clip 2), 0.5 (no difference / unsure) or None (failed request, empty or unreadable answer:
never a guessed label). :class:`preflab.aggregate.ConfidenceAggregator` turns a query's
samples into one soft label (as for the text judge, paper 004). The description, the raw
answer, the prompts (images as content hashes), the frames' hashes and the request's token
counts are kept in ``judgement.meta``.

Requests go through :class:`preflab.llm.ChatClient` (deadline, retries, concurrency limit,
response cache). A request with images is cached under the hash of its text and its images'
content hashes (plus model, temperature and sample index), so a rerun or a resumed run sends
nothing it has sent before.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preflab.errors import ConfigError, DataError, SourceError
from preflab.kinds.registry import pair_of
from preflab.llm.client import ChatClient, ChatRequest, ChatResult
from preflab.llm.prompts import text_hash
from preflab.llm.usage import Prices, UsageMeter
from preflab.records import Judgement, Query, Segment, new_id
from preflab.rundir.runwarnings import RunWarnings, short
from preflab.sources.immediate import PendingJudgements
from preflab.vlm.frames import FrameSpec, SegmentFrames, View, described_states
from preflab.vlm.images import EncodedImage, encode
from preflab.vlm.parse import parse_verdict, verdict_to_p
from preflab.vlm.prompts import Message, VLMTemplate

log = logging.getLogger(__name__)

_IMAGE_REFUSAL = re.compile(
    r"image|vision|multi-?modal|image_url|content.{0,40}(type|part|list|string)", re.IGNORECASE
)
_REFUSED = re.compile(r"HTTP (400|415|422) from \S+: (.*)", re.DOTALL)
"""A request the server refused for its content (the client's error text): status, body."""


def _refuses_images(error: str | None) -> bool:
    """Whether a request's final error is the server refusing images: a 400, 415 or 422 whose
    body (not the URL or the model's name) speaks of images or content parts. A 404 (a
    mistyped model), a 401/403 or a 429 (however its message reads) is not."""
    m = _REFUSED.match(error or "")
    return bool(m and _IMAGE_REFUSAL.search(m.group(2)))


Clip = tuple[EncodedImage, ...] | str
"""What a model is shown of one segment: encoded frames, or its key states in words."""
IMAGE_CACHE_SEGMENTS = 256
"""Segments whose encoded frames are kept between submits (segments are often asked again)."""


@dataclass(frozen=True)
class _Ask:
    """One sample of one query: its clips and its stage-1 (or only) request."""

    query: Query
    sample: int
    clip_a: Clip
    clip_b: Clip
    redacted: list[Message]
    request: ChatRequest


class VLMJudge:
    """Asks a vision-language model about pairs of clips; answers at once (``submit`` does the
    work)."""

    UNREADABLE_SHARE = 0.5
    """Warn when more than this share of one submit's answers is empty or has no verdict."""

    def __init__(
        self,
        client: ChatClient,
        *,
        task: str,
        template: VLMTemplate,
        frames: FrameSpec | None = None,
        samples: int = 1,
        prices: Prices | None = None,
        annotator_id: str | None = None,
        renderer: SegmentFrames | None = None,
        view: View = "frames",
    ) -> None:
        if samples < 1:
            raise ConfigError(f"vlm samples must be ≥ 1, got {samples}")
        if not task.strip():
            raise ConfigError(
                "the vision-language judge needs the task in words: pass --task 'what the "
                "agent should do' (e.g. --task 'swing the pendulum up and keep it upright')"
            )
        self.client = client
        self.task = task.strip()
        self.template = template
        self.frames = frames or FrameSpec()
        self.samples = samples
        if view not in ("frames", "states"):
            raise ConfigError(f"view must be 'frames' or 'states', got {view!r}")
        self.view: View = view
        """'frames': rendered images; 'states': the key steps' states in words (a text-only
        model; the env needs a state describer, :mod:`preflab.llm.describers`)."""
        self.annotator_id = annotator_id or f"vlm:{client.config.model}"
        self.renderer = renderer or SegmentFrames(self.frames)
        self.usage = UsageMeter(prices)
        """Requests, cache hits, tokens, seconds and cost so far (part of the state)."""
        self.warnings = RunWarnings()
        """Where failed requests and unreadable answers are reported (the run's list)."""
        self.n_answers = 0
        """Final answers received (requests that did not fail)."""
        self.n_unreadable = 0
        """Of those, answers that were empty or had no verdict (no label)."""
        self._pending = PendingJudgements("vlm")
        self._images: OrderedDict[str, tuple[EncodedImage, ...]] = OrderedDict()

    # ----- frames -------------------------------------------------------------------------
    def clip_of(self, segment: Segment) -> Clip:
        """What the model is shown of ``segment`` (:attr:`view`)."""
        if self.view == "states":
            return described_states(segment, self.frames.count)
        return self.images_of(segment)

    def images_of(self, segment: Segment) -> tuple[EncodedImage, ...]:
        """The encoded images shown for ``segment`` (rendered once, kept for a while)."""
        hit = self._images.get(segment.id)
        if hit is not None:
            self._images.move_to_end(segment.id)
            return hit
        f = self.frames
        out = tuple(
            encode(img, f.format, quality=f.jpeg_quality) for img in self.renderer.images(segment)
        )
        self._images[segment.id] = out
        while len(self._images) > IMAGE_CACHE_SEGMENTS:
            self._images.popitem(last=False)
        return out

    # ----- asking -------------------------------------------------------------------------
    def _prepare(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> list[_Ask]:
        asks: list[_Ask] = []
        for q in queries:
            a, b = pair_of(q, "the vision-language judge")
            missing = [s for s in (a, b) if s not in segments]
            if missing:
                raise DataError(
                    f"query {q.id} names segment(s) {missing} that were not passed to submit"
                )
            ia, ib = self.clip_of(segments[a]), self.clip_of(segments[b])
            sent = self.template.frames_messages(self.task, ia, ib)
            redacted = self.template.frames_messages(self.task, ia, ib, redact=True)
            record = json.dumps(redacted, ensure_ascii=False)
            for k in range(self.samples):
                key = self.client.key_for(redacted, k)
                req = ChatRequest(messages=sent, key=key, record=record)
                asks.append(_Ask(q, k, ia, ib, redacted, req))
        return asks

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Ask every pair query ``samples`` times; judgements are ready for :meth:`collect`."""
        asks = self._prepare(queries, segments)
        if not asks:
            return
        first = self.client.chat_many([a.request for a in asks])
        for res in first:
            self.usage.add(res)
        second: list[ChatResult | None] = [None] * len(asks)
        compare: list[list[Message] | None] = [None] * len(asks)
        if self.template.shape == "two-stage":
            todo = [i for i, r in enumerate(first) if r.text is not None and r.text.strip()]
            for i in todo:
                compare[i] = self.template.compare_messages(self.task, first[i].text or "")
            results = self.client.chat_many([(compare[i] or [], asks[i].sample) for i in todo])
            for i, res in zip(todo, results, strict=True):
                second[i] = res
                self.usage.add(res)
        out = [
            self._judgement(a, r1, r2, c)
            for a, r1, r2, c in zip(asks, first, second, compare, strict=True)
        ]
        finals = [
            r2 if self.template.shape == "two-stage" else r1
            for r1, r2 in zip(first, second, strict=True)
        ]
        self._pending.extend(out)  # what arrived (abstentions included) is kept before raising
        self._check(first, finals)

    def _judgement(
        self,
        ask: _Ask,
        first: ChatResult,
        second: ChatResult | None,
        compare: list[Message] | None,
    ) -> Judgement:
        two = self.template.shape == "two-stage"
        final = second if two else first
        description = first.text if two else None
        error = first.error if final is None else final.error
        if two and first.text is not None and not first.text.strip():
            error = "stage 1 (describe) returned an empty answer"
        response = final.text if final is not None else None
        verdict = parse_verdict(response)
        f = self.frames
        stages = [r for r in (first, second) if r is not None]
        meta: dict[str, Any] = {
            "prompt": ask.redacted,
            "prompt_hash": ask.request.key,
            "compare_prompt": compare,
            "compare_hash": second.key if second is not None else None,
            "description": description,
            "response": response,
            "response_hash": text_hash(response) if response is not None else None,
            "verdict": verdict,
            "sample": ask.sample,
            "model": self.client.config.model,
            "temperature": self.client.config.temperature,
            "prompt_shape": self.template.shape,
            "template": self.template.name,
            "task": self.task,
            "frames": {
                "count": f.count,
                "size": f.size,
                "format": f.format,
                "layout": f.layout,
                "view": self.view,
                "a": _hashes(ask.clip_a),
                "b": _hashes(ask.clip_b),
            },
            "cached": all(r.cached for r in stages),
            "attempts": sum(r.attempts for r in stages),
            "prompt_tokens": sum(r.prompt_tokens or 0 for r in stages),
            "completion_tokens": sum(r.completion_tokens or 0 for r in stages),
            "error": error,
        }
        return Judgement(
            id=new_id("j"),
            query_id=ask.query.id,
            annotator_id=self.annotator_id,
            source="vlm",
            p=verdict_to_p(verdict),
            response_time_s=sum(r.latency_s for r in stages),
            meta=meta,
        )

    # ----- what went wrong ----------------------------------------------------------------
    def _check(self, first: list[ChatResult], finals: list[ChatResult | None]) -> None:
        """Raise on a server that refuses images or answers nothing; warn on failed requests
        and on answers without a verdict."""
        cfg = self.client.config
        failed = [r for r in first if r.text is None] + [
            r for r in finals if r is not None and r.text is None
        ]
        refusal = next((r.error for r in failed if _refuses_images(r.error)), None)
        if refusal is not None:
            raise SourceError(
                f"the server at {cfg.base_url} (model {cfg.model!r}) refused the images: "
                f"{short(refusal, 240)}. It, or that model, does not take image input: serve a "
                "vision-language model (e.g. vLLM with Qwen/Qwen2.5-VL-3B-Instruct, Ollama with "
                "qwen2.5vl or llava) and pass it with --vlm.model, or show a text-only model "
                "the clips' states in words (--vlm.view states)"
            )
        last = [fin if fin is not None else r1 for r1, fin in zip(first, finals, strict=True)]
        if all(r.text is None for r in last):
            raise SourceError(
                f"all {len(last)} vision-language requests to {cfg.base_url} failed, e.g. "
                f"{short(last[0].error, 240)}. Check that the server is running, that "
                "--vlm.base-url and --vlm.model are right, and that --vlm.timeout-s suits a "
                "model reading images (no label was made)"
            )
        if failed:
            self.warnings.warn(
                "vlm_failed",
                f"{len(failed)} vision-language request(s) to {cfg.base_url} failed after their "
                f"retries, e.g. {short(failed[0].error, 160)}; they were recorded as no answer "
                "(no label). Check the server's load and --vlm.timeout-s",
            )
            log.warning("%d vision-language requests failed; recorded as no answer", len(failed))
        texts: list[str] = []
        bad: list[str] = []
        for r1, fin in zip(first, finals, strict=True):
            if fin is None:  # two-stage: stage 1 failed (counted above) or was empty
                if r1.text is not None:
                    texts.append(r1.text)
                    bad.append(r1.text)
                continue
            if fin.text is None:
                continue
            texts.append(fin.text)
            if parse_verdict(fin.text) is None:
                bad.append(fin.text)
        self.n_answers += len(texts)
        self.n_unreadable += len(bad)
        if not texts or len(bad) <= self.UNREADABLE_SHARE * len(texts):
            return
        empty = sum(not t.strip() for t in bad)
        sample = next((t for t in bad if t.strip()), bad[0])
        self.warnings.warn(
            "vlm_unreadable",
            f"the vision-language model's answers give no labels: {len(bad)} of {len(texts)} "
            f"answers this round were empty ({empty}) or had no verdict "
            f"({len(bad) - empty}), e.g. {short(sample)}; server {cfg.base_url}, model "
            f"{cfg.model!r}. The prompt asks for a final line 'Answer: 1', 'Answer: 2' or "
            f"'Answer: 0'; check the model follows it (a model that reasons first can spend "
            f"the {cfg.max_tokens}-token limit: raise --vlm.max-tokens), or edit the template "
            "(--vlm.template)",
        )

    def collect(self) -> list[Judgement]:
        """Judgements since the last call (never blocks)."""
        return self._pending.collect()

    def usage_report(self) -> dict[str, Any]:
        """Requests, cache hits, failures, tokens, seconds and cost (summary.json's
        ``ai_judge``), with the answers that gave no verdict."""
        cfg = self.client.config
        return {
            "source": "vlm",
            "base_url": cfg.base_url,
            "model": cfg.model,
            "prompt_shape": self.template.shape,
            "samples": self.samples,
            **self.usage.report(),
            "answers": self.n_answers,
            "unreadable": self.n_unreadable,
        }

    def close(self) -> None:
        """Free the renderers (the client is the caller's)."""
        self.renderer.close()

    # ----- FeedbackSource state -----------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Uncollected judgements and the usage totals. The judge draws no random numbers:
        samples differ by their index in the request, and answers already given are replayed
        from the client's response cache."""
        return self._pending.state(
            usage=self.usage.state(), answers=[self.n_answers, self.n_unreadable]
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self._pending.load_state(state, extra=("usage",))
        self.usage.load_state(state["usage"])
        self.n_answers, self.n_unreadable = (int(v) for v in state.get("answers", [0, 0]))


def _hashes(clip: Clip) -> list[str]:
    """Content hashes of a clip's images, or of its text."""
    return [text_hash(clip)] if isinstance(clip, str) else [im.sha256 for im in clip]
