//! The triggers: `[[trigger.http]]` served through `wasi:http/incoming-handler`, and
//! `[[trigger.cron]]` calling Spin's `handle-cron-event`.

pub mod configuration;
pub mod cron;
pub mod fairness;
pub mod http;
pub mod reconcile;

use std::sync::{Arc, PoisonError, RwLock};

/// What a route or a cron trigger serves now: replaced whole (`lethe up --watch`), read as an
/// `Arc`, so that work that took one keeps it until it is done.
pub struct Slot<T>(RwLock<Arc<T>>);

impl<T> Slot<T> {
    /// A slot holding `value`.
    pub fn new(value: T) -> Slot<T> {
        Slot(RwLock::new(Arc::new(value)))
    }

    /// What it holds now.
    pub fn get(&self) -> Arc<T> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Holds `value` from now on.
    pub fn set(&self, value: Arc<T>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = value;
    }
}
