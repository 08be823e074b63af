"""The team database's schema: seed 004's memory tables on PostgreSQL + pgvector, what
lexmem adds to them, and the capture journal, as numbered forward-only steps.

Everything lives in the PostgreSQL schema ``lexmem`` (seed 004's module schema), so a
database shared with other applications keeps lexmem's tables apart. pgvector's
``vector`` type and operators stay where the extension was created (``public`` by
default); the steps name lexmem's tables with their schema and leave ``search_path`` as
it is.

A step is SQL with two placeholders, filled as literals when it runs
(:mod:`lexmem.store.postgres.migrations`): ``{dim}``, the vector dimension of the
embedding model the database is created for, and ``{space}``, that model's vector space
id (:attr:`lexmem.embedder.Embedder.space_id`), both recorded in ``lexmem.meta``.
Adding to the schema is appending a step; a step that shipped is never edited, since
databases out there are already past it.

Steps 4 and 5 are team sync's (:mod:`lexmem.store.postgres.team`): versions, revisions,
tombstones, kept losing versions, change notices, teams and row-level security. Their
columns all have defaults, so a write that names none of them works as before, and the
tables' owner is not bound by the policies (they are enabled, not forced: see step 5).

Where lexmem departs from the seed's SQL, and why:

- Ids, projects and documents are ``text``, not ``UUID``: lexmem's ids are UUIDs in
  practice, but an imported export keeps the ids it carries, and a project is the
  repository's path.
- Scores are ``double precision``, not ``REAL``: lexmem computes in float64 and a value
  must read back as it was written.
- ``superseded_by`` is set to NULL when its replacement is deleted (lexmem's forget
  clears the pointers of the memories a deleted one replaced) and is checked at commit,
  so a batch may name a replacement that comes later in it.
- The vector index is HNSW, not ivfflat: ivfflat's lists come from the rows present when
  it is built, so built on an empty table (a new team) it serves poorly until rebuilt;
  HNSW is built row by row and needs no rebuild.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = [
    "MEMORY_COLUMNS",
    "REVISION_LOCK_KEY",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STEPS",
    "TABLES",
    "TEAM_TABLES",
    "Step",
]

SCHEMA = "lexmem"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the schema: ``sql`` takes a database at ``version - 1`` to ``version``."""

    version: int
    name: str
    sql: str


