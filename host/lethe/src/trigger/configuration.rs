//! Calling a component's `lethe:platform/configuration` export before anything is served: a
//! component whose configuration is malformed stops the start, with the component's own words,
//! rather than failing every request or pass later.

use crate::runtime::call;
use crate::runtime::{InstanceState, LoadedComponent};

/// Host-side bindings of the configuration-check world; the `config` import reuses
/// [`crate::caps`].
mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "lethe:platform/configuration-check",
        exports: { default: async },
        with: {
            "lethe:platform/config": crate::caps::bindings::lethe::platform::config,
        },
    });
}

call::instantiate_through!(bindings::ConfigurationCheckPre<InstanceState> => bindings::ConfigurationCheck);

/// What checking one component came to.
#[derive(Debug)]
pub enum Checked {
    /// It exports no check: nothing to say.
    NoCheck,
    /// Its configuration reads as it needs.
    Accepted,
    /// Its configuration is malformed: its words, naming the variable.
    Refused(String),
}

/// Checks `component`'s configuration in a fresh instance, within its time limit. `Err` when the
/// check itself could not run (it trapped, or timed out).
pub async fn check(component: &LoadedComponent) -> anyhow::Result<Checked> {
    let Ok(pre) = bindings::ConfigurationCheckPre::new(component.pre.clone()) else {
        return Ok(Checked::NoCheck);
    };
    let mut store = component.new_store();
    let checked = call::call(component, &pre, &mut store, |instance, store| {
        Box::pin(async move {
            instance
                .lethe_platform_configuration()
                .call_check(store)
                .await
        })
    })
    .await;
    match checked {
        Ok(Ok(())) => Ok(Checked::Accepted),
        Ok(Err(refused)) => Ok(Checked::Refused(refused)),
        Err(failed) => anyhow::bail!(
            "component `{}`: its configuration check {failed}",
            component.id
        ),
    }
}
