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

impl CapsView<'_> {
    /// Counts `n` statements by the outcome of their call and passes the result on.
    fn statements<T>(&self, n: usize, result: lethe_sql::Result<T>) -> Result<T, Error> {
        self.count(&self.env.metrics.sql_statements, outcome(&result), n);
        if let Err(lethe_sql::SqlError::Denied(why)) = &result {
            // The database's own refusal of what lies beyond the component's label: an operator
            // should learn which plugin tried.
            tracing::warn!(
                "component `{}`: its database refused a statement reaching beyond its own: {why}",
                self.env.component_id
            );
        }
        result.map_err(from_error)
    }

    /// Counts a transaction that ended with `outcome`.
    fn transaction_ended(&self, outcome: &'static str) {
        self.count(&self.env.metrics.sql_transactions, outcome, 1);
    }

    fn count(
        &self,
        family: &prometheus_client::metrics::family::Family<
            crate::metrics::SqlLabels,
            prometheus_client::metrics::counter::Counter,
        >,
        outcome: &'static str,
        n: usize,
    ) {
        family
            .get_or_create(&crate::metrics::SqlLabels {
                component: self.env.component_id.to_string(),
                outcome,
            })
            .inc_by(n as u64);
    }
}

/// The `outcome` label of a SQL call: `ok`, or the error's variant.
fn outcome<T>(result: &lethe_sql::Result<T>) -> &'static str {
    use lethe_sql::SqlError as E;
    match result {
        Ok(_) => "ok",
        Err(E::ConstraintViolation(_)) => "constraint_violation",
        Err(E::Conflict(_)) => "conflict",
        Err(E::InvalidStatement(_)) => "invalid_statement",
        Err(E::InvalidValue(_)) => "invalid_value",
        Err(E::Unavailable(_)) => "unavailable",
        Err(E::OutcomeUnknown(_)) => "outcome_unknown",
        Err(E::Denied(_)) => "denied",
        Err(E::Other(_)) => "other",
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
        let result = db.query(&sql, &to_values(params)).await;
        Ok(self.statements(1, result).map(from_row_set))
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
        let result = db.execute(&sql, &to_values(params)).await;
        Ok(self.statements(1, result))
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
        let result = db.batch(&statements).await;
        Ok(self.statements(statements.len(), result))
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
        let result = tx.query(&sql, &to_values(params)).await;
        Ok(self.statements(1, result).map(from_row_set))
    }

    async fn execute(
        &mut self,
        tx: Resource<TransactionHandle>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let tx = self.table.get_mut(&tx)?;
        let result = tx.execute(&sql, &to_values(params)).await;
        Ok(self.statements(1, result))
    }

    async fn commit(
        &mut self,
        tx: Resource<TransactionHandle>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let tx = self.table.get_mut(&tx)?;
        let result = tx.commit().await;
        self.transaction_ended(outcome(&result));
        Ok(result.map_err(from_error))
    }

    async fn rollback(
        &mut self,
        tx: Resource<TransactionHandle>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let tx = self.table.get_mut(&tx)?;
        let result = tx.rollback().await;
        self.transaction_ended("rolled_back");
        Ok(result.map_err(from_error))
    }

    async fn drop(&mut self, tx: Resource<TransactionHandle>) -> wasmtime::Result<()> {
        // Dropping an unfinished lethe_sql::Transaction rolls it back.
        if !self.table.delete(tx)?.is_finished() {
            self.transaction_ended("abandoned");
        }
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
