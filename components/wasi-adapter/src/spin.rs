//! The Spin edges of the `spin-adapter` build: `config` and the adapter's own settings from Spin
//! variables, and `sql` over Spin's SQLite (`spin:sqlite`, the database of the component's label)
//! through the logic of `spin-sqlite-adapter`. Type conversions only; every decision is in that crate.

use spin_sqlite_adapter::{
    Adapter as SqlAdapter, Connection, DATABASE_VARIABLE, DEFAULT_DATABASE, QueryResult, RowSet,
    SpinError, SpinValue, SqlError, Statement, Transaction, Value,
};

use crate::bindings::exports::lethe::platform::{config, sql as wit};
use crate::bindings::fermyon::spin::variables;
use crate::bindings::spin::sqlite::sqlite as spin;
use crate::edge::{Adapter, stderr};

/// Spin's connection to the component's database.
struct SpinConnection(spin::Connection);

impl Connection for SpinConnection {
    fn execute(&self, sql: &str, params: &[SpinValue]) -> Result<QueryResult, SpinError> {
        let params: Vec<spin::Value> = params.iter().map(to_spin).collect();
        match self.0.execute(sql, &params) {
            Ok(result) => Ok(QueryResult {
                columns: result.columns,
                rows: result
                    .rows
                    .into_iter()
                    .map(|row| row.values.into_iter().map(from_spin).collect())
                    .collect(),
            }),
            Err(e) => Err(spin_error(e)),
        }
    }
}

/// Opens the label the component's `sqlite_database` variable names, else `default`; Spin
/// refuses a label the component's `sqlite_databases` does not grant.
fn open() -> Result<SpinConnection, SpinError> {
    let label = variables::get(DATABASE_VARIABLE).unwrap_or_else(|_| DEFAULT_DATABASE.to_owned());
    spin::Connection::open(&label)
        .map(SpinConnection)
        .map_err(spin_error)
}

thread_local! {
    /// The instance's adapter: one connection, opened by the first SQL call and kept for the
    /// instance's life (a wasm instance is single-threaded, so thread-local is instance-wide).
    static ADAPTER: SqlAdapter<SpinConnection> = SqlAdapter::new(open);
}

/// Runs `f` on the instance's adapter. `try_with` only fails while thread-locals are being torn
/// down, which a component instance never does; it is used so that even that cannot panic.
fn with_adapter<T>(
    f: impl FnOnce(&SqlAdapter<SpinConnection>) -> Result<T, SqlError>,
) -> Result<T, wit::Error> {
    ADAPTER
        .try_with(f)
        .unwrap_or_else(|_| Err(SqlError::Other("the SQL adapter is shutting down".into())))
        .map_err(to_wit_error)
}

impl wit::Guest for Adapter {
    type Transaction = Tx;

    fn query(sql: String, params: Vec<wit::Value>) -> Result<wit::RowSet, wit::Error> {
        with_adapter(|a| a.query(&sql, &values(params))).map(to_wit_rows)
    }

    fn execute(sql: String, params: Vec<wit::Value>) -> Result<u64, wit::Error> {
        with_adapter(|a| a.execute(&sql, &values(params)))
    }

    fn batch(statements: Vec<wit::Statement>) -> Result<Vec<u64>, wit::Error> {
        let statements: Vec<Statement> = statements
            .into_iter()
            .map(|s| Statement {
                sql: s.sql,
                params: values(s.params),
            })
            .collect();
        with_adapter(|a| a.batch(&statements))
    }
}

/// The `transaction` resource. Dropping it drops the [`Transaction`], which rolls back.
pub(crate) struct Tx(Transaction<SpinConnection>);

impl wit::GuestTransaction for Tx {
    fn begin() -> Result<wit::Transaction, wit::Error> {
        with_adapter(|a| a.begin()).map(|t| wit::Transaction::new(Tx(t)))
    }

    fn query(&self, sql: String, params: Vec<wit::Value>) -> Result<wit::RowSet, wit::Error> {
        self.0
            .query(&sql, &values(params))
            .map(to_wit_rows)
            .map_err(to_wit_error)
    }

    fn execute(&self, sql: String, params: Vec<wit::Value>) -> Result<u64, wit::Error> {
        self.0.execute(&sql, &values(params)).map_err(to_wit_error)
    }

    fn commit(&self) -> Result<(), wit::Error> {
        self.0.commit().map_err(to_wit_error)
    }

    fn rollback(&self) -> Result<(), wit::Error> {
        self.0.rollback().map_err(to_wit_error)
    }
}

