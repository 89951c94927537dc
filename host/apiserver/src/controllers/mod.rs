//! The background controllers, each a driver over the store: namespace deletion, CRD cleanup,
//! the garbage collector for ownerReferences (Background, Foreground and Orphan propagation),
//! namespace defaults and the token controller.
//!
//! A controller is a [`Controller`]: one `step` reads the store once and acts on what it finds.
//! [`run`] steps them all after every write, until nothing changes; a test or a simulator can
//! instead step any one of them, in any order it picks, since none keeps state between steps.

mod controller;
mod crd_cleanup;
mod garbage_collector;
mod namespace;
mod namespace_defaults;
mod shared;
mod tokens;

pub use controller::{ClusterInfo, Controller};
pub use crd_cleanup::CrdCleanup;
pub use garbage_collector::GarbageCollector;
pub use namespace::NamespaceDeletion;
pub use namespace_defaults::{NamespaceDefaults, create_default_account};
pub(crate) use shared::create_own;
pub use tokens::TokenController;

use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Every controller, in the order [`pass`] steps them.
pub fn all(info: &ClusterInfo) -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(NamespaceDefaults),
        Box::new(TokenController { info: info.clone() }),
        Box::new(NamespaceDeletion),
        Box::new(CrdCleanup),
        Box::new(GarbageCollector),
    ]
}

/// Steps each controller once. Returns true when any changed something.
pub fn pass(store: &Store, controllers: &[Box<dyn Controller>]) -> bool {
    let mut changed = false;
    for c in controllers {
        if c.step(store) {
            tracing::trace!(controller = c.name(), "changed the store");
            changed = true;
        }
    }
    changed
}

/// Runs the controllers until the task is aborted: after every write (and every half second),
/// passes until a pass changes nothing, at most 20 in a row.
pub async fn run(store: Arc<Store>, info: ClusterInfo) {
    let controllers = all(&info);
    loop {
        tokio::select! {
            _ = store.notify.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        // Let a burst of writes settle before scanning.
        tokio::time::sleep(Duration::from_millis(10)).await;
        for _ in 0..20 {
            if !pass(&store, &controllers) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests;
