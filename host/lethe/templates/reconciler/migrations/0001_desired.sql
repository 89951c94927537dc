-- The desired __KIND__s of __NAME__, one row per object it keeps in the cluster. A DELETE keeps
-- the row, marked with when it was asked for, until the object is gone and the job has been
-- COMPLETE for job_retention_seconds: the row is the job.
CREATE TABLE IF NOT EXISTS __SNAKE___desired (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    -- A fresh id per desired object, which its __KIND__ carries as the label lethe.dev/desired-uid:
    -- an object made for an earlier row of the same name is never taken for this one's.
    uid TEXT NOT NULL,
    -- The object's content: its top-level fields but apiVersion, kind, metadata and status (JSON).
    content TEXT NOT NULL,
    -- When its deletion was asked for (ms since the epoch); NULL while it is wanted.
    deleting_since BIGINT,
    CONSTRAINT __SNAKE___desired_pk PRIMARY KEY (namespace, name)
);

-- The change feed of desired state (lethe_guest::feed): every API write bumps the counter and
-- stamps the object's change row in the same transaction, so a pass visits what changed.
CREATE TABLE IF NOT EXISTS __SNAKE___revision (
    name TEXT NOT NULL,
    value BIGINT NOT NULL,
    CONSTRAINT __SNAKE___revision_pk PRIMARY KEY (name)
);

INSERT INTO __SNAKE___revision (name, value) VALUES ('desired', 0) ON CONFLICT (name) DO NOTHING;

CREATE TABLE IF NOT EXISTS __SNAKE___change (
    object_key TEXT NOT NULL,
    revision BIGINT NOT NULL,
    CONSTRAINT __SNAKE___change_pk PRIMARY KEY (object_key)
);

CREATE INDEX IF NOT EXISTS __SNAKE___change_revision_idx ON __SNAKE___change (revision);

-- What the reconciler keeps between passes (lethe_guest::kept): bookmarks, the last full pass.
CREATE TABLE IF NOT EXISTS __SNAKE___kept (
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    CONSTRAINT __SNAKE___kept_pk PRIMARY KEY (name)
);

-- Per-object backoff and parking (lethe_guest::backoff): every reconciler's table of that name, in
-- its own database (the component's label), so no other component sees or changes it.
CREATE TABLE IF NOT EXISTS reconcile_backoff (
    reconciler TEXT NOT NULL,
    object_key TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_ms BIGINT NOT NULL,
    parked_on TEXT,
    last_error TEXT NOT NULL,
    CONSTRAINT reconcile_backoff_pk PRIMARY KEY (reconciler, object_key)
);

CREATE INDEX IF NOT EXISTS reconcile_backoff_next_idx ON reconcile_backoff (reconciler, next_attempt_ms);