fn values(params: Vec<wit::Value>) -> Vec<Value> {
    params
        .into_iter()
        .map(|v| match v {
            wit::Value::Null => Value::Null,
            wit::Value::Boolean(b) => Value::Boolean(b),
            wit::Value::Integer(i) => Value::Integer(i),
            wit::Value::Real(f) => Value::Real(f),
            wit::Value::Text(t) => Value::Text(t),
            wit::Value::Blob(b) => Value::Blob(b),
        })
        .collect()
}

fn to_wit_value(v: Value) -> wit::Value {
    match v {
        Value::Null => wit::Value::Null,
        Value::Boolean(b) => wit::Value::Boolean(b),
        Value::Integer(i) => wit::Value::Integer(i),
        Value::Real(f) => wit::Value::Real(f),
        Value::Text(t) => wit::Value::Text(t),
        Value::Blob(b) => wit::Value::Blob(b),
    }
}

fn to_wit_rows(r: RowSet) -> wit::RowSet {
    wit::RowSet {
        columns: r.columns,
        rows: r
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(to_wit_value).collect())
            .collect(),
    }
}

fn to_wit_error(e: SqlError) -> wit::Error {
    match e {
        SqlError::ConstraintViolation(m) => wit::Error::ConstraintViolation(m),
        SqlError::Conflict(m) => wit::Error::Conflict(m),
        SqlError::InvalidStatement(m) => wit::Error::InvalidStatement(m),
        SqlError::InvalidValue(m) => wit::Error::InvalidValue(m),
        SqlError::Unavailable(m) => wit::Error::Unavailable(m),
        SqlError::OutcomeUnknown(m) => wit::Error::OutcomeUnknown(m),
        SqlError::Denied(m) => wit::Error::Denied(m),
        SqlError::Other(m) => wit::Error::Other(m),
    }
}

fn to_spin(v: &SpinValue) -> spin::Value {
    match v {
        SpinValue::Integer(i) => spin::Value::Integer(*i),
        SpinValue::Real(f) => spin::Value::Real(*f),
        SpinValue::Text(t) => spin::Value::Text(t.clone()),
        SpinValue::Blob(b) => spin::Value::Blob(b.clone()),
        SpinValue::Null => spin::Value::Null,
    }
}

fn from_spin(v: spin::Value) -> SpinValue {
    match v {
        spin::Value::Integer(i) => SpinValue::Integer(i),
        spin::Value::Real(f) => SpinValue::Real(f),
        spin::Value::Text(t) => SpinValue::Text(t),
        spin::Value::Blob(b) => SpinValue::Blob(b),
        spin::Value::Null => SpinValue::Null,
    }
}

fn spin_error(e: spin::Error) -> SpinError {
    match e {
        spin::Error::NoSuchDatabase => SpinError::NoSuchDatabase,
        spin::Error::AccessDenied => SpinError::AccessDenied,
        spin::Error::InvalidConnection => SpinError::InvalidConnection,
        spin::Error::DatabaseFull => SpinError::DatabaseFull,
        spin::Error::Io(m) => SpinError::Io(m),
    }
}

/// The Spin variable that holds the adapter setting `name`: `kube_url` for `LETHE_KUBE_URL`,
/// `kube_token` for `LETHE_KUBE_TOKEN`. Spin's own variable providers (`SPIN_VARIABLE_KUBE_URL`,
/// Vault, …) then override them, as they do every variable.
pub fn setting(name: &str) -> Option<String> {
    let key = match name {
        crate::kube::url::URL_ENV => "kube_url",
        crate::kube::TOKEN_ENV => "kube_token",
        _ => return None,
    };
    variables::get(key).ok()
}

/// `config.get(key)`: the component's Spin variable `key`. A provider's failure is reported on
/// stderr and read as `undefined`, so the component falls back as it does for a missing key.
pub fn config(key: &str) -> Result<String, config::Error> {
    if !crate::config::is_valid_key(key) {
        return Err(config::Error::InvalidName(key.to_owned()));
    }
    match variables::get(key) {
        Ok(value) => Ok(value),
        Err(variables::Error::InvalidName(_)) => Err(config::Error::InvalidName(key.to_owned())),
        Err(variables::Error::Undefined(_)) => Err(config::Error::Undefined(key.to_owned())),
        Err(variables::Error::Provider(m) | variables::Error::Other(m)) => {
            stderr(&format!(
                "[warn] the Spin variable `{key}` could not be read: {m}\n"
            ));
            Err(config::Error::Undefined(key.to_owned()))
        }
    }
}
