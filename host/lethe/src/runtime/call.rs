//! The instance runner. Every component call of every trigger (an HTTP request, a cron tick, a
//! reconcile pass, the configuration check at start) goes through [`call`]: a fresh instance from
//! the component's pre-linked exports, the call itself, the component's time limit, the metrics,
//! and the failure classified ([`FailureKind`]) in one place.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use wasmtime::Store;

use super::{InstanceState, LoadedComponent, MemoryLimitExceeded};

/// How long past its time limit the host still waits for an instance. The epoch deadline traps
/// guest code on time; a host call (a slow Kubernetes request) is not interrupted by it, and this
/// bounds the wait for one.
const HOST_CALL_GRACE: Duration = Duration::from_millis(250);

/// A boxed future that may move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A component's typed, pre-linked exports (a bindings `…Pre`), which make a typed instance.
pub trait Instantiate: Send + Sync {
    /// The typed instance.
    type Instance: Send;

    /// A fresh instance in `store`.
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<InstanceState>,
    ) -> BoxFuture<'a, wasmtime::Result<Self::Instance>>;
}

/// Implements [`Instantiate`] for a bindings `…Pre` type (`$pre`), whose `instantiate_async`
/// makes `$instance`: every bindgen'd `…Pre` has the same shape, but no trait of wasmtime's
/// names it.
macro_rules! instantiate_through {
    ($pre:ty => $instance:ty) => {
        impl $crate::runtime::call::Instantiate for $pre {
            type Instance = $instance;

            fn instantiate<'a>(
                &'a self,
                store: &'a mut ::wasmtime::Store<$crate::runtime::InstanceState>,
            ) -> $crate::runtime::call::BoxFuture<'a, ::wasmtime::Result<Self::Instance>> {
                Box::pin(self.instantiate_async(store))
            }
        }
    };
}
pub(crate) use instantiate_through;

/// A component call that failed: how (for metrics and answers), and the error.
#[derive(Debug)]
pub struct CallFailed {
    /// How it failed.
    pub kind: FailureKind,
    /// The error, with its causes.
    pub error: wasmtime::Error,
}

impl CallFailed {
    /// `error`, classified.
    pub fn classified(error: wasmtime::Error) -> CallFailed {
        CallFailed {
            kind: FailureKind::of(&error),
            error,
        }
    }

    /// `error` of a call of `component`, classified, and counted in its metrics.
    pub fn counted(component: &LoadedComponent, error: wasmtime::Error) -> CallFailed {
        let failed = CallFailed::classified(error);
        component
            .env
            .metrics
            .component_failed(&component.id, failed.kind.label());
        failed
    }
}

impl std::fmt::Display for CallFailed {
    /// Why it failed, in words an operator can act on (see [`describe_failure`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe_failure(&self.error))
    }
}

/// Runs one call of `component` in a fresh instance made by `pre` in `store` (a store of the
/// component's, from [`LoadedComponent::new_store`]): instantiates it, counts the instance, runs
/// `call` on it, all within the component's time limit, and classifies a failure, which it
/// counts in the component's metrics too.
pub async fn call<P, T>(
    component: &LoadedComponent,
    pre: &P,
    store: &mut Store<InstanceState>,
    call: impl for<'s> FnOnce(
        P::Instance,
        &'s mut Store<InstanceState>,
    ) -> BoxFuture<'s, wasmtime::Result<T>>,
) -> Result<T, CallFailed>
where
    P: Instantiate,
{
    let run = async {
        let instance = pre.instantiate(store).await?;
        component.env.metrics.instantiated(&component.id);
        call(instance, store).await
    };
    within_time_limit(component.limits.timeout, run)
        .await
        .map_err(|error| CallFailed::counted(component, error))
}

/// Runs one instance's work (`run`: instantiate and call) within `limit`, the component's time
/// limit. Past the limit and [`HOST_CALL_GRACE`] it ends as [`wasmtime::Trap::Interrupt`], the
/// same error as the epoch deadline's, so both are classified alike.
async fn within_time_limit<T>(
    limit: Duration,
    run: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    match tokio::time::timeout(limit + HOST_CALL_GRACE, run).await {
        Ok(result) => result,
        Err(_) => Err(wasmtime::Error::new(wasmtime::Trap::Interrupt)),
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
        if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
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
        let oom = wasmtime::Error::new(MemoryLimitExceeded {
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
