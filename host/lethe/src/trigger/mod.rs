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

/// How a component invocation failed, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No instance was free (the pool was exhausted); the component did not run.
    Busy,
    /// It exceeded its time limit.
    Timeout,
    /// It trapped (a panic or abort among others).
    Trap,
    /// It exceeded its memory limit.
    OutOfMemory,
    /// Anything else (instantiation, a host call, a broken answer).
    Error,
}

impl FailureKind {
    /// Classifies `error`.
    pub fn of(error: &wasmtime::Error) -> FailureKind {
        if error
            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some()
        {
            return FailureKind::Busy;
        }
        if error
            .downcast_ref::<crate::runtime::MemoryLimitExceeded>()
            .is_some()
        {
            return FailureKind::OutOfMemory;
        }
        match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => FailureKind::Timeout,
            Some(_) => FailureKind::Trap,
            None => FailureKind::Error,
        }
    }

    /// The `reason` label of the failure metric.
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Busy => "busy",
            FailureKind::Timeout => "timeout",
            FailureKind::Trap => "trap",
            FailureKind::OutOfMemory => "out_of_memory",
            FailureKind::Error => "error",
        }
    }
}

/// Why a component invocation failed, in words an operator can act on.
pub fn describe_failure(error: &wasmtime::Error) -> String {
    match (
        FailureKind::of(error),
        error.downcast_ref::<wasmtime::Trap>(),
    ) {
        (FailureKind::Busy, _) => "was not run: no instance was free".to_string(),
        (FailureKind::Timeout, _) => "exceeded its time limit".to_string(),
        (FailureKind::Trap, Some(wasmtime::Trap::UnreachableCodeReached)) => {
            "trapped (unreachable code: the component panicked or aborted)".to_string()
        }
        (FailureKind::Trap, trap) => format!(
            "trapped: {}",
            trap.map(|t| t.to_string()).unwrap_or_default()
        ),
        (FailureKind::OutOfMemory, _) => format!("exceeded its memory limit: {error:#}"),
        (FailureKind::Error, _) => format!("failed: {error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classified_for_metrics_and_described_for_logs() {
        let timeout = wasmtime::Error::new(wasmtime::Trap::Interrupt);
        assert_eq!(FailureKind::of(&timeout).label(), "timeout");
        assert_eq!(describe_failure(&timeout), "exceeded its time limit");
        let trap = wasmtime::Error::new(wasmtime::Trap::UnreachableCodeReached);
        assert_eq!(FailureKind::of(&trap), FailureKind::Trap);
        assert!(describe_failure(&trap).contains("panicked"));
        let oom = wasmtime::Error::new(crate::runtime::MemoryLimitExceeded {
            desired: 2 << 20,
            limit: 1 << 20,
        })
        .context("error while executing at wasm backtrace");
        assert_eq!(FailureKind::of(&oom).label(), "out_of_memory");
        let other = wasmtime::format_err!("no");
        assert_eq!(FailureKind::of(&other), FailureKind::Error);
        assert_eq!(describe_failure(&other), "failed: no");
    }
}
