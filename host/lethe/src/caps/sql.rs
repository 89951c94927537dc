//! `lethe:platform/sql`: parameterised SQL on SQLite or PostgreSQL, backed by `lethe-sql`, which
//! owns the dialect translation and the retry rules.

use wasmtime::component::Resource;

use super::CapsView;
use super::bindings::lethe::platform::sql::{
    Error, Host, HostTransaction, RowSet, Statement, Value,
};

/// The host side of a `transaction` resource.
pub type TransactionHandle = lethe_sql::Transaction;

impl CapsView<'_> {
    fn database(&self) -> Result<&lethe_sql::Database, Error> {
        self.env.database.as_ref().ok_or_else(|| {
            Error::Denied(format!(
                "component `{}` is not granted sql",
                self.env.component_id
            ))
        })
    }
}

impl Host for CapsView<'_> {
    async fn query(
        &mut self,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<RowSet, Error>> {
        let db = match self.database() {
            Ok(db) => db,
            Err(e) => return Ok(Err(e)),
        };
        Ok(db
            .query(&sql, &to_values(params))
            .await
            .map(from_row_set)
            .map_err(from_error))
    }

    async fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let db = match self.database() {
            Ok(db) => db,
            Err(e) => return Ok(Err(e)),
        };
        Ok(db
            .execute(&sql, &to_values(params))
            .await
            .map_err(from_error))
    }

    async fn batch(
        &mut self,
        statements: Vec<Statement>,
    ) -> wasmtime::Result<Result<Vec<u64>, Error>> {
        let db = match self.database() {
            Ok(db) => db,
            Err(e) => return Ok(Err(e)),
        };
        let statements: Vec<_> = statements
            .into_iter()
            .map(|s| lethe_sql::Statement {
                sql: s.sql,
                params: to_values(s.params),
            })
            .collect();
        Ok(db.batch(&statements).await.map_err(from_error))
    }
}

impl HostTransaction for CapsView<'_> {
    async fn begin(&mut self) -> wasmtime::Result<Result<Resource<TransactionHandle>, Error>> {
        let db = match self.database() {
            Ok(db) => db,
            Err(e) => return Ok(Err(e)),
        };
        match db.begin().await {
            Ok(tx) => Ok(Ok(self.table.push(tx)?)),
            Err(e) => Ok(Err(from_error(e))),
        }
    }

    async fn query(
        &mut self,
        tx: Resource<TransactionHandle>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<RowSet, Error>> {
        let tx = self.table.get_mut(&tx)?;
        Ok(tx
            .query(&sql, &to_values(params))
            .await
            .map(from_row_set)
            .map_err(from_error))
    }

    async fn execute(
        &mut self,
        tx: Resource<TransactionHandle>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let tx = self.table.get_mut(&tx)?;
        Ok(tx
            .execute(&sql, &to_values(params))
            .await
            .map_err(from_error))
    }

    async fn commit(
        &mut self,
        tx: Resource<TransactionHandle>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let tx = self.table.get_mut(&tx)?;
        Ok(tx.commit().await.map_err(from_error))
    }

    async fn rollback(
        &mut self,
        tx: Resource<TransactionHandle>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let tx = self.table.get_mut(&tx)?;
        Ok(tx.rollback().await.map_err(from_error))
    }

    async fn drop(&mut self, tx: Resource<TransactionHandle>) -> wasmtime::Result<()> {
        // Dropping an unfinished lethe_sql::Transaction rolls it back.
        self.table.delete(tx)?;
        Ok(())
    }
}

fn to_values(params: Vec<Value>) -> Vec<lethe_sql::Value> {
    params.into_iter().map(to_value).collect()
}

fn to_value(v: Value) -> lethe_sql::Value {
    match v {
        Value::Null => lethe_sql::Value::Null,
        Value::Boolean(b) => lethe_sql::Value::Boolean(b),
        Value::Integer(i) => lethe_sql::Value::Integer(i),
        Value::Real(f) => lethe_sql::Value::Real(f),
        Value::Text(t) => lethe_sql::Value::Text(t),
        Value::Blob(b) => lethe_sql::Value::Blob(b),
    }
}

fn from_value(v: lethe_sql::Value) -> Value {
    match v {
        lethe_sql::Value::Null => Value::Null,
        lethe_sql::Value::Boolean(b) => Value::Boolean(b),
        lethe_sql::Value::Integer(i) => Value::Integer(i),
        lethe_sql::Value::Real(f) => Value::Real(f),
        lethe_sql::Value::Text(t) => Value::Text(t),
        lethe_sql::Value::Blob(b) => Value::Blob(b),
    }
}

fn from_row_set(r: lethe_sql::RowSet) -> RowSet {
    RowSet {
        columns: r.columns,
        rows: r
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(from_value).collect())
            .collect(),
    }
}

fn from_error(e: lethe_sql::SqlError) -> Error {
    use lethe_sql::SqlError as E;
    match e {
        E::ConstraintViolation(m) => Error::ConstraintViolation(m),
        E::Conflict(m) => Error::Conflict(m),
        E::InvalidStatement(m) => Error::InvalidStatement(m),
        E::InvalidValue(m) => Error::InvalidValue(m),
        E::Unavailable(m) => Error::Unavailable(m),
        E::OutcomeUnknown(m) => Error::OutcomeUnknown(m),
        E::Denied(m) => Error::Denied(m),
        E::Other(m) => Error::Other(m),
    }
}
