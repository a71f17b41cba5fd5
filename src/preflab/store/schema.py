"""Tables of the feedback store (SQLAlchemy Core). A change to an existing table needs an Alembic
migration (src/preflab/store/migrations/versions) and a SCHEMA_VERSION bump; new tables are
created on open."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

SCHEMA_VERSION = 4
APP_NAME = "preflab"

metadata = MetaData()

info = Table(
    "preflab_info",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

annotators = Table(
    "annotators",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("source", String(16), nullable=False),
    Column("name", String(256), nullable=False, default=""),
    Column("token_hash", String(128), nullable=True),
    Column("meta", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_annotators_token", "token_hash"),
)

counters = Table(
    "counters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)
"""Sequence counters ('segments', 'queries', 'judgements', 'ratings'): a writer takes its seqs
by one atomic UPDATE ... RETURNING, whose row lock it holds until it commits, so seqs are handed
out in commit order and a reader reading ``seq > cursor`` never skips a later commit."""

SEQ_TABLES = ("segments", "queries", "judgements", "ratings")

segments = Table(
    "segments",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("env_id", String(128), nullable=False),
    Column("episode", Integer, nullable=False),
    Column("start", Integer, nullable=False),
    Column("round", Integer, nullable=False),
    Column("length", Integer, nullable=False),
    Column("obs_dim", Integer, nullable=False),
    Column("act_dim", Integer, nullable=False),
    Column("true_return", Float, nullable=False),
    Column("seq", Integer, nullable=False),
    Index("ux_segments_seq", "seq", unique=True),
)

queries = Table(
    "queries",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("a", JSON, nullable=False),
    Column("b", JSON, nullable=False),
    Column("round", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("meta", JSON, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("pair_key", String(64), nullable=True),
    Index("ux_queries_seq", "seq", unique=True),
    Index("ix_queries_pair_key", "pair_key", "round", "seq"),
)
"""``pair_key`` (schema 4): what makes two queries the same question, their two sides in either
order (:func:`preflab.store.queries.stored_pair_key`), written by the store with every query
(never by a caller; not exported: an import writes it again), so that a person's queue leaves
out the pairs they answered and asks each pair once in SQL. Null only for a row written by hand
outside the store."""

judgements = Table(
    "judgements",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("query_id", String(64), ForeignKey("queries.id"), nullable=False),
    Column("annotator_id", String(128), nullable=False),
    Column("source", String(16), nullable=False),
    Column("p", Float, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("response_time_s", Float, nullable=True),
    Column("meta", JSON, nullable=False),
    Index("ix_judgements_query", "query_id"),
)

# created on open when missing (an index is not a schema change; stores from before keep working)
judgements_by_annotator = Index(
    "ix_judgements_annotator", judgements.c.annotator_id, judgements.c.query_id
)
queries_by_round = Index("ix_queries_round_seq", queries.c.round.desc(), queries.c.seq)
ADDED_INDEXES = (judgements_by_annotator, queries_by_round)

ratings = Table(
    "ratings",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("annotator_id", String(128), nullable=False),
    Column("stream_id", String(128), nullable=False),
    Column("step", Integer, nullable=False),
    Column("t", Float, nullable=False),
    Column("value", Float, nullable=False),
    UniqueConstraint("annotator_id", "stream_id", "t", name="uq_rating_time"),
    Index("ix_ratings_stream", "stream_id", "annotator_id"),
)

llm_cache = Table(
    "llm_cache",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("model", String(256), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("response", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

# ----- studio (rounds published by the trainer, reader cursors, undone judgements) -----------
rounds = Table(
    "rounds",
    metadata,
    Column("round", Integer, primary_key=True, autoincrement=False),
    Column("published_at", Float, nullable=False),
    Column("env_id", String(128), nullable=False),
    Column("env_steps", BigInteger, nullable=False),  # step counts reach MAX_STEPS = 2**53
    Column("total_steps", BigInteger, nullable=False),  # (BigInteger since schema 4)
    Column("status", String(16), nullable=False),
    Column("metrics", JSON, nullable=False),
)

cursors = Table(
    "cursors",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

retractions = Table(
    "retractions",
    metadata,
    Column("judgement_id", String(64), primary_key=True),
    Column("annotator_id", String(128), nullable=False),
    Column("created_at", Float, nullable=False),
)

# ----- groupwise studio: each round's pool of behaviours (what the exploration view shows) -----
round_pools = Table(
    "round_pools",
    metadata,
    Column("round", Integer, primary_key=True, autoincrement=False),
    Column("published_at", Float, nullable=False),
    Column("segment_ids", JSON, nullable=False),
    Column("member_returns", JSON, nullable=True),
    Column("meta", JSON, nullable=False),
)

# ----- run settings the owner and the trainer share (finish now, task instructions, …) ---------
settings = Table(
    "settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# ----- queries the trainer withdrew (unanswered when a newer round was published) --------------
withdrawals = Table(
    "withdrawals",
    metadata,
    Column("query_id", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
)

# ----- person queues: when each annotator was shown a query and when they skipped it -----------
queue_states = Table(
    "queue_states",
    metadata,
    Column("annotator_id", String(128), primary_key=True),
    Column("query_id", String(64), primary_key=True),
    Column("served_at", Float, nullable=True),
    Column("skipped_at", Float, nullable=True),
    Column("skips", Integer, nullable=False),
    Column("reserved_at", Float, nullable=True),
)
"""One row per (annotator, query) the studio served or the annotator skipped: ``served_at`` is
the first time the query was put on their screen (answers sooner than the studio's minimum after
it are refused), ``skipped_at`` the last skip (a skipped query goes to the end of its round in
their queue), ``reserved_at`` the last time a study showed it to them (their hold on one of the
pair's ``overlap`` places, renewed on every showing, cleared by a skip; schema 3). "Can't tell"
needs no row: it is a judgement with p = None, which retires the pair for that person."""


def not_retracted() -> ColumnElement[bool]:
    """The condition "this judgement was not retracted" (the one place SQL reads undo)."""
    return judgements.c.id.not_in(select(retractions.c.judgement_id))


# ----- studies with real people (issue #61): the study link, who joined by it, gold pairs ------
studies = Table(
    "studies",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("link_hash", String(128), nullable=False, unique=True),
    Column("config", JSON, nullable=False),
    Column("closed_at", Float, nullable=True),
    Column("created_at", Float, nullable=False),
)
"""One row per study: the SHA-256 of its link's secret (the link itself is never stored), its
settings (``preflab.studio.study_config.StudyConfig`` as JSON) and when enrolment closed."""

participants = Table(
    "participants",
    metadata,
    Column("annotator_id", String(128), primary_key=True),
    Column("study_id", String(64), nullable=False),
    Column("key_hash", String(128), nullable=False),
    Column("platform_pid", String(128), nullable=True),
    Column("platform", JSON, nullable=False),
    Column("enrolled_at", Float, nullable=False),
    Column("consent_at", Float, nullable=True),
    Column("consent_sha256", String(64), nullable=True),
    Column("declined_at", Float, nullable=True),
    Column("practice", JSON, nullable=False),
    Column("practice_done_at", Float, nullable=True),
    Column("completed_at", Float, nullable=True),
    Column("excluded_at", Float, nullable=True),
    Column("excluded_reason", Text, nullable=True),
    UniqueConstraint("study_id", "platform_pid", name="uq_participant_pid"),
    Index("ix_participants_key", "key_hash"),
)
"""A person who joined a study by its link: a pseudonymous annotator (named by its id; no e-mail), the
platform's ids from the link (Prolific's PROLIFIC_PID, STUDY_ID, SESSION_ID or a generic pid),
the SHA-256 of their study key (the cookie), when they consented or declined (and the SHA-256
of the consent text they saw), their practice answers (which never count), when they finished
and whether the owner excluded them."""

gold_answers = Table(
    "gold_answers",
    metadata,
    Column("query_id", String(64), ForeignKey("queries.id"), primary_key=True),
    Column("p", Float, nullable=False),
    Column("source", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
)
"""Attention checks: pair queries whose answer is known (``p`` = P(a ≻ b) of the synthetic
oracle, source 'oracle', or the owner's own answer, source 'owner')."""

gold_considered = Table(
    "gold_considered",
    metadata,
    Column("query_id", String(64), ForeignKey("queries.id"), primary_key=True),
    Column("gap", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""Pair queries already considered as oracle attention checks, with their return gap |a − b|
under the env's own reward: each is decided once (by whichever studio worker saw it first), and
the gaps of all pairs considered so far are the reference a new pair's gap is cut against."""
