-- What the reconciler keeps between passes that follow the changes (cf_core::follow): the
-- bookmark of each followed collection and the time of the last full pass, by name.
CREATE TABLE IF NOT EXISTS cf_reconcile_state (
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    CONSTRAINT cf_reconcile_state_pk PRIMARY KEY (name)
);

-- The deletions under way, so that every pass reports them all and looks at each again when
-- nothing was heard of it.
CREATE TABLE IF NOT EXISTS cf_reconcile_deletions (
    object_key TEXT NOT NULL,
    since TEXT NOT NULL,
    blocked_by TEXT,
    next_visit_ms BIGINT NOT NULL,
    CONSTRAINT cf_reconcile_deletions_pk PRIMARY KEY (object_key)
);
