"""The site's Results pages, generated from ``benchmarks/results/`` at build time (docs/hooks.py).

One page per paper and one per benchmark (``preflab bench NAME``); every result file appears on
the page of the benchmark that wrote it (the longest benchmark name its file name starts with),
and in full on a page of its own that the benchmark page links. A benchmark page shows:

- each pre-registered plan entry of that benchmark (``benchmarks/plan.toml``): question, arms,
  seeds, budget (its note states the paper's budget where the two differ), target, and the
  verdict lines the result files print for it, copied; a void entry shows the reason from
  ``benchmarks/plan_voids.toml``. No verdict is written here: only copied. An entry whose
  files state none shows where it stands instead (:class:`Ledger`): void, withdrawn, superseded
  by a later entry, in the queue with its runs done, or neither run nor queued;
- each result file: its tables and plots, with the per-run rows (the tables with a ``command``
  column) replaced by links to the full file and its run log (``*_runs.jsonl``, downloadable);
  a file that ends with "Under the reporting protocol" is marked exploratory, as it says.

Nothing here runs a benchmark; the pages change only when the result files do.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import gen_claims

from preflab_bench import _plan
from preflab_bench._plan import Plan
from preflab_bench._registration import Registration, registration

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PLAN = ROOT / "benchmarks" / "plan.toml"
VOIDS = ROOT / "benchmarks" / "plan_voids.toml"

PAPERS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "christiano2017",
        "Deep RL from Human Preferences (Christiano et al., 2017)",
        "The core loop: reward ensemble, disagreement queries, PPO/SAC/TD3/A2C/TRPO on the learned "
        "reward, replay relabelling, early termination (absorbing states), Atari from pixels with "
        "the convolutional reward model; the studio's pairwise view.",
        ("pendulum", "overhead", "mujoco", "atari", "atari_speed", "main_job"),
    ),
    (
        "groupwise",
        "Interactive Groupwise Comparison (Kompatscher et al.)",
        "DTW behaviour tree, group comparisons, groupwise active learning, simulated decision "
        "makers; the studio's exploration and comparison views.",
        ("groupwise", "groupwise_speed", "studio_groupwise", "studio_session"),
    ),
    (
        "crowd-prefrl",
        "Crowd-PrefRL (Chhan, Novoseller, Lawhern)",
        "Majority vote, the Spectral Meta-Learner with missing answers, minority viewpoints; "
        "many annotators in the studio.",
        ("crowd_fig2", "crowd_fig5", "crowd_fig5_explain", "crowd_ppo", "crowd_scale"),
    ),
    (
        "pref-guide",
        "Pref-GUIDE (real-time human feedback)",
        "Real-time scalar ratings turned into windowed preferences, per-evaluator models, voting; "
        "the studio's real-time rating view.",
        ("prefguide",),
    ),
    (
        "noisy-llm",
        "Navigating Noisy Feedback (Lin et al.)",
        "State describers, prompts, an OpenAI-compatible judge, multi-query confidence, "
        "potential-difference rewards; a real small model as the judge.",
        ("llm_fig5", "llm_fig7", "llm_rank", "llm_throughput", "llm_local", "llm_sigma_planning"),
    ),
    (
        "bpref",
        "B-Pref (Lee et al., 2021) and label efficiency",
        "DeepMind Control and Meta-World, B-Pref's simulated teachers and PEBBLE set-ups; PEBBLE's "
        "pre-training, SURF and RUNE.",
        ("bpref", "efficiency"),
    ),
)
"""(slug, title, what PrefLab implements, benchmarks) of each paper page."""

EXTRA_BENCHES = ("llm_sigma_planning", "crowd_scale", "pendulum_labels", "device_check")
"""Result-file groups that are not a ``preflab bench`` module of their own."""

BOLD = re.compile(r"\*\*(.+?)\*\*")
"""A bold span, paired as Markdown pairs them: each ``**`` closes the one before it, so the text
between one span's closing ``**`` and the next span's opening one is never taken as bold."""
BOLD_VERDICT = re.compile(
    r"^(met|missed|not shown|void)$|\b(met|missed|not shown|exploratory|not pre-registered)\b"
)
"""A verdict word in a bold span: the span's whole text, or its first verdict word."""
PLAIN_VERDICT = re.compile(r"\bvoid\b|: (met|missed|not shown)\b|\bVerdict\b")
"""A verdict outside bold: "void", ": met" (its word), or the word "Verdict"."""
ENTRY_TAG = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`")
"""A plan entry's id as result files name it in a heading: `bpref-walker-sbx100k`."""
STRONG = re.compile(
    r"^(?:\*\*)?Verdict[^:]*:\s*(met|missed|not shown)\b"
    r"|target[^:;]*:\s*\*\*(met|missed|not shown)\*\*"
)
"""A verdict stated as one: "Verdict: met." or "target above 0.5: **met**"."""
PROTOCOL_SECTION = re.compile(r"^#+ Under the reporting protocol", re.M)


@dataclass
class Bench:
    name: str
    what: str = ""
    runtime: str = ""
    files: list[Path] = field(default_factory=list)
    """Result files (.md) in the results folder (or a sub-folder named like the bench)."""
    details: list[Path] = field(default_factory=list)
    """Per-seed files (``*_seedN.md``): linked only."""


SUPERSEDES = r"(?:Replaces|Takes the place of)\s+`?{id}`?(?![\w-])"
"""How a later entry's note says it supersedes ``id``: "Replaces bpref-walker-oracle" or
"Takes the place of bpref-cheetah-sbx100k's PEBBLE arm"."""


@dataclass(frozen=True)
class Ledger:
    """Where each plan entry stands besides its result files: the plan (with its voids), the
    run-log rows naming each entry, and the entries ``benchmarks/queue.toml`` has a job for."""

    plan: Plan
    rows: Mapping[str, gen_claims.Rows]
    """Plan id → its run-log rows (:func:`gen_claims.rows_by_entry`)."""
    queued: Collection[str]
    """Entries with a queue job (:func:`gen_claims.queued_entries`)."""
    queue: Path | None = None
    """The queue file, for the frozen code its jobs name (registration evidence)."""
    history: bool = True
    """Whether registration may read the git history (False: the dates decide)."""
    _registrations: dict[str, Registration] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Each entry's registration once read (a bench page and a paper page both ask)."""

    @classmethod
    def load(cls) -> Ledger:
        return cls(
            _plan.load_plan(PLAN),
            gen_claims.rows_by_entry(RESULTS),
            frozenset(gen_claims.queued_entries(gen_claims.QUEUE)),
            gen_claims.QUEUE,
        )

    def superseded_by(self, entry_id: str) -> str | None:
        """The later entry whose note says it replaces ``entry_id`` (:data:`SUPERSEDES`)."""
        pattern = re.compile(SUPERSEDES.format(id=re.escape(entry_id)))
        for e in self.plan.experiments:
            notes = f"{e.note} {e.budget.get('note', '')} {e.target.note}"
            if e.id != entry_id and pattern.search(notes):
                return e.id
        return None

    def registration(self, entry_id: str) -> Registration:
        """Whether the record shows the entry was committed before its runs
        (:mod:`preflab_bench._registration`)."""
        if entry_id not in self._registrations:
            got = self.rows.get(entry_id)
            self._registrations[entry_id] = registration(
                self.plan.entry(entry_id),
                got.rows if got else [],
                plan_file=self.plan.path or PLAN,
                logs=sorted(got.logs) if got else (),
                queue=self.queue,
                history=self.history and self.plan.path is not None,
            )
        return self._registrations[entry_id]

    def standing(self, entry_id: str) -> str:
        """What a verdict cell says of an entry whose result files state no verdict: "void"
        (``plan_voids.toml``), "withdrawn (its plan note)", superseded by the entry that
        replaces it, registered and in the queue with its runs done (:mod:`preflab_bench.
        _registration` decides "registered"), or neither run nor queued."""
        e = self.plan.entry(entry_id)
        got = self.rows.get(entry_id)
        runs = gen_claims.runs_phrase(self.plan, self.rows, entry_id).removeprefix(": ")
        none_yet = gen_claims.done(e, got) == 0
        if e.void:
            return "void"
        if gen_claims.withdrawn(e):
            return "withdrawn (its plan note)"
        later = self.superseded_by(entry_id)
        if later is not None:
            return (
                f"not run: superseded by `{later}`"
                if none_yet
                else f"not read: superseded by `{later}` ({runs})"
            )
        if entry_id in self.queued:
            reg = self.registration(entry_id)
            return {
                "pre-registered": f"registered, in the queue: {runs}",
                "after": f"in the queue: {runs}; recorded after its runs: exploratory",
                "undetermined": f"in the queue: {runs}; registration not on record: exploratory",
            }[reg.status]
        return "not run, not queued" if none_yet else f"not read: {runs}, not queued"


def bench_catalogue() -> dict[str, tuple[str, str]]:
    """``preflab bench``'s list: name → (run time, what it measures)."""
    import preflab_bench

    return dict(preflab_bench.BENCHMARKS)


def group_files() -> dict[str, Bench]:
    catalogue = bench_catalogue()
    names = sorted(set(catalogue) | set(EXTRA_BENCHES), key=len, reverse=True)
    benches = {
        n: Bench(n, catalogue.get(n, ("", ""))[1], catalogue.get(n, ("", ""))[0])
        for n in sorted(set(catalogue) | set(EXTRA_BENCHES))
    }
    for path in sorted(RESULTS.rglob("*.md")):
        rel = path.relative_to(RESULTS)
        stem = rel.parts[0] if len(rel.parts) > 1 else path.stem
        owner = next((n for n in names if stem == n or stem.startswith(n + "_")), "other")
        if owner not in benches:
            benches[owner] = Bench(owner, "result files of no benchmark module")
        target = benches[owner]
        (target.details if re.search(r"_seed\d+$", path.stem) else target.files).append(path)
    out = {n: b for n, b in benches.items() if b.files or b.details}
    for b in out.values():  # no `preflab bench` entry: what the main file's title says
        if not b.what and b.files:
            main = next((f for f in b.files if f.stem == b.name), b.files[0])
            b.what = _title(main.read_text(encoding="utf-8"), b.name)
    return out


def load_plan() -> tuple[list[dict], dict[str, str]]:
    plan = tomllib.loads(PLAN.read_text(encoding="utf-8"))["experiment"]
    voids = tomllib.loads(VOIDS.read_text(encoding="utf-8")).get("void", {})
    return plan, voids


def file_page(path: Path) -> str:
    """The site path of a result file's full page."""
    return "results/files/" + path.relative_to(RESULTS).as_posix()


def raw_uri(path: Path) -> str:
    return "results/raw/" + path.relative_to(RESULTS).as_posix()


def _rel(src: str, dst: str) -> str:
    """A link from page ``src`` to site file ``dst`` (both relative to docs/)."""
    import posixpath

    return posixpath.relpath(dst, posixpath.dirname(src))


def _title(text: str, fallback: str) -> str:
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else fallback


def _fix_links(text: str, path: Path, page: str) -> str:
    """Image and file links of a result file, pointed at the copies the site serves."""

    def repl(m: re.Match[str]) -> str:
        target = m.group(2)
        if "://" in target or target.startswith("#"):
            return m.group(0)
        local = (path.parent / target).resolve()
        if local.is_file() and RESULTS in local.parents:
            rel = local.relative_to(RESULTS).as_posix()
            dst = ("results/raw/" + rel) if local.suffix != ".md" else file_page(local)
            return f"{m.group(1)}({_rel(page, dst)})"
        return m.group(1) + "(" + target + ")"

    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", repl, text)


def _split_tables(text: str) -> list[tuple[bool, str]]:
    """(is_table, block) in order."""
    out: list[tuple[bool, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append((True, "\n".join(lines[i:j])))
            i = j
        else:
            j = i
            while j < len(lines) and not lines[j].lstrip().startswith("|"):
                j += 1
            out.append((False, "\n".join(lines[i:j])))
            i = j
    return out


def _is_run_table(table: str) -> bool:
    header = [c.strip().lower() for c in table.splitlines()[0].strip().strip("|").split("|")]
    return "command" in header


def _run_logs(path: Path) -> list[Path]:
    stem = path.stem
    logs = sorted(path.parent.glob(f"{stem}_runs*.jsonl")) + sorted(
        path.parent.glob(f"{stem}*.jsonl")
    )
    seen: list[Path] = []
    for p in logs:
        if p not in seen:
            seen.append(p)
    return seen


def _demote(text: str, by: int) -> str:
    return re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + by) + " ", text, flags=re.M)


def _clean(text: str) -> str:
    """Blank lines around tables and lists, so Python-Markdown renders what GitHub does."""
    out: list[str] = []
    for line in text.splitlines():
        starts_block = line.lstrip().startswith(("|", "- ", "* ", "1. ")) or re.match(
            r"^\d+\. ", line
        )
        if (
            starts_block
            and out
            and out[-1].strip()
            and not out[-1].lstrip().startswith(("|", "- ", "* "))
            and not re.match(r"^\s*\d+\. ", out[-1])
            and not line.startswith("  ")
        ):
            out.append("")
        out.append(line)
    return "\n".join(out)


def summary_of(path: Path, page: str) -> str:
    """A result file without its title and per-run tables (they are linked instead)."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^# .+\n", "", text, count=1)
    full = _rel(page, file_page(path))
    parts = []
    for is_table, block in _split_tables(_fix_links(text, path, page)):
        if is_table and _is_run_table(block):
            n = len(block.splitlines()) - 2
            parts.append(f"*{n} per-run rows with their commands: in [the full file]({full}).*")
        else:
            parts.append(block)
    return _clean(_demote("\n".join(parts), 2))


def _blocks(text: str) -> list[tuple[int, str]]:
    """(heading level or 0, text) of a result file: headings, then paragraphs and list items
    with their wrapped lines joined; tables are left out."""
    out: list[tuple[int, str]] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            out.append((0, " ".join(x.strip() for x in cur)))
            cur.clear()

    for line in text.splitlines():
        h = re.match(r"^(#+) ", line)
        if h:
            flush()
            out.append((len(h.group(1)), line))
        elif not line.strip() or line.lstrip().startswith("|"):
            flush()
        elif re.match(r"^\s*([-*]|\d+\.) ", line):
            flush()
            cur.append(line)
        else:
            cur.append(line)
    flush()
    return out


def verdict_marks(text: str) -> list[str | None]:
    """The verdict marks of a paragraph, in order: each one's verdict word, or None for a mark
    without one ("void" or "Verdict" outside bold). A bold span (:data:`BOLD`) with a verdict
    word gives that word (:data:`BOLD_VERDICT`); other text is read by :data:`PLAIN_VERDICT`."""
    marks: list[str | None] = []

    def plain(part: str) -> None:
        marks.extend(m.group(1) for m in PLAIN_VERDICT.finditer(part))

    pos = 0
    for span in BOLD.finditer(text):
        plain(text[pos : span.start()])
        word = BOLD_VERDICT.search(span.group(1))
        if word:
            marks.append(word.group(1) or word.group(2))
        else:
            plain(span.group(1))
        pos = span.end()
    plain(text[pos:])
    return marks


def verdict_lines(entry_id: str, files: list[Path]) -> list[tuple[Path, str]]:
    """Paragraphs of the result files that state a verdict for ``entry_id``: in a section whose
    heading names the entry (or that a paragraph opens with "Plan entry `ID`"), or naming the
    entry themselves outside a section about another entry (a heading that names other plan
    entries and not this one, :data:`ENTRY_TAG`): there the entry is named only beside the
    section's own, as the entry whose runs it reuses, say."""
    tag = f"`{entry_id}`"
    found: list[tuple[Path, str]] = []
    for path in files:
        inside, level = False, 0
        other, other_level = False, 0
        for lvl, text in _blocks(path.read_text(encoding="utf-8")):
            if lvl:
                if tag in text:
                    inside, level, other = True, lvl, False
                    continue
                if inside and lvl <= level:
                    inside = False
                if other and lvl <= other_level:
                    other = False
                if not inside and ENTRY_TAG.search(text):
                    other, other_level = True, lvl
                continue
            if re.match(r"^(- )?Plan entry " + re.escape(tag), text):
                inside, level = True, 7  # until the next heading
            if (inside or (tag in text and not other)) and verdict_marks(text):
                found.append((path, re.sub(r"^([-*]|\d+\.) ", "", text).strip()))
    return found


def _budget(budget: dict) -> str:
    keys = [f"{k.replace('_', ' ')} {v}" for k, v in budget.items() if k != "note"]
    return ", ".join(keys)


def entry_block(
    e: dict, voids: dict[str, str], files: list[Path], page: str, ledger: Ledger
) -> str:
    lines = [f"### `{e['id']}`", ""]
    lines.append(f"**Question.** {e['question']}")
    lines.append("")
    rows = [
        ("arms", ", ".join(e.get("arms", []))),
        ("evaluation seeds", ", ".join(map(str, e.get("eval_seeds", []))) or "—"),
        ("env", e.get("env") or ", ".join(e.get("envs", [])) or "—"),
        ("budget", _budget(e.get("budget", {}))),
        ("metric", e.get("metric", "")),
        (
            "target",
            f"{e['target'].get('kind', '')} {e['target'].get('direction', '')} "
            f"{e['target'].get('value', '')}",
        ),
        ("looks", str(e.get("looks", ""))),
        ("committed", str(e.get("committed", ""))),
    ]
    if e.get("extends"):
        rows.append(("extends", f"`{e['extends']}`"))
    if e.get("reuse"):
        rows.append(("reuses", ", ".join(f"{a} from `{b}`" for a, b in e["reuse"].items())))
    lines += ["| plan | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]
    note = e.get("budget", {}).get("note")
    if note:
        lines += [f"**Budget beside the paper's** (the plan's note). {note}", ""]
    if e["target"].get("note"):
        lines += [f"**Target** (the plan's note). {e['target']['note']}", ""]
    if e.get("note"):
        lines += [f"**Note** (the plan's). {e['note']}", ""]
    if e["id"] in voids:
        lines += [
            '!!! warning "Void: no verdict"',
            "",
            f"    {voids[e['id']]} (`benchmarks/plan_voids.toml`)",
            "",
        ]
    verdicts = verdict_lines(e["id"], files)
    if verdicts:
        lines += ['!!! abstract "Verdict, as the result files state it"', ""]
        for path, text in verdicts:
            lines.append(f"    - {text} ([{path.name}]({_rel(page, file_page(path))}))")
        lines.append("")
    elif e["id"] not in voids:
        lines += [
            '!!! note "No verdict in the result files"',
            "",
            f"    Where it stands: {ledger.standing(e['id'])}.",
            "",
            "    No line of this benchmark's result files that names this entry states a verdict "
            "(met, missed, not shown, void). An entry is read once, when every planned run "
            "exists (`benchmarks/queue.toml` lists the runs still to make); an entry that was "
            "withdrawn says so in its note above, one that was superseded in the note of the "
            "entry that replaces it.",
            "",
        ]
    return "\n".join(lines)


def bench_page(
    b: Bench, plan: list[dict], voids: dict[str, str], ledger: Ledger
) -> tuple[str, str]:
    page = f"results/{b.name}.md"
    main = next((f for f in b.files if f.stem == b.name), b.files[0] if b.files else None)
    title = _title(main.read_text(encoding="utf-8"), b.name) if main else b.name
    out = [f"# {title}", ""]
    if b.name in bench_catalogue():
        run = f" (about {b.runtime.removeprefix('~')} on a 2-core machine)" if b.runtime else ""
        out += [f"`preflab bench {b.name}`: {b.what}{run}.", ""]
    else:
        out += ["Result files written by no `preflab bench` module (each says what made it).", ""]
    entries = [e for e in plan if e.get("bench") == b.name]
    if entries:
        out += [
            "## Pre-registered plan entries",
            "",
            "From `benchmarks/plan.toml`, written before the runs. Only these entries carry "
            "verdicts ([the reporting protocol](../concepts/reporting.md)); the verdict lines are "
            "copied from the result files.",
            "",
        ]
        out += [
            "| entry | env | budget | verdict (from the result files), or where it stands |",
            "|---|---|---|---|",
        ]
        for e in entries:
            env = e.get("env") or ", ".join(e.get("envs", [])) or "—"
            budget = e.get("budget", {})
            short = ", ".join(
                f"{k.replace('_', ' ')} {budget[k]}" for k in ("env_steps", "labels") if k in budget
            )
            out.append(
                f"| [`{e['id']}`](#{e['id']}) | {env} | {short or '—'} | "
                f"{_verdict_word(e['id'], b.files, ledger)} |"
            )
        out.append("")
        out += [entry_block(e, voids, b.files, page, ledger) for e in entries]
    else:
        out += [
            '!!! note "Exploratory: no plan entry"',
            "",
            "    No entry of `benchmarks/plan.toml` names this benchmark: its readings are "
            "exploratory and carry no verdict (each result file says so in its section "
            '"Under the reporting protocol", where it has one).',
            "",
        ]
    out += ["## Result files", ""]
    for f in b.files:
        rel = f.relative_to(RESULTS).as_posix()
        text = f.read_text(encoding="utf-8")
        out += [f"### {rel}", "", f"*{_title(text, rel)}*", ""]
        links = [f"[the full file]({_rel(page, file_page(f))}) (`benchmarks/results/{rel}`)"]
        links += [f"run log [{log.name}]({_rel(page, raw_uri(log))})" for log in _run_logs(f)]
        out += ["Source: " + " · ".join(links) + ".", ""]
        if PROTOCOL_SECTION.search(text):
            out += [
                '!!! note "Exploratory"',
                "",
                '    This file ends with a section "Under the reporting protocol" that says why '
                "its readings are exploratory, not verdicts.",
                "",
            ]
        out += [summary_of(f, page), ""]
        pngs = [p for p in sorted(f.parent.glob(f"{f.stem}*.png")) if p.name not in text]
        for p in pngs:
            out += [f"![{p.name}]({_rel(page, raw_uri(p))})", ""]
    if b.details:
        out += ["## Per-seed files", ""]
        out += [f"- [{d.name}]({_rel(page, file_page(d))})" for d in b.details]
        out.append("")
    return page, "\n".join(out)


def _verdict_word(entry_id: str, files: list[Path], ledger: Ledger) -> str:
    """A summary of the verdict lines quoted for an entry: their verdict words; without any,
    where the entry stands (:meth:`Ledger.standing`)."""
    if ledger.plan.entry(entry_id).void:
        return "void"
    lines = verdict_lines(entry_id, files)
    strong = sorted(
        {
            m.group(1) or m.group(2)
            for _p, t in lines
            for m in [STRONG.search(t)]
            if m and (m.group(1) or m.group(2))
        }
    )
    if strong:
        return _as_registered(entry_id, ", ".join(strong), ledger)
    words = sorted({w for _p, t in lines for w in verdict_marks(t) if w})
    if words:
        return _as_registered(entry_id, ", ".join(words), ledger)
    return "see below" if lines else ledger.standing(entry_id)


def _as_registered(entry_id: str, words: str, ledger: Ledger) -> str:
    """``words`` (the verdict words an entry's result files state) as its verdict when the
    record shows the entry was committed before its runs; otherwise marked exploratory."""
    if words == "exploratory" or ledger.registration(entry_id).status == "pre-registered":
        return words
    as_verdict = ", ".join(w for w in words.split(", ") if w != "exploratory")
    return f"exploratory by the record (read as a verdict: {as_verdict})"


def paper_page(
    slug: str, title: str, what: str, benches: tuple[str, ...], known: dict, ledger: Ledger
) -> str:
    page = f"results/paper-{slug}.md"
    plan, _voids = load_plan()
    out = [f"# {title}", "", f"**What PrefLab implements.** {what}", "", "## Benchmarks", ""]
    out += ["| benchmark | what it measures | result files |", "|---|---|---|"]
    for name in benches:
        if name in known:
            b = known[name]
            link = _rel(page, f"results/{name}.md")
            out.append(f"| [{name}]({link}) | {b.what or '—'} | {len(b.files) + len(b.details)} |")
    out += [
        "",
        "## Plan entries and their verdicts",
        "",
        "Each verdict word sums up the lines the benchmark's page quotes from the result files "
        "(an entry with several words has several environments or comparisons). An entry "
        "whose result files state no verdict says where it stands instead: void "
        "(`benchmarks/plan_voids.toml`), withdrawn or superseded (the plan's notes), in the "
        "queue with its runs done (`benchmarks/queue.toml`, the run logs), or neither run nor "
        "queued. A benchmark without a plan entry is exploratory: no verdict.",
        "",
        "| benchmark | plan entry | verdict |",
        "|---|---|---|",
    ]
    for name in benches:
        if name not in known:
            continue
        b = known[name]
        link = _rel(page, f"results/{name}.md")
        ids = [e["id"] for e in plan if e.get("bench") == name]
        if not ids:
            out.append(f"| [{name}]({link}) | — | exploratory (no plan entry) |")
        for i in ids:
            out.append(
                f"| [{name}]({link}) | [`{i}`]({link}#{i}) | {_verdict_word(i, b.files, ledger)} |"
            )
    out.append("")
    return "\n".join(out)


def index_page(benches: dict[str, Bench]) -> str:
    out = [
        "# Results",
        "",
        "Every page here is generated from `benchmarks/results/` and `benchmarks/plan.toml` "
        "when the site is built (`docs/gen_results.py`): tables, plots, plan entries and the "
        "verdicts the result files state. Only pre-registered entries carry verdicts; every "
        "other reading is exploratory ([the reporting protocol](../concepts/reporting.md)). "
        "Budgets are sized for a 2-core CPU machine; each plan entry's note says how they "
        "compare with the paper's.",
        "",
        "## By paper",
        "",
    ]
    out += [f"- [{t}](paper-{s}.md)" for s, t, _w, _b in PAPERS]
    out += [
        "",
        "## By benchmark",
        "",
        "| benchmark | what it measures | result files |",
        "|---|---|---|",
    ]
    for n, b in sorted(benches.items()):
        out.append(f"| [{n}]({n}.md) | {b.what or '—'} | {len(b.files) + len(b.details)} |")
    out.append("")
    return "\n".join(out)


def generate() -> dict[str, str | Path]:
    """Site path → page text (str) or a file to copy (Path)."""
    plan, voids = load_plan()
    ledger = Ledger.load()
    benches = group_files()
    pages: dict[str, str | Path] = {"results/index.md": index_page(benches)}
    for s, t, w, b in PAPERS:
        pages[f"results/paper-{s}.md"] = paper_page(s, t, w, b, benches, ledger)
    for b in benches.values():
        page, text = bench_page(b, plan, voids, ledger)
        pages[page] = text
        for f in b.files + b.details:
            fp = file_page(f)
            body = _fix_links(f.read_text(encoding="utf-8"), f, fp)
            back = _rel(fp, page)
            pages[fp] = _clean(body) + f"\n\n---\n\n[← {b.name}]({back})\n"
    for p in sorted(RESULTS.rglob("*")):
        if p.is_file() and p.suffix in (".jsonl", ".png", ".csv", ".json"):
            pages[raw_uri(p)] = p
    return pages


def nav() -> list[object]:
    """The Results section of the site's navigation."""
    benches = group_files()
    return [
        "results/index.md",
        {"Papers": [{t: f"results/paper-{s}.md"} for s, t, _w, _b in PAPERS]},
        {"Benchmarks": [{n: f"results/{n}.md"} for n in sorted(benches)]},
    ]
