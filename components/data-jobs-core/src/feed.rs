//! The change feed of desired state: which jobs' desired deployments changed since a revision.
//!
//! Every write of a desired deployment (set, patch, delete, and a job's delete) adds
//! [`record`]'s two statements to its own transaction: the counter row `data_job_revision`
//! is bumped and the job's row in `data_job_change` takes the new value. The UPDATE locks the
//! counter row until the commit, so revisions become visible in the order they were given, on
//! PostgreSQL as on SQLite: a reader that saw revision `r` has seen every change up to `r`, and a
//! bookmark is simply the last revision read. Deletes leave no desired row, but they do leave
//! their change row, so the reconciler hears of them.
//!
//! A writer that bypasses the API (SQL by hand) records no change; the reconciler's full pass,
//! which runs at start and every `full_resync_seconds`, repairs what such a write left.

use lethe_guest::follow::{Heard, Source};

use crate::{Sql, SqlError, Statement, Value};

/// The name of the counter row.
const COUNTER: &str = "desired";

/// The statements that record, inside the transaction that writes it, that the desired state of
/// job `job_uid` changed.
pub fn record(job_uid: &str) -> [Statement; 2] {
    [
        (
            "UPDATE data_job_revision SET value = value + 1 WHERE name = $1",
            vec![COUNTER.into()],
        ),
        (
            "INSERT INTO data_job_change (job_uid, revision) \
             SELECT $1, value FROM data_job_revision WHERE name = $2 \
             ON CONFLICT (job_uid) DO UPDATE SET revision = excluded.revision",
            vec![job_uid.into(), COUNTER.into()],
        ),
    ]
}

/// The revision of the latest change made so far: a reader that starts from it hears of every
/// later one. Read before the state it stands for.
pub fn head(sql: &dyn Sql) -> Result<i64, SqlError> {
    let rows = sql.query(
        "SELECT value FROM data_job_revision WHERE name = $1",
        &[COUNTER.into()],
    )?;
    Ok(rows
        .first()
        .and_then(|r| r.first())
        .and_then(Value::int)
        .unwrap_or(0))
}

/// Changes read from the feed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changed {
    /// The jobs whose desired state changed, oldest change first, each once.
    pub job_uids: Vec<String>,
    /// The revision to read from next time.
    pub bookmark: i64,
    /// More changes wait beyond the ones read.
    pub more: bool,
}

/// The jobs changed after revision `since`, at most `max` of them.
pub fn since(sql: &dyn Sql, since: i64, max: u32) -> Result<Changed, SqlError> {
    let rows = sql.query(
        "SELECT job_uid, revision FROM data_job_change WHERE revision > $1 \
         ORDER BY revision LIMIT $2",
        &[since.into(), i64::from(max).into()],
    )?;
    let more = rows.len() >= usize::try_from(max).unwrap_or(usize::MAX);
    let mut changed = Changed {
        bookmark: since,
        more,
        ..Changed::default()
    };
    for row in rows {
        if let [uid, revision] = row.as_slice() {
            changed.job_uids.push(uid.text().to_string());
            changed.bookmark = changed.bookmark.max(revision.int().unwrap_or(0));
        }
    }
    Ok(changed)
}

/// The feed as the reconciler follows it: its changes are job uids, its bookmarks revisions.
pub struct Desired<'a>(pub &'a dyn Sql);

impl Source for Desired<'_> {
    type Change = String;
    type Error = SqlError;

    fn key(&self) -> String {
        "desired_revision".into()
    }

    fn head(&self) -> Result<String, SqlError> {
        head(self.0).map(|revision| revision.to_string())
    }

    fn since(&self, bookmark: &str, max: u32) -> Result<Heard<String>, SqlError> {
        let revision = bookmark
            .parse()
            .map_err(|_| SqlError::Failed(format!("{bookmark:?} is not a revision")))?;
        let changed = since(self.0, revision, max)?;
        Ok(Heard {
            changes: changed.job_uids,
            bookmark: changed.bookmark.to_string(),
            more: changed.more,
        })
    }
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
        let start = head(&sql).expect("head");
        for uid in ["a", "b", "a", "c"] {
            sql.batch(&record(uid)).expect("record");
        }
        let all = since(&sql, start, 10).expect("since");
        assert_eq!(
            all.job_uids,
            ["b", "a", "c"],
            "a's latest change is its third"
        );
        assert_eq!(all.bookmark, start + 4);
        assert!(!all.more);
        assert_eq!(head(&sql).expect("head"), start + 4);
        let first = since(&sql, start, 2).expect("since");
        assert_eq!(
            (first.job_uids.as_slice(), first.more),
            (&["b".to_string(), "a".to_string()][..], true)
        );
        let rest = since(&sql, first.bookmark, 2).expect("since");
        assert_eq!(rest.job_uids, ["c"]);
        assert!(
            since(&sql, rest.bookmark, 2)
                .expect("since")
                .job_uids
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
        let mark = head(&sql).expect("head");
        sql.batch(&record("later")).expect("record");
        assert_eq!(prune(&sql, mark).expect("prune"), 1);
        assert_eq!(
            since(&sql, 0, 10).expect("since").job_uids,
            ["tombstone", "later"]
        );
    }
}