_MEMORIES = """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE SCHEMA lexmem;

-- One row per step applied (the runner writes each step's row in the step's transaction).
CREATE TABLE lexmem.schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    lexmem_version text NOT NULL
);

-- What the database was made for: the embedding model's vector space and dimension.
CREATE TABLE lexmem.meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO lexmem.meta (key, value) VALUES
    ('embedding_space', {space}),
    ('embedding_dim', {dim}::text);

CREATE TABLE lexmem.memories (
    id text PRIMARY KEY,
    memory_type text NOT NULL
        CHECK (memory_type IN ('semantic', 'episodic', 'procedural')),
    title text,
    content text NOT NULL,
    embedding vector({dim}) NOT NULL,

    -- Temporal metadata
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz,
    last_accessed_at timestamptz NOT NULL DEFAULT now(),
    access_count bigint NOT NULL DEFAULT 0,
    last_reinforced_at timestamptz,

    -- Salience
    current_salience double precision NOT NULL DEFAULT 0.5,
    importance_score double precision NOT NULL DEFAULT 0.5,
    pinned boolean NOT NULL DEFAULT false,

    -- Provenance
    source text NOT NULL DEFAULT 'explicit',
    session_id text,
    source_conversation_id text,
    learning_context text,
    source_document_id text,
    chunk_index integer,
    total_chunks integer,
    word_offset integer,
    char_offset integer,
    source_hash text,
    fingerprint text,
    capture_mode text,
    confidence double precision NOT NULL DEFAULT 1.0,
    classification_method text NOT NULL DEFAULT 'explicit',
    word_count integer NOT NULL DEFAULT 0,
    metadata jsonb,
    -- The content of the memories before and after it in its conversation session.
    context text,

    -- Status
    status text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'archived', 'superseded')),
    superseded_by text REFERENCES lexmem.memories (id)
        ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED,

    -- Scoping
    project_id text,
    user_id text NOT NULL
);

CREATE TABLE lexmem.memory_confidence_history (
    id text PRIMARY KEY,
    memory_id text NOT NULL,
    confidence double precision NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fk_confidence_memory FOREIGN KEY (memory_id)
        REFERENCES lexmem.memories (id) ON DELETE CASCADE
);

CREATE TABLE lexmem.memory_links (
    id text PRIMARY KEY,
    from_memory_id text NOT NULL,
    to_memory_id text NOT NULL,
    link_type text NOT NULL CHECK (link_type <> ''),
    strength double precision NOT NULL DEFAULT 0.5,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fk_link_from FOREIGN KEY (from_memory_id)
        REFERENCES lexmem.memories (id) ON DELETE CASCADE,
    CONSTRAINT fk_link_to FOREIGN KEY (to_memory_id)
        REFERENCES lexmem.memories (id) ON DELETE CASCADE,
    CONSTRAINT uq_memory_link UNIQUE (from_memory_id, to_memory_id, link_type),
    CONSTRAINT ck_link_not_to_itself CHECK (from_memory_id <> to_memory_id)
);

-- Seed 004's indexes
CREATE INDEX ix_memories_temporal ON lexmem.memories (created_at, last_accessed_at);
CREATE INDEX ix_memories_salience ON lexmem.memories (current_salience DESC)
    WHERE status = 'active';
CREATE INDEX ix_memories_type_user ON lexmem.memories (memory_type, user_id);
CREATE INDEX ix_memories_user_project ON lexmem.memories (user_id, project_id)
    WHERE status = 'active';
CREATE INDEX ix_confidence_memory
    ON lexmem.memory_confidence_history (memory_id, recorded_at);
CREATE INDEX ix_links_from ON lexmem.memory_links (from_memory_id);
CREATE INDEX ix_links_to ON lexmem.memory_links (to_memory_id);

-- lexmem's look-ups: a project's memories (any status), the memories a replacement
-- replaced, a session's memories (context), capture's exact-repeat check.
CREATE INDEX ix_memories_project ON lexmem.memories (project_id);
CREATE INDEX ix_memories_superseded_by ON lexmem.memories (superseded_by)
    WHERE superseded_by IS NOT NULL;
CREATE INDEX ix_memories_session ON lexmem.memories (session_id)
    WHERE session_id IS NOT NULL;
CREATE INDEX ix_memories_fingerprint ON lexmem.memories (fingerprint, created_at)
    WHERE status = 'active';
"""

# One tsvector for both of the keyword leg's fields, told apart by weight: the memory's
# own words (A) and its session neighbours' (D), so ts_rank's weights give the context
# field its lower boost and ts_filter can keep the content alone. English stemming, as
# the local store's query terms are stemmed.
_SEARCH = """
ALTER TABLE lexmem.memories ADD COLUMN search_text tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, content), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(context, '')), 'D')
) STORED;

CREATE INDEX ix_memories_search_text ON lexmem.memories USING gin (search_text);

CREATE INDEX memories_embedding_idx ON lexmem.memories
    USING hnsw (embedding vector_cosine_ops);
"""

