//! Named values a component keeps between its short-lived instances: bookmarks, the time of the
//! last full pass. They live in a two-column SQL table of the component's own migrations
//! (`name` primary key, `value` text), one set per `lethe_instance_id`, since a bookmark is one
//! host's (another host's watches do not know it): reconcilers on several hosts each follow the
//! changes, rather than undoing each other's bookmarks into a full pass every time.

use crate::sql::{Sql, SqlError, Statement, Value};

/// The statements of one component's table of kept values (SQL names cannot be parameters, so
/// each component spells out its own, in the one dialect SQLite and PostgreSQL share).
pub struct KeptTable {
    /// `SELECT value FROM <table> WHERE name = $1`.
    pub select: &'static str,
    /// `INSERT INTO <table> (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET
    /// value = excluded.value`.
    pub upsert: &'static str,
    /// `DELETE FROM <table> WHERE name = $1`.
    pub delete: &'static str,
}

/// One instance's values in a [`KeptTable`].
pub struct Kept<'a> {
    sql: &'a dyn Sql,
    table: &'static KeptTable,
    instance: String,
}

impl<'a> Kept<'a> {
    /// The values `instance` keeps in `table`.
    pub fn new(sql: &'a dyn Sql, table: &'static KeptTable, instance: &str) -> Self {
        Kept {
            sql,
            table,
            instance: instance.to_string(),
        }
    }

    /// The row name of `name` for this instance.
    fn row(&self, name: &str) -> String {
        format!("{}:{name}", self.instance)
    }

    /// The value kept as `name`, if any.
    pub fn value(&self, name: &str) -> Result<Option<String>, SqlError> {
        let rows = self
            .sql
            .query(self.table.select, &[self.row(name).into()])?;
        Ok(rows
            .first()
            .and_then(|r| r.first())
            .and_then(Value::opt_text)
            .map(str::to_string))
    }

    /// The number kept as `name`, if any (a value that is not a number counts as none).
    pub fn number(&self, name: &str) -> Result<Option<i64>, SqlError> {
        Ok(self.value(name)?.and_then(|v| v.parse().ok()))
    }

    /// Sets `values` and forgets `forgotten`, in one transaction.
    pub fn write<N: AsRef<str>>(
        &self,
        values: &[(N, String)],
        forgotten: &[&str],
    ) -> Result<(), SqlError> {
        let mut statements: Vec<Statement> = values
            .iter()
            .map(|(name, value)| {
                (
                    self.table.upsert,
                    vec![self.row(name.as_ref()).into(), value.as_str().into()],
                )
            })
            .collect();
        statements.extend(
            forgotten
                .iter()
                .map(|name| (self.table.delete, vec![self.row(name).into()])),
        );
        self.sql.batch(&statements).map(|_| ())
    }
}

#[cfg(test)]
#[cfg(feature = "fake")]
pub(crate) mod tests {
    use super::*;
    use crate::fake::FakeSql;

    /// A table of kept values, as a component's migrations would make it.
    pub(crate) static TABLE: KeptTable = KeptTable {
        select: "SELECT value FROM kept WHERE name = $1",
        upsert: "INSERT INTO kept (name, value) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        delete: "DELETE FROM kept WHERE name = $1",
    };

    /// A database holding [`TABLE`]'s table, migrated in a directory of its own (`name`).
    pub(crate) fn database(name: &str) -> FakeSql {
        let dir = std::env::temp_dir().join(format!("lethe-kept-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(
            dir.join("0001.sql"),
            "CREATE TABLE kept (name TEXT PRIMARY KEY, value TEXT NOT NULL);",
        )
        .expect("migration");
        let sql = FakeSql::migrated(&dir);
        let _ = std::fs::remove_dir_all(dir);
        sql
    }

    #[test]
    fn each_instance_keeps_its_own_values() {
        let sql = database("kept");
        let (one, two) = (
            Kept::new(&sql, &TABLE, "one"),
            Kept::new(&sql, &TABLE, "two"),
        );
        one.write(
            &[("bookmark", "b1".to_string()), ("at", "12".to_string())],
            &[],
        )
        .expect("write");
        assert_eq!(one.value("bookmark").expect("read"), Some("b1".into()));
        assert_eq!(one.number("at").expect("read"), Some(12));
        assert_eq!(one.number("bookmark").expect("read"), None, "not a number");
        assert_eq!(two.value("bookmark").expect("read"), None, "another host's");
        one.write(&[("bookmark", "b2".to_string())], &["at"])
            .expect("write");
        assert_eq!(one.value("bookmark").expect("read"), Some("b2".into()));
        assert_eq!(one.value("at").expect("read"), None, "forgotten");
    }
}
