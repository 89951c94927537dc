//! The host drives these types from async WIT host traits, which need `Send` futures.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use lethe_sql::{Database, Migration, Statement, Transaction};

fn is_send<T: Send>(_: &T) {}
fn is_send_sync<T: Send + Sync>() {}

#[tokio::test]
async fn handles_and_futures_are_send() {
    is_send_sync::<Database>();
    fn tx_is_send<T: Send>() {}
    tx_is_send::<Transaction>();

    let db = Database::open("sqlite::memory:").await.unwrap();
    is_send(&db.query("SELECT 1", &[]));
    is_send(&db.execute("SELECT 1", &[]));
    is_send(&db.batch(&[] as &[Statement]));
    is_send(&db.begin());
    is_send(&db.migrate(&[] as &[Migration]));
    let mut tx = db.begin().await.unwrap();
    is_send(&tx.query("SELECT 1", &[]));
    is_send(&tx.execute("SELECT 1", &[]));
    is_send(&tx.commit());
    is_send(&tx.rollback());
}
