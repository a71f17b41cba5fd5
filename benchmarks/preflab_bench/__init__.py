"""Benchmarks and paper reproductions; each module has ``main(argv) -> int``.

:data:`BENCHMARKS` describes each one for ``preflab bench`` (a test keeps it in step with the
modules here).
"""

from __future__ import annotations

BENCHMARKS: dict[str, tuple[str, str]] = {
    "ai_judge": (
        "~1 min",
        "an AI judge (any vision-language server) vs the oracle on shipped clip pairs",
    ),
    "atari": ("~1 h/arm", "Christiano et al. 2017 on Atari: A2C from preferences vs true reward"),
    "atari_speed": ("~10 min", "Atari: A2C steps/s with and without reward relabelling"),
    "bpref": ("~1 h/seed", "B-Pref: PrefLab's PEBBLE vs SAC on the true reward (DMC, Meta-World)"),
    "crowd_fig2": ("~7 min", "Crowd-PrefRL Fig. 2: SML vs majority label error across crowds"),
    "crowd_fig5": ("~30 min", "Crowd-PrefRL Fig. 4/5: finding a minority viewpoint (MO-Hopper)"),
    "crowd_fig5_explain": (
        "~12 min/seed",
        "Crowd-PrefRL Fig. 5: where per-group label errors come from",
    ),
    "crowd_ppo": ("~1 h/run", "Crowd-PrefPPO: PPO from crowd labels by SML, majority or oracle"),
    "crowd_study": (
        "~8 min",
        "12 scripted people (4 in Chromium) label a Hopper run through a study link",
    ),
    "efficiency": (
        "~1 h/run",
        "labels to reach SAC-on-the-true-reward: + pre-training, SURF, RUNE (DMC; 31 runs)",
    ),
    "groupwise": ("~1 h", "groupwise comparison (Kompatscher et al.), Table 1 at CPU size"),
    "groupwise_labels": ("~1 h", "groupwise Table 1: why the label counts differ (exploratory)"),
    "groupwise_speed": ("~2 min", "exploration view speed: DTW, tree, suggestions (200/1,000)"),
    "llm_fig5": ("~3 min", "noisy LLM feedback (Lin et al.) Fig. 5: state-score heat maps"),
    "llm_fig7": ("~10 min/run", "noisy LLM feedback (Lin et al.) Fig. 7: potential vs direct"),
    "llm_local": (
        "~25 min",
        "a real small model (SmolLM2-135M, CPU) as the judge: accuracy, tokens/s",
    ),
    "llm_rank": ("~11 min", "noisy LLM feedback (Lin et al.) Table 1: rank vs score accuracy"),
    "llm_throughput": ("~1 min", "LLM judge throughput against a local stand-in server"),
    "main_job": ("~10 min/seed", "the main job (`preflab train`) against an earlier commit"),
    "mujoco": ("~2 h/run", "Christiano et al. 2017 on MuJoCo: 700 labels vs the true reward"),
    "overhead": ("~20 min", "reward-learning overhead vs the same learner on the true reward"),
    "packaging": ("~10 min", "the wheel in a fresh virtualenv: sizes, install, the main job"),
    "peer": ("~5 min/run", "imitation's PreferenceComparisons in its own virtualenv (peer)"),
    "pendulum": ("~1 h/arm", "Pendulum-v1 like for like: PrefLab vs imitation, same learner"),
    "prefguide": ("~12 min/seed", "Pref-GUIDE with 15 simulated real-time evaluators (Pendulum)"),
    "restate": ("~1 min", "restate an older result under the protocol (IQM, looks-corrected)"),
    "routing": (
        "~1 h/run",
        "people's labels to reach SAC-on-the-true-reward: alone vs routed (model, simulated AI)",
    ),
    "store_throughput": (
        "~2 min",
        "feedback store: many writer processes, a collector, bulk reads",
    ),
    "studio_groupwise": ("~10 min", "groupwise exploration and comparison in the studio"),
    "studio_load": ("~2 min", "the studio under load: many annotators while a trainer writes"),
    "studio_media": ("~2 min", "studio videos: time to first clip and a whole round (Hopper)"),
    "studio_session": ("~40 min/seed", "a scripted person teaches an agent with `--studio`"),
    "sweep_speed": ("~1 min", "sweep speed: a 2 x 2 x 3 grid one after another, then on Ray"),
}
"""Benchmark name → (rough run time with its defaults on a 2-core machine, one-line description)."""
