"""The language-model judge: a FeedbackSource that ranks consecutive states from descriptions.

Each pair query (a = s_{t−1}, b = s_t, one-state segments; a longer segment stands for its last
state) is rendered into the prompt ("is the transition from State[0] to State[1] good?") and
asked ``n_queries`` times. Every answer becomes one judgement: p = P(a ≻ b) = 0 for "yes"
(the later state is better), 1 for "no", None for an unparseable answer or a failed request;
the prompt, the response and their hashes are kept in ``judgement.meta``.
:class:`preflab.aggregate.ConfidenceAggregator` turns the N judgements of a pair into one soft
label (the share of answers preferring a), which by the paper's Lemma 1 is the same loss as N
hard labels.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError, SourceError
from preflab.kinds.registry import pair_of
from preflab.llm.client import ChatClient
from preflab.llm.describers import describe_state, get_describer
from preflab.llm.parse import answer_to_p, parse_answer
from preflab.llm.prompts import Message, PromptTemplate, text_hash
from preflab.llm.usage import Prices, UsageMeter
from preflab.records import Judgement, Query, Segment, new_id
from preflab.rundir.runwarnings import RunWarnings, short
from preflab.sources.immediate import PendingJudgements

log = logging.getLogger(__name__)


class LLMJudge:
    """Asks a chat model about pairs of states; answers at once (``submit`` does the work)."""

    def __init__(
        self,
        client: ChatClient,
        env_id: str,
        *,
        template: PromptTemplate | None = None,
        n_queries: int = 1,
        annotator_id: str | None = None,
        prices: Prices | None = None,
    ) -> None:
        if n_queries < 1:
            raise ConfigError(f"n_queries must be ≥ 1, got {n_queries}")
        get_describer(env_id)  # fail early when the environment has no describer
        self.client = client
        self.env_id = env_id
        self.template = template if template is not None else PromptTemplate.load(env_id)
        self.n_queries = n_queries
        self.annotator_id = annotator_id or f"llm:{client.config.model}"
        self._pending = PendingJudgements("llm")
        self.warnings = RunWarnings()
        """Where unreadable answers are reported (the loop hands the judge the run's list)."""
        self.n_answers = 0
        """Answers received (requests that did not fail)."""
        self.n_unreadable = 0
        """Of those, answers that were empty or had no yes/no verdict (no label)."""
        self.usage = UsageMeter(prices)
        """Requests, cache hits, tokens, seconds and cost so far (part of the state)."""

    def messages_for(self, a: Segment, b: Segment) -> list[Message]:
        """The prompt for the transition from ``a``'s state to ``b``'s state."""
        return self.template.render(
            describe_state(self.env_id, a.obs[-1]), describe_state(self.env_id, b.obs[-1])
        )

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Ask every pair query ``n_queries`` times; judgements are ready for :meth:`collect`."""
        prepared: list[tuple[Query, list[Message]]] = []
        for q in queries:
            a, b = pair_of(q, "the LLM judge")
            missing = [s for s in (a, b) if s not in segments]
            if missing:
                raise DataError(
                    f"query {q.id} names segment(s) {missing} that were not passed to submit"
                )
            prepared.append((q, self.messages_for(segments[a], segments[b])))
        requests = [(msgs, k) for _, msgs in prepared for k in range(self.n_queries)]
        results = self.client.chat_many(requests)
        for res in results:
            self.usage.add(res)
        out: list[Judgement] = []
        for idx, res in enumerate(results):
            q, msgs = prepared[idx // self.n_queries]
            answer = parse_answer(res.text) if res.text is not None else None
            meta = {
                "prompt": msgs,
                "prompt_hash": res.key,
                "response": res.text,
                "response_hash": text_hash(res.text) if res.text is not None else None,
                "answer": answer,
                "sample": idx % self.n_queries,
                "model": self.client.config.model,
                "temperature": self.client.config.temperature,
                "cached": res.cached,
                "attempts": res.attempts,
                "error": res.error,
                "template": self.template.name,
                "prompt_tokens": res.prompt_tokens,
                "completion_tokens": res.completion_tokens,
            }
            out.append(
                Judgement(
                    id=new_id("j"),
                    query_id=q.id,
                    annotator_id=self.annotator_id,
                    source="llm",
                    p=answer_to_p(answer),
                    response_time_s=res.latency_s,
                    meta=meta,
                )
            )
        failed = sum(r.text is None for r in results)
        self._check_answers([res.text for res in results if res.text is not None])
        self._pending.extend(out)  # keep what arrived (abstentions included) before raising
        if results and failed == len(results):
            raise SourceError(
                f"all {failed} language-model requests failed, e.g. {results[0].error}. "
                "Check that the server is running and base_url/model are right."
            )
        if failed:
            log.warning(
                "%d of %d language-model requests failed; recorded as abstentions",
                failed,
                len(results),
            )

    def collect(self) -> list[Judgement]:
        """Judgements since the last call (never blocks)."""
        return self._pending.collect()

    UNREADABLE_SHARE = 0.5
    """Warn when more than this share of one submit's answers is empty or unreadable."""

    def _check_answers(self, texts: list[str]) -> None:
        """Count empty and unparseable answers; warn (once) with a sample of the raw text and
        the server and model when more than :attr:`UNREADABLE_SHARE` of them are."""
        bad = [t for t in texts if parse_answer(t) is None]
        self.n_answers += len(texts)
        self.n_unreadable += len(bad)
        if not texts or len(bad) <= self.UNREADABLE_SHARE * len(texts):
            return
        empty = sum(not t.strip() for t in bad)
        cfg = self.client.config
        sample = next((t for t in bad if t.strip()), bad[0])
        self.warnings.warn(
            "llm_unreadable",
            f"the language model's answers give no labels: {len(bad)} of {len(texts)} answers "
            f"this round were empty ({empty}) or had no yes/no verdict ({len(bad) - empty}), "
            f"e.g. {short(sample)}; server {cfg.base_url}, model {cfg.model!r}. Check that the "
            "model answers the prompt with yes or no (ask it by hand; a model that reasons "
            f"first can spend the {cfg.max_tokens}-token answer limit before it answers), or "
            "choose another --llm.model or --llm.template",
        )

    # ----- FeedbackSource state ------------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Uncollected judgements, the usage totals and the answer counts (answers, unreadable;
        as the image judge keeps them). The judge draws no random numbers itself: repeated
        samples differ by their sample index in the request, and answers already given are
        replayed from the client's response cache."""
        return self._pending.state(
            usage=self.usage.state(), answers=[self.n_answers, self.n_unreadable]
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (a state saved before usage, or the answer counts, were
        kept starts those totals at zero)."""
        self._pending.load_state(state)
        self.usage.load_state(state.get("usage") or {})
        self.n_answers, self.n_unreadable = (int(v) for v in state.get("answers", [0, 0]))

    def usage_report(self) -> dict[str, Any]:
        """Requests, cache hits, failures, tokens, seconds and cost (summary.json's
        ``ai_judge``), with the answers that gave no verdict."""
        cfg = self.client.config
        return {
            "source": "llm",
            "base_url": cfg.base_url,
            "model": cfg.model,
            "samples": self.n_queries,
            **self.usage.report(),
            "answers": self.n_answers,
            "unreadable": self.n_unreadable,
        }


def confidence(ps: Sequence[float | None]) -> float | None:
    """Share of parsed answers preferring the first state (mean of the non-None p's)."""
    vals = [p for p in ps if p is not None]
    return float(np.mean(vals)) if vals else None