# The capture journal (lexmem.store.journal's tables, under the same names).
_JOURNAL = """
CREATE TABLE lexmem.processed (
    event_id text PRIMARY KEY,
    session_id text,
    processed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE lexmem.buffer (
    event_id text PRIMARY KEY,
    session_id text NOT NULL,
    seq text NOT NULL,
    event text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_buffer_session ON lexmem.buffer (session_id, seq);

CREATE TABLE lexmem.sessions (
    id text PRIMARY KEY,
    agent text NOT NULL,
    project text,
    started_at timestamptz NOT NULL,
    last_event_at timestamptz NOT NULL,
    ended_at timestamptz,
    status text NOT NULL DEFAULT 'active',
    memory_count bigint NOT NULL DEFAULT 0,
    event_count bigint NOT NULL DEFAULT 0
);
CREATE INDEX ix_sessions_recent ON lexmem.sessions (last_event_at DESC);

CREATE TABLE lexmem.audit (
    id text PRIMARY KEY,
    "timestamp" timestamptz NOT NULL,
    session_id text,
    candidate_id text NOT NULL,
    decision text NOT NULL,
    reason text NOT NULL,
    confidence double precision NOT NULL,
    rule text NOT NULL,
    kind text NOT NULL DEFAULT '',
    memory_id text,
    title text NOT NULL DEFAULT '',
    project text,
    text text,
    metadata jsonb
);
CREATE INDEX ix_audit_newest ON lexmem.audit ("timestamp" DESC, id DESC);
CREATE INDEX ix_audit_memory ON lexmem.audit (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX ix_audit_session ON lexmem.audit (session_id) WHERE session_id IS NOT NULL;

CREATE TABLE lexmem.file_hashes (
    path text PRIMARY KEY,
    sha256 text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- Review's decisions; a rejection's fingerprint and embedding keep the same candidate
-- from being captured again. The embedding has no fixed dimension: it is compared in
-- whatever space it was recorded in, as the local store's is.
CREATE TABLE lexmem.reviews (
    memory_id text PRIMARY KEY,
    decision text NOT NULL CHECK (decision IN ('accepted', 'rejected')),
    fingerprint text,
    project text,
    reviewed_at timestamptz NOT NULL DEFAULT now(),
    embedding vector,
    particulars text
);
"""

# The lock every transaction that writes a memory or a tombstone takes (the trigger
# takes it at its first such write, a push at its start) and holds to its commit, so
# that revisions are handed out in commit order: a reader that sees revision r sees
# every revision below it that will ever commit, and a pull's cursor skips nothing.
REVISION_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"lexmem: team database revisions").digest()[:8], "big", signed=True
)

# Team sync (lexmem.store.postgres.team): each memory's version (the pushing client's
# count of its changes), its revision (the server's change counter: a sequence, set by a
# trigger on every insert and update, so a pull asks for what changed after a number),
# its owner (the role that first wrote it, for privacy and opt-out), who wrote the
# version held and the digest of the push that wrote it (a repeated push is recognised
# by it). A forgotten memory leaves a tombstone (its id, project, owner, version and
# revision: no text); a version that lost a conflict is kept whole in memory_history.
# Every change notifies lexmem_changes on commit.
_SYNC = """
CREATE SEQUENCE lexmem.change_revision AS bigint;

ALTER TABLE lexmem.memories
    ADD COLUMN version bigint NOT NULL DEFAULT 1 CONSTRAINT ck_memories_version
        CHECK (version >= 1),
    ADD COLUMN revision bigint NOT NULL DEFAULT nextval('lexmem.change_revision'),
    ADD COLUMN owner text NOT NULL DEFAULT current_user,
    ADD COLUMN written_by text NOT NULL DEFAULT current_user,
    ADD COLUMN change_digest text NOT NULL DEFAULT '';
CREATE INDEX ix_memories_revision ON lexmem.memories (revision);

CREATE TABLE lexmem.tombstones (
    memory_id text PRIMARY KEY,
    project_id text,
    owner text NOT NULL DEFAULT current_user,
    version bigint NOT NULL CONSTRAINT ck_tombstones_version CHECK (version >= 1),
    revision bigint NOT NULL DEFAULT nextval('lexmem.change_revision'),
    deleted_by text NOT NULL DEFAULT current_user,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_tombstones_revision ON lexmem.tombstones (revision);
CREATE INDEX ix_tombstones_project ON lexmem.tombstones (project_id);

CREATE TABLE lexmem.memory_history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id text NOT NULL,
    version bigint NOT NULL,
    project_id text,
    owner text NOT NULL,
    written_by text NOT NULL,
    change_digest text NOT NULL DEFAULT '',
    memory jsonb NOT NULL,
    kept_at timestamptz NOT NULL DEFAULT now(),
    -- A losing push repeated is kept once.
    CONSTRAINT uq_memory_history UNIQUE (memory_id, version, change_digest)
);
CREATE INDEX ix_memory_history_project ON lexmem.memory_history (project_id);

CREATE FUNCTION lexmem.stamp_memory() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(@REVISION_LOCK_KEY@);
    NEW.revision := nextval('lexmem.change_revision');
    NEW.written_by := current_user;
    IF TG_OP = 'INSERT' THEN
        NEW.owner := current_user;
    ELSE
        -- The author stays the owner whoever edits it; a write that is not a push
        -- (it leaves the digest as it was) no longer matches the push's digest.
        NEW.owner := OLD.owner;
        IF NEW.change_digest = OLD.change_digest THEN
            NEW.change_digest := '';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_stamp BEFORE INSERT OR UPDATE ON lexmem.memories
    FOR EACH ROW EXECUTE FUNCTION lexmem.stamp_memory();

CREATE FUNCTION lexmem.stamp_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(@REVISION_LOCK_KEY@);
    NEW.revision := nextval('lexmem.change_revision');
    NEW.deleted_by := current_user;
    NEW.deleted_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER tombstones_stamp BEFORE INSERT OR UPDATE ON lexmem.tombstones
    FOR EACH ROW EXECUTE FUNCTION lexmem.stamp_tombstone();

-- Delivered on commit, one per transaction (PostgreSQL folds equal notifications).
CREATE FUNCTION lexmem.notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lexmem_changes', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_notify AFTER INSERT OR UPDATE ON lexmem.memories
    FOR EACH ROW EXECUTE FUNCTION lexmem.notify_change();
CREATE TRIGGER tombstones_notify AFTER INSERT OR UPDATE ON lexmem.tombstones
    FOR EACH ROW EXECUTE FUNCTION lexmem.notify_change();
""".replace("@REVISION_LOCK_KEY@", str(REVISION_LOCK_KEY))

