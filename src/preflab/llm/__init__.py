"""Language-model feedback (paper 004): describe states, ask a chat model to rank consecutive
states, turn repeated answers into confidences, fit state scores σ, and reward the policy with
the potential difference σ(s_t) − σ(s_{t−1}).

Importing this package registers the grid worlds ``PrefLab/NoLock-v0``, ``PrefLab/Lock-v0``
and ``PrefLab/MultiLock-v0`` with gymnasium.
"""

from preflab.env_families.grids import (
    ENV_IDS,
    LAYOUTS,
    GridState,
    LockGridEnv,
    decode_obs,
    register_grids,
)
from preflab.llm.client import ChatClient, ChatResult, ClientConfig, MemoryCache, ResponseCache
from preflab.llm.describers import (
    Describer,
    describe_action,
    describe_state,
    get_describer,
    known_describers,
    register_describer,
)
from preflab.llm.judge import LLMJudge, confidence
from preflab.llm.parse import answer_to_p, parse_answer
from preflab.llm.progress import cost_to_go, progress, true_preference
from preflab.llm.prompts import PromptTemplate, prompt_hash
from preflab.llm.ranker import NoisyRanker, noisy_answers, noisy_confidences
from preflab.llm.sampling import sample_transitions, state_segments, transition_queries
from preflab.llm.scores import (
    ScoreConfig,
    StateScorer,
    fit_state_scores,
    fit_state_scores_from_labels,
)
from preflab.llm.transitions import TransitionSelector

__all__ = [
    "ENV_IDS",
    "LAYOUTS",
    "ChatClient",
    "ChatResult",
    "ClientConfig",
    "Describer",
    "GridState",
    "LLMJudge",
    "LockGridEnv",
    "MemoryCache",
    "NoisyRanker",
    "PromptTemplate",
    "ResponseCache",
    "ScoreConfig",
    "StateScorer",
    "TransitionSelector",
    "answer_to_p",
    "confidence",
    "cost_to_go",
    "decode_obs",
    "describe_action",
    "describe_state",
    "fit_state_scores",
    "fit_state_scores_from_labels",
    "get_describer",
    "known_describers",
    "noisy_answers",
    "noisy_confidences",
    "parse_answer",
    "progress",
    "prompt_hash",
    "register_describer",
    "register_grids",
    "sample_transitions",
    "state_segments",
    "transition_queries",
    "true_preference",
]
