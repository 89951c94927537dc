//! What `lethe:platform/sql` means, written once for both of its implementations: the host's
//! (`lethe-sql`, on SQLite and PostgreSQL) and the `spin-sqlite-adapter` component's (on Spin's
//! SQLite). A statement and its values must mean the same on either, so the data model and the
//! portable dialect live here, with no I/O:
//!
//! * [`Value`], [`RowSet`], [`Statement`]: the data model of the WIT interface;
//! * [`to_sqlite`], [`is_read_only`], [`reject_transaction_control`]: the dialect.

#![warn(missing_docs)]

mod dialect;
mod value;

pub use dialect::{TRANSACTION_CONTROL, is_read_only, reject_transaction_control, to_sqlite};
pub use value::{RowSet, Statement, Value};
