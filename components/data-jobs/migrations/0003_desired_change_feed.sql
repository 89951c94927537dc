-- The change feed of desired state (data_jobs_core::feed). Every API write of a desired deployment,
-- deletes included, bumps the one counter row and stamps the job's row in data_job_change with
-- the new value, in the same transaction. The counter row is locked from that UPDATE to the
-- commit, so revisions become visible in the order they were given: a reader that has seen
-- revision r has seen every change up to r. The reconciler reads only the rows past its bookmark.
CREATE TABLE IF NOT EXISTS data_job_revision (
    name TEXT NOT NULL,
    value BIGINT NOT NULL,
    CONSTRAINT data_job_revision_pk PRIMARY KEY (name)
);

INSERT INTO data_job_revision (name, value) VALUES ('desired', 0) ON CONFLICT (name) DO NOTHING;

-- One row per job whose desired state changed: its latest revision.
CREATE TABLE IF NOT EXISTS data_job_change (
    job_uid TEXT NOT NULL,
    revision BIGINT NOT NULL,
    CONSTRAINT data_job_change_pk PRIMARY KEY (job_uid)
);

CREATE INDEX IF NOT EXISTS data_job_change_revision_idx ON data_job_change (revision);

-- What the reconciler keeps between passes that follow the changes, by name (each name prefixed
-- with the host's lethe_instance_id): its bookmarks and the time of its last full pass.
CREATE TABLE IF NOT EXISTS data_job_sync_follow (
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    CONSTRAINT data_job_sync_follow_pk PRIMARY KEY (name)
);

-- Backoffs that are over are found without reading every item's state.
CREATE INDEX IF NOT EXISTS data_job_sync_state_next_idx ON data_job_sync_state (next_attempt_at);

-- A change to a CronJob that lost its job-uid label finds its job by the name the actual row
-- records.
CREATE INDEX IF NOT EXISTS actual_data_job_deployment_cronjob_name_idx
    ON actual_data_job_deployment (cronjob_name);
