//! The change feed of desired state: which jobs' desired deployments changed since a revision.
//! It is the SDK's [`lethe_guest::feed`] over `data_job_revision` and `data_job_change`, keyed by
//! job uid: every write of a desired deployment (set, patch, delete, and a job's delete) adds
//! [`record`]'s two statements to its own transaction, and [`prune`] keeps the change table as
//! large as the set of jobs rather than their history.

use lethe_guest::feed::{Feed, FeedTable};

use crate::{Sql, SqlError, Statement};

/// The name of the counter row.
const COUNTER: &str = "desired";

/// The feed's statements, over `data_job_revision` and `data_job_change`.
static TABLE: FeedTable = FeedTable {
    bump: "UPDATE data_job_revision SET value = value + 1 WHERE name = $1",
    stamp: "INSERT INTO data_job_change (job_uid, revision) \
            SELECT $1, value FROM data_job_revision WHERE name = $2 \
            ON CONFLICT (job_uid) DO UPDATE SET revision = excluded.revision",
    head: "SELECT value FROM data_job_revision WHERE name = $1",
    since: "SELECT job_uid, revision FROM data_job_change WHERE revision > $1 \
            ORDER BY revision LIMIT $2",
};

/// The statements that record, inside the transaction that writes it, that the desired state of
/// job `job_uid` changed.
pub fn record(job_uid: &str) -> [Statement; 2] {
    Feed::record(&TABLE, COUNTER, job_uid)
}

/// The feed as the reconciler follows it: its changes are job uids, its bookmarks revisions
/// (its kept key, `desired_revision`, is the one this feed has always had).
pub fn desired(sql: &dyn Sql) -> Feed<'_> {
    Feed::new(sql, &TABLE, COUNTER)
}

/// Forgets the changes up to revision `upto` of jobs that left nothing behind (no desired row,
/// no actual row, no backoff): a full pass that started at `upto` has seen them all, so the feed
/// stays as large as the set of jobs rather than their history.
pub fn prune(sql: &dyn Sql, upto: i64) -> Result<u64, SqlError> {
    sql.execute(
        "DELETE FROM data_job_change WHERE revision <= $1 \
         AND NOT EXISTS (SELECT 1 FROM desired_data_job_deployment \
           WHERE desired_data_job_deployment.job_uid = data_job_change.job_uid) \
         AND NOT EXISTS (SELECT 1 FROM actual_data_job_deployment \
           WHERE actual_data_job_deployment.job_uid = data_job_change.job_uid) \
         AND NOT EXISTS (SELECT 1 FROM reconcile_backoff \
           WHERE reconcile_backoff.reconciler = $2 \
           AND reconcile_backoff.object_key = data_job_change.job_uid)",
        &[upto.into(), crate::items::RECONCILER.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lethe_guest::fake::FakeSql;

    fn db() -> FakeSql {
        FakeSql::migrated(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data-jobs/migrations"
        ))
    }

    #[test]
    fn changes_come_once_per_job_in_revision_order_after_the_bookmark() {
        let sql = db();
        let feed = desired(&sql);
        let start = feed.head_revision().expect("head");
        for uid in ["a", "b", "a", "c"] {
            sql.batch(&record(uid)).expect("record");
        }
        let all = feed.changed_since(start, 10).expect("since");
        assert_eq!(all.keys, ["b", "a", "c"], "a's latest change is its third");
        assert_eq!(all.bookmark, start + 4);
        assert!(!all.more);
        assert_eq!(feed.head_revision().expect("head"), start + 4);
        let first = feed.changed_since(start, 2).expect("since");
        assert_eq!(
            (first.keys.as_slice(), first.more),
            (&["b".to_string(), "a".to_string()][..], true)
        );
        let rest = feed.changed_since(first.bookmark, 2).expect("since");
        assert_eq!(rest.keys, ["c"]);
        assert!(
            feed.changed_since(rest.bookmark, 2)
                .expect("since")
                .keys
                .is_empty()
        );
    }

    #[test]
    fn pruning_keeps_jobs_that_left_something_and_changes_after_the_mark() {
        let sql = db();
        sql.batch(&record("gone")).expect("record");
        sql.batch(&record("tombstone")).expect("record");
        sql.execute(
            "INSERT INTO actual_data_job_deployment (job_uid, team, job_name, job_version, image, \
             schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at) \
             VALUES ('tombstone', 't', 'j', 'v', 'i', 's', TRUE, '{}', 'h', 'n', 'u', '1', 0)",
            &[],
        )
        .expect("actual row");
        let mark = desired(&sql).head_revision().expect("head");
        sql.batch(&record("later")).expect("record");
        assert_eq!(prune(&sql, mark).expect("prune"), 1);
        assert_eq!(
            desired(&sql).changed_since(0, 10).expect("since").keys,
            ["tombstone", "later"]
        );
    }
}
