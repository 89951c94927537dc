//! Calling a component's `lethe:platform/reconciler` export directly: one pass, with its report
//! (for `lethe sync --once` and on-demand passes).

use std::sync::Arc;

use anyhow::Context as _;

use crate::runtime::{InstanceState, LoadedComponent};

/// Host-side bindings of the reconciler world; the capability imports reuse [`crate::caps`].
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "lethe:platform/reconciler-handler",
        exports: { default: async },
        with: {
            "lethe:platform/kube": crate::caps::bindings::lethe::platform::kube,
            "lethe:platform/sql": crate::caps::bindings::lethe::platform::sql,
            "lethe:platform/log": crate::caps::bindings::lethe::platform::log,
            "lethe:platform/config": crate::caps::bindings::lethe::platform::config,
        },
    });
}

pub use bindings::exports::lethe::platform::reconciler::{ItemFailure, Report};

/// A component that exports `lethe:platform/reconciler`.
pub struct Reconciler {
    component: Arc<LoadedComponent>,
    pre: bindings::ReconcilerHandlerPre<InstanceState>,
}

impl Reconciler {
    /// Prepares calls to `component`'s reconciler export.
    pub fn new(component: Arc<LoadedComponent>) -> anyhow::Result<Reconciler> {
        let pre = bindings::ReconcilerHandlerPre::new(component.pre.clone()).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "component `{}` does not export lethe:platform/reconciler",
                component.id
            ))
        })?;
        Ok(Reconciler { component, pre })
    }

    /// Runs one pass in a fresh instance, within the component's time limit.
    pub async fn run_once(&self) -> anyhow::Result<Report> {
        let mut store = self.component.new_store();
        let run = async {
            let instance = self.pre.instantiate_async(&mut store).await?;
            instance
                .lethe_platform_reconciler()
                .call_reconcile(&mut store)
                .await
        };
        let timeout = self.component.limits.timeout + std::time::Duration::from_millis(250);
        let result = tokio::time::timeout(timeout, run)
            .await
            .map_err(|_| {
                anyhow::anyhow!("component `{}` exceeded its time limit", self.component.id)
            })?
            .map_err(|e| {
                anyhow::anyhow!(
                    "component `{}` {}",
                    self.component.id,
                    super::describe_failure(&e)
                )
            })?;
        result
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("component `{}` could not run a pass", self.component.id))
    }
}