# Teams and row-level security. A team is a name; its projects are team project names
# (never a local path); its members are database roles. A member sees and writes a
# memory (and its links, confidence, tombstone and losing versions) when its project is
# shared with a team of theirs, or when they own it and its project is shared with no
# team (a private memory; no project is private too). RLS is enabled, not forced: the
# members are never the tables' owner, so every policy binds them, while the owner (the
# role that ran the migrations: the single-user backend, the administrator adding
# members) reads and writes every row as before. Forcing it would bind no one else, and
# a superuser bypasses it regardless.
#
# A member reads the team tables only for their own teams (policies there too);
# my_projects() is an ordinary function, so those policies apply inside it, and is
# called as (SELECT ...) so a query evaluates it once. project_is_shared() must see
# every team's projects to refuse a "private" write into another team's project: it
# runs as the owner and says only yes or no, and only members may call it.
_TEAMS = """
CREATE TABLE lexmem.teams (
    name text PRIMARY KEY CONSTRAINT ck_teams_name CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE lexmem.team_projects (
    team text NOT NULL CONSTRAINT fk_team_projects_team
        REFERENCES lexmem.teams (name) ON DELETE CASCADE,
    project text NOT NULL CONSTRAINT ck_team_projects_project CHECK (project <> ''),
    shared_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team, project)
);
CREATE INDEX ix_team_projects_project ON lexmem.team_projects (project);

CREATE TABLE lexmem.team_members (
    team text NOT NULL CONSTRAINT fk_team_members_team
        REFERENCES lexmem.teams (name) ON DELETE CASCADE,
    member text NOT NULL,
    joined_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team, member)
);
CREATE INDEX ix_team_members_member ON lexmem.team_members (member);

ALTER TABLE lexmem.team_members ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_memberships ON lexmem.team_members FOR SELECT
    USING (member = current_user);
ALTER TABLE lexmem.team_projects ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_teams_projects ON lexmem.team_projects FOR SELECT
    USING (team IN (SELECT m.team FROM lexmem.team_members m WHERE m.member = current_user));
ALTER TABLE lexmem.teams ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_teams ON lexmem.teams FOR SELECT
    USING (name IN (SELECT m.team FROM lexmem.team_members m WHERE m.member = current_user));

CREATE FUNCTION lexmem.my_projects() RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT p.project), ARRAY[]::text[])
    FROM lexmem.team_projects p JOIN lexmem.team_members m ON m.team = p.team
    WHERE m.member = current_user
$$;

CREATE FUNCTION lexmem.project_is_shared(project text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM lexmem.team_projects p WHERE p.project = $1)
$$;
REVOKE EXECUTE ON FUNCTION lexmem.project_is_shared(text) FROM PUBLIC;

ALTER TABLE lexmem.memories ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_or_own ON lexmem.memories
    USING (owner = current_user OR project_id = ANY ((SELECT lexmem.my_projects())::text[]))
    WITH CHECK (project_id = ANY ((SELECT lexmem.my_projects())::text[])
        OR (owner = current_user AND NOT lexmem.project_is_shared(project_id)));

ALTER TABLE lexmem.tombstones ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_or_own ON lexmem.tombstones
    USING (owner = current_user OR project_id = ANY ((SELECT lexmem.my_projects())::text[]))
    WITH CHECK (project_id = ANY ((SELECT lexmem.my_projects())::text[])
        OR (owner = current_user AND NOT lexmem.project_is_shared(project_id)));

ALTER TABLE lexmem.memory_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_or_own ON lexmem.memory_history
    USING (owner = current_user OR project_id = ANY ((SELECT lexmem.my_projects())::text[]))
    WITH CHECK (project_id = ANY ((SELECT lexmem.my_projects())::text[])
        OR (owner = current_user AND NOT lexmem.project_is_shared(project_id)));

-- A link shows when both its memories do (a link from a team memory to a private one
-- would tell the team the private one's id); confidence with its memory.
ALTER TABLE lexmem.memory_links ENABLE ROW LEVEL SECURITY;
CREATE POLICY between_visible_memories ON lexmem.memory_links
    USING (EXISTS (SELECT 1 FROM lexmem.memories m WHERE m.id = from_memory_id)
        AND EXISTS (SELECT 1 FROM lexmem.memories m WHERE m.id = to_memory_id));

ALTER TABLE lexmem.memory_confidence_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY of_visible_memories ON lexmem.memory_confidence_history
    USING (EXISTS (SELECT 1 FROM lexmem.memories m WHERE m.id = memory_id));
"""

