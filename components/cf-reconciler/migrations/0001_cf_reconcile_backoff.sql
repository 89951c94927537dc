CREATE TABLE cf_reconcile_backoff (
    object_key TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_ms BIGINT NOT NULL,
    last_error TEXT NOT NULL,
    CONSTRAINT cf_reconcile_backoff_pk PRIMARY KEY (object_key)
);
