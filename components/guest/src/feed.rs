//! A change feed of desired state in SQL, written once for every reconciler whose desired state
//! is rows: which objects' rows changed since a revision, so that a pass on the changes
//! ([`crate::follow`]) visits those and no others.
//!
//! Every write of desired state adds [`Feed::record`]'s two statements to its own transaction:
//! the feed's counter row is bumped and the object's row in the change table takes the new
//! value. The UPDATE locks the counter row until the commit, so revisions become visible in the
//! order they were given, on PostgreSQL as on SQLite: a reader that saw revision `r` has seen
//! every change up to `r`, and a bookmark is simply the last revision read. A delete leaves no
//! desired row but does leave its change row, so the reconciler hears of it.
//!
//! A writer that bypasses the feed (SQL by hand) records no change; the reconciler's full pass,
//! which runs at start and every resync interval, repairs what such a write left.
//!
//! The two tables belong to the component's migrations (SQL names cannot be parameters):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS team_revision (
//!     name TEXT NOT NULL, value BIGINT NOT NULL, CONSTRAINT team_revision_pk PRIMARY KEY (name));
//! INSERT INTO team_revision (name, value) VALUES ('desired', 0) ON CONFLICT (name) DO NOTHING;
//! CREATE TABLE IF NOT EXISTS team_change (
//!     object_key TEXT NOT NULL, revision BIGINT NOT NULL,
//!     CONSTRAINT team_change_pk PRIMARY KEY (object_key));
//! CREATE INDEX IF NOT EXISTS team_change_revision_idx ON team_change (revision);
//! ```

use crate::follow::{Heard, Source};
use crate::sql::{Sql, SqlError, Statement, Value};

/// The statements of one component's feed, over its counter table and its change table, in the
/// one dialect SQLite and PostgreSQL share. `$1` of `bump`, `head` and `$2` of `stamp` is the
/// counter row's name (the `counter` given to [`Feed::new`] and [`Feed::record`]).
#[derive(Debug)]
pub struct FeedTable {
    /// `UPDATE <counter> SET value = value + 1 WHERE name = $1`.
    pub bump: &'static str,
    /// `INSERT INTO <change> (<key>, revision) SELECT $1, value FROM <counter> WHERE name = $2
    /// ON CONFLICT (<key>) DO UPDATE SET revision = excluded.revision`.
    pub stamp: &'static str,
    /// `SELECT value FROM <counter> WHERE name = $1`.
    pub head: &'static str,
    /// `SELECT <key>, revision FROM <change> WHERE revision > $1 ORDER BY revision LIMIT $2`.
    pub since: &'static str,
}

/// Changes read from a feed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changed {
    /// The objects whose desired state changed, by key, oldest change first, each once.
    pub keys: Vec<String>,
    /// The revision to read from next time.
    pub bookmark: i64,
    /// More changes wait beyond the ones read.
    pub more: bool,
}

/// One feed: a [`FeedTable`] and the name of its counter row. As a [`Source`], its changes are
/// object keys and its bookmarks revisions.
pub struct Feed<'a> {
    sql: &'a dyn Sql,
    table: &'static FeedTable,
    counter: &'static str,
}

impl<'a> Feed<'a> {
    /// The feed of `table` whose counter row is named `counter` (`desired`).
    pub fn new(sql: &'a dyn Sql, table: &'static FeedTable, counter: &'static str) -> Self {
        Feed {
            sql,
            table,
            counter,
        }
    }

    /// The statements that record, inside the transaction that writes it, that the desired state
    /// of object `key` changed.
    pub fn record(table: &'static FeedTable, counter: &'static str, key: &str) -> [Statement; 2] {
        [
            (table.bump, vec![counter.into()]),
            (table.stamp, vec![key.into(), counter.into()]),
        ]
    }

    /// The revision of the latest change made so far: a reader that starts from it hears of
    /// every later one. Read before the state it stands for.
    pub fn head_revision(&self) -> Result<i64, SqlError> {
        let rows = self.sql.query(self.table.head, &[self.counter.into()])?;
        Ok(rows
            .first()
            .and_then(|r| r.first())
            .and_then(Value::int)
            .unwrap_or(0))
    }