STEPS: tuple[Step, ...] = (
    Step(1, "the lexmem schema; memories, links and confidence history (seed 004)", _MEMORIES),
    Step(2, "full-text column and the text and vector indexes", _SEARCH),
    Step(3, "the capture journal", _JOURNAL),
    Step(4, "team sync: versions, revisions, tombstones, losing versions, notices", _SYNC),
    Step(5, "teams, their projects and members; row-level security", _TEAMS),
)

# The newest schema this lexmem knows.
SCHEMA_VERSION = STEPS[-1].version

# The protocol's table names (MemoryBackend.list_tables, arrow_table) and the tables
# that hold them.
TABLES = {
    "memories": "memories",
    "links": "memory_links",
    "confidence": "memory_confidence_history",
    "processed": "processed",
    "buffer": "buffer",
    "sessions": "sessions",
    "audit": "audit",
    "file_hashes": "file_hashes",
    "reviews": "reviews",
}

# A memory row's fields (lexmem.store.schema.memory_to_row, plus the derived context)
# and the memories table's columns that hold them, where seed 004 named them otherwise.
MEMORY_COLUMNS = {
    "id": "id",
    "type": "memory_type",
    "title": "title",
    "content": "content",
    "vector": "embedding",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "last_accessed_at": "last_accessed_at",
    "access_count": "access_count",
    "last_reinforced_at": "last_reinforced_at",
    "salience": "current_salience",
    "importance": "importance_score",
    "pinned": "pinned",
    "status": "status",
    "superseded_by": "superseded_by",
    "source": "source",
    "session_id": "session_id",
    "conversation_id": "source_conversation_id",
    "project": "project_id",
    "user_id": "user_id",
    "learning_context": "learning_context",
    "source_document": "source_document_id",
    "chunk_index": "chunk_index",
    "total_chunks": "total_chunks",
    "word_offset": "word_offset",
    "char_offset": "char_offset",
    "source_hash": "source_hash",
    "fingerprint": "fingerprint",
    "capture_mode": "capture_mode",
    "confidence": "confidence",
    "classification_method": "classification_method",
    "word_count": "word_count",
    "metadata": "metadata",
    "context": "context",
}

# The tables of team sync (lexmem.store.postgres.team), apart from the protocol's.
TEAM_TABLES = ("tombstones", "memory_history", "teams", "team_projects", "team_members")
