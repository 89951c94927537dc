-- The CronJob's metadata.generation when it was applied: it changes only with the spec, so status
-- updates (which change the resourceVersion) do not make the reconciler re-read the spec.
ALTER TABLE actual_data_job_deployment ADD COLUMN generation BIGINT;
