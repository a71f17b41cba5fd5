"""The training run's configuration (saved as ``config.json`` in every run directory)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, get_args

from preflab.config.values import apply_config_data
from preflab.crowd.users import CrowdConfig
from preflab.device import check_device_name
from preflab.errors import ConfigError
from preflab.policy.algos import (
    ACTOR_CRITIC_OFF_POLICY,
    ALGOS,
    BACKENDS,
    SBX_ALGOS,
    Algo,
    Backend,
    is_on_policy,
)
from preflab.policy.replay_config import ReplayConfig
from preflab.policy.shaping import PolicyRewardConfig
from preflab.policy.termination_config import TerminationConfig
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rundir.textfiles import read_text_file
from preflab.seeding import MAX_SEED
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.teacher import TeacherConfig

ATARI_SEGMENT_LENGTH = 25
"""Agent steps per segment for Atari (Christiano et al. 2017: clips of 25 timesteps, ~1.7 s at 15 Hz)."""

MAX_STEPS = 2**53
"""The most env steps (or labels) a budget may count: 2**53 = 9,007,199,254,740,992, the largest
integer float64 holds exactly. A run's counts also live as floats (SB3's progress fraction, the
steps per label and per round) and as 64-bit integers (NumPy, the store's SQLite INTEGER
columns, the studio's JavaScript numbers, exact to 2**53): below this bound every one of them
counts exactly, and sums of two counts stay far from int64's 2**63."""
MAX_ROUNDS = 1_000_000
"""The most feedback rounds a run may have, ⌈(total_steps − initial_steps − unsup_steps) /
steps_per_round⌉: the label schedule is planned round by round when the run starts (a list of
every round's labels), which takes a fraction of a second for a million rounds and would never
finish for 10**20."""
STEP_COUNTS = (
    "total_steps",
    "initial_steps",
    "unsup_steps",
    "steps_per_round",
    "steps_per_label",
    "total_labels",
)
"""The config's env step counts and its label budget, each at most :data:`MAX_STEPS`."""


SourceName = Literal["teacher", "crowd", "llm", "vlm", "scalar", "store", "route"]
AggregatorChoice = Literal["auto", "identity", "confidence", "majority", "sml", "window", "voting"]
RANKING_SOURCES = ("teacher", "store")
"""Sources that answer ranking queries (``selector='ranking'``): the simulated teacher and
people in the studio's Rank view."""
SelectorName = Literal[
    "auto",
    "disagreement",
    "entropy",
    "random",
    "groupwise",
    "ranking",
    "transitions",
    "policy-aligned",
]


@dataclass(frozen=True, kw_only=True)
class LLMSourceConfig:
    """The language-model judge (Lin et al., noisy LLM feedback) when ``--source llm``."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """OpenAI-compatible server root up to the API version, e.g. https://api.openai.com/v1."""
    model: str = "default"
    """Model name sent with every request."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (required unless the server is local)."""
    template: str = ""
    """Prompt template: a file path, or empty for the environment's built-in template."""
    n_queries: int = 1
    """Times each pair is asked; the share of 'yes' becomes the label's confidence."""
    temperature: float = 0.7
    """Sampling temperature (> 0 so repeated queries can disagree)."""
    concurrency: int = 8
    """Requests in flight at once."""
    timeout_s: float = 60.0
    """Timeout per request, seconds."""

    def __post_init__(self) -> None:
        if self.n_queries < 1:
            raise ConfigError(f"llm.n_queries must be ≥ 1, got {self.n_queries}")


PAIR_ONLY_SOURCES = ("vlm",)
"""Sources that answer pair queries only (not group, ranking or transition queries): the
vision-language judge compares two clips."""


@dataclass(frozen=True, kw_only=True)
class VLMOptions:
    """The vision-language judge (RL-VLM-F) when ``--source vlm``: rendered frames of both
    clips and the run's --task, asked of any OpenAI-compatible chat-completions server."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """Server root up to the API version: vLLM (http://HOST:8000/v1), Ollama
    (http://127.0.0.1:11434/v1) or a hosted endpoint (https://api.openai.com/v1)."""
    model: str = "default"
    """Model name sent with every request; it must take images."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (required unless the server is local)."""
    prompt: Literal["two-stage", "one-stage"] = "two-stage"
    """'two-stage' (RL-VLM-F: describe both clips, then answer from the description) or
    'one-stage' (frames and question in one request)."""
    template: str = ""
    """A prompt template file of that shape to use instead of the packaged one (copy
    src/preflab/vlm/prompts/*.txt and edit it)."""
    samples: int = 1
    """Times each pair is asked; the mean of the answers is the label's soft p."""
    frames: int = 4
    """Key frames per clip, evenly spaced from its first step to its last."""
    image_size: int = 224
    """Longer side of each frame in pixels."""
    format: Literal["jpeg", "png"] = "jpeg"
    """Image encoding sent: 'jpeg' (smaller) or 'png' (lossless)."""
    layout: Literal["frames", "strip"] = "frames"
    """'frames': one image per key frame; 'strip': a clip's key frames side by side in one
    image."""
    view: Literal["frames", "states"] = "frames"
    """What the model is shown of each clip: 'frames' (rendered images) or 'states' (the key
    steps' states in words, by the env's state describer as --source llm uses: a text-only
    model, e.g. `preflab llm serve-local`, answers the same question)."""
    jpeg_quality: int = 85
    """JPEG quality (1 to 95)."""
    temperature: float = 0.7
    """Sampling temperature (> 0 so repeated samples can disagree)."""
    max_tokens: int = 512
    """Cap on each answer's tokens (a description needs more than a verdict)."""
    concurrency: int = 4
    """Requests in flight at once."""
    timeout_s: float = 120.0
    """Time limit of one attempt, seconds (reading images is slow)."""
    prices: str = ""
    """Optional price table: a JSON file {model: {"prompt": USD per million tokens,
    "completion": USD per million tokens}} ("*" for any model); the cost is reported in
    summary.json."""

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ConfigError(f"vlm.samples must be ≥ 1, got {self.samples}")
        if not 1 <= self.frames <= 32:
            raise ConfigError(f"vlm.frames must be 1 to 32 key frames, got {self.frames}")
        if not 16 <= self.image_size <= 2048:
            raise ConfigError(f"vlm.image_size must be 16 to 2048 pixels, got {self.image_size}")
        if self.max_tokens < 1 or self.concurrency < 1 or self.timeout_s <= 0:
            raise ConfigError("vlm.max_tokens and vlm.concurrency must be ≥ 1, timeout_s > 0")


@dataclass(frozen=True, kw_only=True)
class ScalarSourceConfig:
    """Simulated real-time evaluators (Pref-GUIDE) when ``--source scalar``: they
    rate every step the agent takes during the live phase (``--policy-reward.live-steps``)."""

    n_evaluators: int = 15
    """How many evaluators rate at once."""
    population: Literal["mixed", "top"] = "mixed"
    """'top' (attentive, low noise) or 'mixed' (a third each of top, middling and poor)."""
    quality_scale: float = 2.0
    """Evaluators' scale of the true per-step reward."""
    window: int = 10
    """Pref-GUIDE window n (items compared pairwise inside it)."""
    delta: float = 0.1
    """No-preference range δ on ratings (5% of the [−1, 1] range)."""
    max_labels: int = 20_000
    """Most window labels one fit uses (a uniform sample of them; windows over every rated step
    give hundreds of thousands)."""

    def __post_init__(self) -> None:
        if self.n_evaluators < 1 or self.window < 2 or self.max_labels < 1:
            raise ConfigError(
                "scalar.n_evaluators and scalar.max_labels must be ≥ 1, scalar.window ≥ 2"
            )


def _parse_agent_kwargs(text: str) -> Mapping[str, Any]:
    """``agent_kwargs`` (a JSON object) as a mapping; a ConfigError otherwise."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"agent_kwargs must be a JSON object, got {text!r}: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"agent_kwargs must be a JSON object, got {text!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One preference-learning run: env, budgets, schedule, reward model, teacher, agent."""

    env_id: str = "Pendulum-v1"
    """Gymnasium environment id."""
    algo: Algo = "sac"
    """Policy learner."""
    backend: Backend = "sb3"
    """Library that runs the learner: 'sb3' (torch) or 'sbx' (JAX on the CPU, faster; sac, td3,
    ddpg, ppo, tqc and crossq; PrefLab's 'fast' extra). SB3 takes trpo, tqc and crossq from
    sb3-contrib; both keep the presets, relabelling, the studio and exact resume."""
    seed: int = 0
    """Seed of everything in the run (0 to 2**32 − 1)."""
    total_steps: int = 20_000
    """Environment steps in all, initial random steps included (at most 2**53, the largest
    count float64 holds exactly)."""
    total_labels: int = 100
    """Label budget: pair queries asked (each one answered gives a label). With the groupwise
    selector a group query counts once and yields several labels."""
    initial_label_frac: float = 0.25
    """Share of the label budget asked about segments of the initial random policy."""
    initial_steps: int = 1_000
    """Random-policy steps before the first reward fit (counted in total_steps)."""
    unsup_steps: int = 0
    """Steps of PEBBLE's unsupervised pre-training after the random steps and before the first
    query (counted in total_steps): the agent explores by a k-NN state-entropy reward, then the
    critic is reset at the first reward fit. Off-policy actor-critics only (sac, td3, ddpg,
    tqc, crossq); 0: off."""
    reset_updates: int = 0
    """Gradient updates of the agent (critic, actor and temperature) right after PEBBLE's critic
    reset, on the relabelled replay buffer, before the agent acts again: B-Pref's
    ``reset_update`` (100 in PEBBLE's, SURF's, QPA's and RUNE's configs). Needs unsup_steps and
    a critic that is reset (not RIME's warm start); 0: none."""
    steps_per_round: int = 1_000
    """Environment steps between feedback rounds (K)."""
    schedule: Literal["hyperbolic", "constant", "sessions"] = "hyperbolic"
    """How the remaining labels spread over rounds: 'constant', 'hyperbolic' (front-loaded) or
    'sessions' (the initial round's number in every round until the budget is spent, as
    B-Pref, PEBBLE, SURF and QPA ask ``reward_batch`` queries per feedback session)."""
    segment_length: int = 50
    """Env steps per segment, the clips that are compared (Pendulum: 50 steps = 2.5 s)."""
    selector: SelectorName = "auto"
    """Query selection: ensemble variance ('disagreement'), 'entropy', 'random', 'groupwise'
    (group comparisons between behaviour-tree nodes; one group answer gives max(m, n) labels),
    'ranking' (sets of ``rank_size`` clips to order from best to worst, chosen by ensemble
    variance; one ranking gives rank_size·(rank_size−1)/2 labels; the synthetic teacher or
    people in the studio's Rank view answer them) or 'transitions' (pairs of consecutive
    states (s_{t−1}, s_t) of one trajectory, sampled up front, as the language-model judge
    ranks them), 'policy-aligned' (QPA: random pairs of segments from the ``aligned_episodes``
    most recent episodes only). 'auto': 'transitions' with --source llm, 'disagreement'
    otherwise."""
    oversample: int = 10
    """Candidate pairs (or sets, with 'ranking') sampled per query asked (disagreement /
    entropy / ranking)."""
    rank_size: int = 4
    """Clips per ranking query with ``selector='ranking'`` (2 to 8)."""
    aligned_episodes: int = 10
    """With ``selector='policy-aligned'``: N, how many of the most recent episodes both
    segments of every query come from (QPA's N on DeepMind Control: 10)."""
    pool_size: int = 400
    """Most recent segments that candidate pairs are drawn from."""
    n_envs: int = 1
    """Environments stepped side by side (SB3's DummyVecEnv, in one process)."""
    agent_kwargs: str = "{}"
    """JSON object of extra SB3 constructor arguments, overriding the preset for the algorithm."""
    net_arch: tuple[int, ...] = (64, 64)
    """Policy (and value) network widths."""
    relabel: bool = True
    """Relabel an off-policy agent's replay buffer after every reward update (PEBBLE)."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward ensemble architecture."""
    fit: FitConfig = field(default_factory=FitConfig)
    """Reward fitting (epochs per round, ℓ2 adaptation, random-answer term)."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    """Off-policy agents' replay sampling: QPA's hybrid experience replay (off by default)."""
    policy_reward: PolicyRewardConfig = field(default_factory=PolicyRewardConfig)
    """The policy's reward: direct or potential difference, γ_r, step penalty, live phase."""
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    """Early termination (falls): fixed-horizon envs or absorbing states; both off by default."""
    first_fit_epochs: int = 40
    """Epochs of the first reward fit (later fits use fit.epochs, warm-started)."""
    source: SourceName = "teacher"
    """Who answers: a simulated teacher, crowd or raters, a language model, or people (store).
    Set them with --teacher.*, --crowd.*, --scalar.* and --llm.*; people answer in the studio
    (`preflab train --studio`, or `preflab studio RUN` beside a running `--source store`)."""
    aggregator: AggregatorChoice = "auto"
    """Judgements → labels: 'auto' = sml for a crowd, confidence for an LLM, windowed ratings
    for raters, else identity; 'voting' is Pref-GUIDE Alg. 2. The raters' 'window' labels are
    Pref-GUIDE Alg. 1 on each rater's stream, all raters' labels in one reward model: the
    paper's pooled baseline, not its Individual (one model per rater; the prefguide bench)."""
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    """Simulated teacher (default: perfect oracle)."""
    crowd: CrowdConfig = field(default_factory=CrowdConfig)
    """Simulated crowd (Crowd-PrefRL's users) when --source crowd."""
    llm: LLMSourceConfig = field(default_factory=LLMSourceConfig)
    """Language-model judge when --source llm."""
    vlm: VLMOptions = field(default_factory=VLMOptions)
    """Vision-language judge over rendered clips when --source vlm (needs --task)."""
    scalar: ScalarSourceConfig = field(default_factory=ScalarSourceConfig)
    """Simulated real-time raters when --source scalar."""
    route: RoutingConfig = field(default_factory=RoutingConfig)
    """Routing when --source route: the reward model, an AI judge and people share the run's
    queries, each sent to the cheapest answerer likely to be right (docs/guide/routing.md)."""
    eval_episodes: int = 10
    """Episodes of the final true-return evaluation (deterministic policy)."""
    eval_every_rounds: int = 0
    """Evaluate the policy every N rounds as well (0: only at the end)."""
    eval_target: str = ""
    """What the evaluation also measures when the behaviour taught is not the env's reward:
    'module:function' or 'file.py:function' scoring a segment (as --teacher.score does), applied
    to each evaluation episode; its sum is the episode's target return. Empty: the teacher's
    --teacher.score when one is given, else only the env's return."""
    wait_for_labels_s: float = 0.0
    """Seconds to wait each round for asynchronous answers (people); 0 never blocks."""
    clock: Literal["auto", "labels", "steps"] = "auto"
    """What paces the run. 'labels': people answer, the label budget is the run's clock: the
    trainer runs ahead of their answers by at most --steps-per-label env steps per answer, then
    waits (and says so in the terminal and the studio); the run ends when the label budget is
    met, the owner finishes it, or --max-minutes pass. 'steps': env steps only (simulated
    sources answer at once). 'auto': 'labels' with --source store (the studio), else 'steps'."""
    steps_per_label: int | None = None
    """With clock 'labels': env steps the trainer may take per answer received beyond its
    initial steps (None: (total_steps − initial_steps) / total_labels, so the last steps wait
    for the last answer)."""
    max_minutes: float | None = None
    """With clock 'labels': end the run after this many minutes of training even if the label
    budget is not met (None: no deadline)."""
    task: str = ""
    """What the agent should do, in words, shown to every annotator above the clips."""
    rate_episodes: int = 1
    """With clock 'labels' (people answer in the studio): the most recent whole episodes the
    trainer publishes for rating in the Rate view each round (Pref-GUIDE); their ratings become
    windowed labels (``scalar.window``, ``scalar.delta``) of the next fit. 0: none."""
    store_url: str = ""
    """SQLAlchemy URL of the store; empty = SQLite file feedback.db in the run directory."""
    torch_threads: int = 1
    """Threads torch may use (1 is fastest for small networks on 2 cores)."""
    device: str = "auto"
    """Where torch computes: 'auto' (the first CUDA GPU when torch sees one, else the CPU),
    'cpu', 'cuda' or 'cuda:N'. The SB3 agent and the reward ensemble (MLP or convolutional),
    its fits and relabelling run there; one off-policy step's learned reward stays in NumPy on
    the CPU. The sbx backend's JAX picks its own device (a GPU when its jaxlib has CUDA). A GPU
    that torch cannot use is refused before anything is written; may change on resume
    (docs/guide/devices.md)."""
    log: tuple[Literal["tensorboard", "wandb"], ...] = ()
    """Experiment trackers (:mod:`preflab.rundir.tracking`): 'tensorboard' (RUN_DIR/tensorboard, the
    policy's metrics too), 'wandb' (offline unless WANDB_MODE says otherwise); several allowed.
    Needs the track extra."""
    log_clip_every: int = 0
    """With --log: every N rounds, one deterministic episode of the current policy (at most
    1,000 steps, 160 px, from the evaluation's first seed) is saved as RUN_DIR/clips/round-N.mp4
    and shown in the trackers (TensorBoard: an animated image under 'policy/clip'; W&B: a video).
    0: no clips."""
    checkpoint_replay_buffer: bool = True
    """Save an off-policy agent's replay buffer in every checkpoint (compressed), so a resumed
    run continues exactly; turn off to save disk on very large buffers."""

    @property
    def selector_in_use(self) -> str:
        """The selector the run uses: ``selector`` with 'auto' resolved by the source (the
        language-model judge ranks consecutive states; every other source:
        'disagreement')."""
        if self.selector != "auto":
            return self.selector
        return "transitions" if self.source == "llm" else "disagreement"

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ConfigError(f"algo must be one of {ALGOS}, got {self.algo!r}")
        for name in (
            "total_steps",
            "total_labels",
            "steps_per_round",
            "segment_length",
            "n_envs",
            "oversample",
            "pool_size",
            "torch_threads",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"{name} must be ≥ 1, got {getattr(self, name)} (a budget of zero "
                    "cannot train anything; raise it)"
                )
        _check_step_counts(self)
        if any(not isinstance(w, int) or w < 1 for w in self.net_arch):
            raise ConfigError(
                f"net_arch must list layer widths ≥ 1 (e.g. 64 64), got {list(self.net_arch)}"
            )
        if not 0.0 <= self.initial_label_frac <= 1.0:
            raise ConfigError(
                f"initial_label_frac must be in [0, 1], got {self.initial_label_frac}"
            )
        if self.initial_steps < self.segment_length * 2:
            raise ConfigError(
                f"initial_steps ({self.initial_steps}) must give at least two segments of "
                f"segment_length {self.segment_length}; raise initial_steps"
            )
        if self.initial_steps >= self.total_steps:
            raise ConfigError(
                f"initial_steps ({self.initial_steps}) must be below total_steps ({self.total_steps})"
            )
        if self.unsup_steps < 0:
            raise ConfigError(
                f"unsup_steps must be ≥ 0 (0: no pre-training), got {self.unsup_steps}"
            )
        if self.unsup_steps and self.algo not in ACTOR_CRITIC_OFF_POLICY:
            raise ConfigError(
                f"unsup_steps (PEBBLE's pre-training) needs an off-policy actor-critic "
                f"({', '.join(ACTOR_CRITIC_OFF_POLICY)}); algo is {self.algo!r}: use --algo sac "
                f"or set --unsup-steps 0"
            )
        if self.reset_updates < 0:
            raise ConfigError(f"reset_updates must be ≥ 0 (0: none), got {self.reset_updates}")
        if self.reset_updates and (not self.unsup_steps or self.fit.rime.warm_start_steps):
            raise ConfigError(
                f"reset_updates ({self.reset_updates}) follows PEBBLE's critic reset, and this "
                "run has none: the reset comes after the pre-training (--unsup-steps) and RIME's "
                "warm start keeps the critic (--fit.rime.warm-start-steps). Set --unsup-steps "
                "(with no warm start) or --reset-updates 0"
            )
        if self.fit.rime.warm_start_steps and not self.unsup_steps:
            raise ConfigError(
                "fit.rime.warm_start_steps (RIME's warm start) fits the reward model to the "
                "intrinsic reward of PEBBLE's pre-training, and this run has none: add "
                "--unsup-steps N (RIME: 9000) or set --fit.rime.warm-start-steps 0"
            )
        if self.fit.reed.on and self.fit.reed.data == "replay" and is_on_policy(self.algo):
            raise ConfigError(
                f"fit.reed.data 'replay' (REED's pre-training on the replay buffer) needs an "
                f"off-policy agent; {self.algo!r} keeps none: set --fit.reed.data segments"
            )
        check_device_name(self.device)
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.backend == "sbx" and self.algo not in SBX_ALGOS:
            raise ConfigError(
                f"the sbx backend has no {self.algo!r}; it runs {', '.join(SBX_ALGOS)}: pick one "
                f"of them or use --backend sb3"
            )
        if self.pretrain_steps >= self.total_steps:
            raise ConfigError(
                f"initial_steps + unsup_steps ({self.pretrain_steps}) must be below total_steps "
                f"({self.total_steps}); lower them or raise total_steps"
            )
        _check_rounds(self)
        for name, kind in (
            ("schedule", Literal["hyperbolic", "constant", "sessions"]),
            ("selector", SelectorName),
            ("source", SourceName),
            ("aggregator", AggregatorChoice),
        ):
            if getattr(self, name) not in get_args(kind):
                raise ConfigError(
                    f"{name} must be one of {get_args(kind)}, got {getattr(self, name)!r}"
                )
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(
                f"seed must be ≥ 0 and at most {MAX_SEED} (2**32 − 1: SB3 seeds NumPy's legacy "
                f"generator with it), got {self.seed}"
            )
        if self.aligned_episodes < 1:
            raise ConfigError(
                f"aligned_episodes must be ≥ 1 (QPA uses 10), got {self.aligned_episodes}"
            )
        if self.replay.hybrid and is_on_policy(self.algo):
            raise ConfigError(
                f"--replay.hybrid samples an off-policy agent's replay buffer; {self.algo!r} "
                "learns on-policy and has none. Use --algo sac (or td3, ddpg, tqc, crossq, dqn) "
                "or drop --replay.hybrid"
            )
        if not 2 <= self.rank_size <= 8:
            raise ConfigError(f"rank_size must be 2 to 8 clips, got {self.rank_size}")
        if self.selector == "ranking" and self.source not in RANKING_SOURCES:
            raise ConfigError(
                f"--selector ranking is answered by the simulated teacher (--source teacher) or "
                f"by people in the studio's Rank view (--source store, or --studio); --source "
                f"{self.source} answers pair or group queries only (crowds, language-model "
                "judges and rating streams do not rank clips yet). Choose --source teacher or "
                "store, or another --selector"
            )
        if self.source in PAIR_ONLY_SOURCES:
            if self.selector in ("groupwise", "ranking", "transitions"):
                raise ConfigError(
                    f"--source {self.source} compares two clips (pair queries); --selector "
                    f"{self.selector} asks other kinds. Use --selector disagreement, entropy "
                    "or random"
                )
            if not self.task.strip():
                raise ConfigError(
                    f"--source {self.source} shows the model the task in words: pass --task "
                    "'what the agent should do' (e.g. 'swing the pendulum up and keep it "
                    "upright')"
                )
        if self.clock not in ("auto", "labels", "steps"):
            raise ConfigError(f"clock must be 'auto', 'labels' or 'steps', got {self.clock!r}")
        if self.steps_per_label is not None and self.steps_per_label < 1:
            raise ConfigError(
                f"steps_per_label must be ≥ 1, got {self.steps_per_label}; leave it unset for "
                "total_steps / total_labels"
            )
        if self.max_minutes is not None and not (
            math.isfinite(self.max_minutes) and self.max_minutes > 0
        ):
            raise ConfigError(
                f"max_minutes must be a positive number of minutes, got {self.max_minutes}"
            )
        if self.rate_episodes < 0:
            raise ConfigError(
                f"rate_episodes must be ≥ 0 (episodes published for rating per round; 0 = "
                f"none), got {self.rate_episodes}"
            )
        if len(self.task) > 500:
            raise ConfigError(f"task is {len(self.task)} characters; keep it to 500 or fewer")
        object.__setattr__(self, "_agent_overrides", _parse_agent_kwargs(self.agent_kwargs))

    def agent_overrides(self) -> Mapping[str, Any]:
        """``agent_kwargs`` as a mapping (not to be changed), parsed once when the config was
        made."""
        overrides: Mapping[str, Any] = self.__dict__["_agent_overrides"]
        return overrides

    @staticmethod
    def smoke(**overrides: Any) -> TrainConfig:
        """A tiny run for tests and smoke checks (Pendulum, PPO, a few hundred steps, seconds)."""
        base: dict[str, Any] = {
            "env_id": "Pendulum-v1",
            "algo": "ppo",
            "total_steps": 600,
            "initial_steps": 200,
            "steps_per_round": 200,
            "total_labels": 12,
            "segment_length": 20,
            "pool_size": 40,
            "eval_episodes": 2,
            "first_fit_epochs": 5,
            "net_arch": (16, 16),
            "reward": RewardConfig(members=2, hidden=(16,)),
            "fit": FitConfig(epochs=3),
            "agent_kwargs": '{"batch_size": 50}',
        }
        return TrainConfig(**(base | overrides))

    @staticmethod
    def atari(env_id: str = "ALE/Pong-v5", **overrides: Any) -> TrainConfig:
        """An Atari game after Christiano et al. 2017: A2C, 25-step segments, a convolutional
        reward ensemble of r(s) (appendix A.2), a teacher that calls two reward-less clips
        equal; scaled to a 2-core machine, so not their budget: 200 labels (theirs 5,500),
        short fits, the label schedule of :func:`preflab.loop.results.label_schedule` rather
        than their rate ∝ 5·10⁶/(T + 5·10⁶), the learned reward standardised to std 1 and A2C's
        learning rate constant. ``overrides`` replace any field (the CLI uses this as its
        default for ALE ids, so every flag still applies)."""
        base: dict[str, Any] = {
            "env_id": env_id,
            "algo": "a2c",
            "n_envs": 16,
            "total_steps": 200_000,
            "initial_steps": 2_000,
            "steps_per_round": 20_000,
            "total_labels": 200,
            "initial_label_frac": 0.25,
            "segment_length": ATARI_SEGMENT_LENGTH,
            "pool_size": 200,
            "oversample": 4,
            "net_arch": (),
            "reward": RewardConfig(kind="cnn", members=3, use_actions=False),
            # a CNN fit step costs ~M × 16 × 25 frame stacks forward and backward: few, small steps
            "fit": FitConfig(epochs=2, batch_size=8, min_steps=10, max_steps=30),
            "first_fit_epochs": 8,
            "teacher": TeacherConfig(equal_if_no_reward=True),
            "eval_episodes": 3,
        }
        return TrainConfig(**(base | overrides))

    @property
    def paced_by_labels(self) -> bool:
        """Whether the label budget is the run's clock (people answer; see ``clock``)."""
        people = self.source == "store" or (self.source == "route" and self.route.people == "store")
        return self.clock == "labels" or (self.clock == "auto" and people)

    @property
    def label_steps(self) -> float:
        """Env steps the trainer may take per answer with clock 'labels'."""
        if self.steps_per_label is not None:
            return float(self.steps_per_label)
        return (self.total_steps - self.pretrain_steps) / self.total_labels

    @property
    def pretrain_steps(self) -> int:
        """Env steps before the first query: the random steps and the unsupervised ones."""
        return self.initial_steps + self.unsup_steps

    @property
    def n_rounds(self) -> int:
        """Feedback rounds after the initial one."""
        return max(1, math.ceil((self.total_steps - self.pretrain_steps) / self.steps_per_round))

    def to_json(self) -> str:
        """Strict JSON: non-finite floats (e.g. the teacher's ``beta = inf``) are written as
        the strings ``"Infinity"``, ``"-Infinity"``, ``"NaN"`` (:data:`preflab.config.values.NON_FINITE`) and read
        back as floats by :meth:`from_json`."""
        return json.dumps(finite_json(asdict(self)), indent=2, allow_nan=False)

    @staticmethod
    def from_json(text: str, *, where: str = "config.json") -> TrainConfig:
        """The config :meth:`to_json` wrote, every key and type checked as a TOML config file's
        are (:func:`preflab.config.values.apply_config_data`): a hand-edited config.json with a
        wrong type is a clear error, not a failure deep in the run. ``where``: the file's name
        in the error."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"{where} is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(
                f"{where} is not a PrefLab config: expected a JSON object of options, got "
                f"{type(data).__name__}"
            )
        return apply_config_data(TrainConfig(), data, where=where)

    @staticmethod
    def load(path: str | Path) -> TrainConfig:
        """The config in the file ``path`` (a run's ``config.json``); one that cannot be read is
        a ConfigError naming the file, what is wrong and where a run keeps its original."""
        p = Path(path)
        try:
            return TrainConfig.from_json(read_text_file(p, what="PrefLab config"), where=str(p))
        except ConfigError as exc:
            raise ConfigError(f"{exc}. {_restore_config(p)}") from exc


def _restore_config(path: Path) -> str:
    """How to put back a run's unreadable ``config.json`` at ``path``."""
    record = path.parent / "checkpoints" / "run.json"
    if record.is_file():
        return (
            f'The run\'s original config is kept in {record} (under "config"): write that '
            f"object back to {path}"
        )
    return f"Expected the JSON a PrefLab run writes (TrainConfig.to_json): restore {path}"


def finite_json(value: Any) -> Any:
    """``value`` (nested dicts, lists, tuples) with non-finite floats as :data:`~preflab.config.values.NON_FINITE`
    strings, so ``json.dumps(..., allow_nan=False)`` takes it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def _count(value: int) -> str:
    """An integer for a message: with thousands separators, in scientific notation when huge."""
    return f"{value:,}" if abs(value) < 10**30 else f"{Decimal(value):.3e}"


def _check_step_counts(config: TrainConfig) -> None:
    """Refuse a step count or label budget above :data:`MAX_STEPS` (e.g. ``10**26``, which the
    run's float and int64 counters cannot count), naming the field and the accepted range."""
    for name in STEP_COUNTS:
        value = getattr(config, name)
        if value is not None and value > MAX_STEPS:
            raise ConfigError(
                f"{name} must be at most {MAX_STEPS:,} (2**53: the largest count the run's "
                f"float64 and int64 counters hold exactly), got {_count(value)}; lower it"
            )


def _check_rounds(config: TrainConfig) -> None:
    """Refuse more than :data:`MAX_ROUNDS` feedback rounds (the label schedule lists them all)."""
    rounds = -(-(config.total_steps - config.pretrain_steps) // config.steps_per_round)
    if rounds > MAX_ROUNDS:
        raise ConfigError(
            f"total_steps {config.total_steps:,} with steps_per_round {config.steps_per_round:,} "
            f"gives {rounds:,} feedback rounds after the initial steps; a run may have at most "
            f"{MAX_ROUNDS:,} (its label schedule plans every round when it starts): raise "
            "steps_per_round or lower total_steps"
        )
