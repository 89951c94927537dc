-- Per-object backoff and parking move to the one table of every reconciler
-- (lethe_guest::backoff), shared with the other components of the database: created alike by
-- each, if not there yet.
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

INSERT INTO reconcile_backoff (reconciler, object_key, attempts, next_attempt_ms, parked_on, last_error)
    SELECT 'data-jobs', job_uid, attempts, next_attempt_at, parked_hash, last_error FROM data_job_sync_state;

DROP TABLE data_job_sync_state;