    /// The objects changed after revision `since`, at most `max` of them.
    pub fn changed_since(&self, since: i64, max: u32) -> Result<Changed, SqlError> {
        let rows = self
            .sql
            .query(self.table.since, &[since.into(), i64::from(max).into()])?;
        let mut changed = Changed {
            bookmark: since,
            more: rows.len() >= usize::try_from(max).unwrap_or(usize::MAX),
            ..Changed::default()
        };
        for row in rows {
            if let [key, revision] = row.as_slice() {
                changed.keys.push(key.text().to_string());
                changed.bookmark = changed.bookmark.max(revision.int().unwrap_or(0));
            }
        }
        Ok(changed)
    }
}

impl Source for Feed<'_> {
    type Change = String;
    type Error = SqlError;

    fn key(&self) -> String {
        format!("{}_revision", self.counter)
    }

    fn head(&self) -> Result<String, SqlError> {
        self.head_revision().map(|revision| revision.to_string())
    }

    fn since(&self, bookmark: &str, max: u32) -> Result<Heard<String>, SqlError> {
        let revision = bookmark
            .parse()
            .map_err(|_| SqlError::Failed(format!("{bookmark:?} is not a revision")))?;
        let changed = self.changed_since(revision, max)?;
        Ok(Heard {
            changes: changed.keys,
            bookmark: changed.bookmark.to_string(),
            more: changed.more,
        })
    }
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests {
    use super::*;
    use crate::fake::FakeSql;

    static TABLE: FeedTable = FeedTable {
        bump: "UPDATE t_revision SET value = value + 1 WHERE name = $1",
        stamp: "INSERT INTO t_change (object_key, revision) \
                SELECT $1, value FROM t_revision WHERE name = $2 \
                ON CONFLICT (object_key) DO UPDATE SET revision = excluded.revision",
        head: "SELECT value FROM t_revision WHERE name = $1",
        since: "SELECT object_key, revision FROM t_change WHERE revision > $1 \
                ORDER BY revision LIMIT $2",
    };

    fn db() -> FakeSql {
        FakeSql::from_script(
            "CREATE TABLE t_revision (name TEXT PRIMARY KEY, value BIGINT NOT NULL); \
             INSERT INTO t_revision VALUES ('desired', 0); \
             CREATE TABLE t_change (object_key TEXT PRIMARY KEY, revision BIGINT NOT NULL);",
        )
    }

    #[test]
    fn changes_come_once_per_key_in_revision_order_after_the_bookmark() {
        let sql = db();
        let feed = Feed::new(&sql, &TABLE, "desired");
        let start = feed.head_revision().expect("head");
        for key in ["a", "b", "a", "c"] {
            sql.batch(&Feed::record(&TABLE, "desired", key))
                .expect("record");
        }
        let all = feed.changed_since(start, 10).expect("since");
        assert_eq!(all.keys, ["b", "a", "c"], "a's latest change is its third");
        assert_eq!((all.bookmark, all.more), (start + 4, false));
        assert_eq!(feed.head_revision().expect("head"), start + 4);
        let first = feed.changed_since(start, 2).expect("since");
        assert_eq!(
            (first.keys.as_slice(), first.more),
            (&["b".into(), "a".into()][..], true)
        );
        let rest = feed.since(&first.bookmark.to_string(), 2).expect("since");
        assert_eq!(rest.changes, ["c"]);
        let none = feed.since(&rest.bookmark, 2).expect("since");
        assert!(none.changes.is_empty() && !none.more);
        assert_eq!(
            none.bookmark, rest.bookmark,
            "nothing new: the bookmark stays"
        );
        assert!(feed.since("not a number", 2).is_err());
        assert_eq!(feed.head().expect("head"), (start + 4).to_string());
        // The kept name of its bookmark: a new name would cost every reconciler a full pass.
        assert_eq!(feed.key(), "desired_revision");
    }
}
