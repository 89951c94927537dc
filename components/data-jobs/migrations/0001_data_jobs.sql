-- Data jobs (VDK style). The API writes data_job and desired_data_job_deployment; the reconciler
-- alone writes actual_data_job_deployment, which has NO foreign key to data_job: deleting a job
-- leaves its actual row as the tombstone the next pass acts on.

CREATE TABLE data_job (
    uid TEXT NOT NULL,
    team TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT data_job_pk PRIMARY KEY (uid),
    CONSTRAINT data_job_team_name_uq UNIQUE (team, name)
);

CREATE TABLE desired_data_job_deployment (
    job_uid TEXT NOT NULL,
    team TEXT NOT NULL,
    job_name TEXT NOT NULL,
    job_version TEXT NOT NULL,
    image TEXT NOT NULL,
    schedule TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    resources TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT desired_data_job_deployment_pk PRIMARY KEY (job_uid),
    CONSTRAINT desired_data_job_deployment_job_fk FOREIGN KEY (job_uid) REFERENCES data_job (uid)
);

CREATE TABLE actual_data_job_deployment (
    job_uid TEXT NOT NULL,
    team TEXT NOT NULL,
    job_name TEXT NOT NULL,
    job_version TEXT NOT NULL,
    image TEXT NOT NULL,
    schedule TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    resources TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    cronjob_name TEXT NOT NULL,
    cronjob_uid TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    applied_at BIGINT NOT NULL,
    CONSTRAINT actual_data_job_deployment_pk PRIMARY KEY (job_uid)
);

-- One row per deletion request, so GET /v3/jobs/{guid} can tell PROCESSING from FAILED.
CREATE TABLE data_job_deletion (
    guid TEXT NOT NULL,
    operation TEXT NOT NULL,
    job_uid TEXT NOT NULL,
    team TEXT NOT NULL,
    job_name TEXT NOT NULL,
    requested_at BIGINT NOT NULL,
    completed_at BIGINT,
    CONSTRAINT data_job_deletion_pk PRIMARY KEY (guid)
);

CREATE INDEX data_job_deletion_job_uid_idx ON data_job_deletion (job_uid);

-- Per-item backoff and parking of the reconciler, keyed by the data job's uid.
CREATE TABLE data_job_sync_state (
    job_uid TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    parked_hash TEXT,
    last_error TEXT NOT NULL,
    CONSTRAINT data_job_sync_state_pk PRIMARY KEY (job_uid)
);

-- The last reports of reconciler passes, as JSON.
CREATE TABLE data_job_sync_report (
    id TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    holder TEXT NOT NULL,
    report TEXT NOT NULL,
    CONSTRAINT data_job_sync_report_pk PRIMARY KEY (id)
);
