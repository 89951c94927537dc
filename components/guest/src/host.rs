//! The host's capabilities (`lethe:platform` imports) behind the [`Kube`] and [`Env`] traits.
//! Component crates map their own `wit_bindgen::generate!` imports onto [`bindings`] with `with`.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::Value as Json;

use crate::env::{Env, Level};
use crate::kube::{
    DeleteOptions, DeleteOutcome, Identity, Kube, KubeError, ListOptions, Object, ObjectList,
    ObjectRef, PatchKind, Propagation, object_from_json,
};

/// Guest bindings of the capability interfaces.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/host-capabilities",
        generate_all,
    });
}

use bindings::lethe::platform::{config, kube as wit, log};

/// The host, as seen from a component. Kubernetes clients are opened lazily, once per identity.
#[derive(Default)]
pub struct Host {
    clients: RefCell<HashMap<Identity, std::rc::Rc<wit::Client>>>,
}

impl Host {
    fn client(&self, id: &Identity) -> Result<std::rc::Rc<wit::Client>, KubeError> {
        if let Some(c) = self.clients.borrow().get(id) {
            return Ok(c.clone());
        }
        let identity = match id {
            Identity::Caller(token) => wit::Identity::Caller(token.clone()),
            Identity::Privileged => wit::Identity::Privileged,
        };
        let client = std::rc::Rc::new(wit::Client::open(&identity).map_err(from_error)?);
        self.clients.borrow_mut().insert(id.clone(), client.clone());
        Ok(client)
    }
}

fn to_ref(r: &ObjectRef) -> wit::ObjectRef {
    wit::ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn from_object(o: wit::Object) -> Result<Object, KubeError> {
    let json: Json = serde_json::from_str(&o.json).map_err(|e| {
        KubeError::Unavailable(format!("the API server returned invalid JSON: {e}"))
    })?;
    Ok(object_from_json(json))
}

fn from_error(e: wit::Error) -> KubeError {
    match e {
        wit::Error::NotFound(s) => KubeError::NotFound(s.message),
        wit::Error::Conflict(s) => KubeError::Conflict(s.message),
        wit::Error::Forbidden(s) => KubeError::Forbidden(s.message),
        wit::Error::Unauthorized(s) => KubeError::Unauthorized(s.message),
        wit::Error::Invalid(s) => KubeError::Invalid(s.message),
        wit::Error::Gone(s) => KubeError::Gone(s.message),
        wit::Error::Unavailable(m) => KubeError::Unavailable(m),
        wit::Error::Timeout(m) => KubeError::Timeout(m),
    }
}

impl Kube for Host {
    fn authenticate(&self, id: &Identity) -> Result<(), KubeError> {
        self.client(id)?.authenticate().map_err(from_error)
    }

    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object, KubeError> {
        from_object(self.client(id)?.get(&to_ref(target)).map_err(from_error)?)
    }

    fn list(
        &self,
        id: &Identity,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let options = wit::ListOptions {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            limit: options.limit,
            continue_token: options.continue_token.clone(),
        };
        let page = self
            .client(id)?
            .list(api_version, kind, namespace, &options)
            .map_err(from_error)?;
        Ok(ObjectList {
            items: page
                .items
                .into_iter()
                .map(from_object)
                .collect::<Result<_, _>>()?,
            continue_token: page.continue_token,
        })
    }

    fn create(&self, id: &Identity, object: &Json) -> Result<Object, KubeError> {
        from_object(
            self.client(id)?
                .create(&object.to_string())
                .map_err(from_error)?,
        )
    }

    fn patch(
        &self,
        id: &Identity,
        target: &ObjectRef,
        kind: PatchKind,
        patch: &Json,
    ) -> Result<Object, KubeError> {
        let kind = match kind {
            PatchKind::Merge => wit::PatchKind::Merge,
            PatchKind::Json => wit::PatchKind::Json,
        };
        let patched = self
            .client(id)?
            .patch(&to_ref(target), kind, &patch.to_string(), None)
            .map_err(from_error)?;
        from_object(patched)
    }

    fn delete(
        &self,
        id: &Identity,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let options = wit::DeleteOptions {
            propagation_policy: options.propagation.map(|p| match p {
                Propagation::Background => wit::PropagationPolicy::Background,
                Propagation::Foreground => wit::PropagationPolicy::Foreground,
                Propagation::Orphan => wit::PropagationPolicy::Orphan,
            }),
            precondition_uid: options.precondition_uid.clone(),
            precondition_resource_version: None,
        };
        match self
            .client(id)?
            .delete(&to_ref(target), &options)
            .map_err(from_error)?
        {
            wit::DeleteOutcome::Deleted => Ok(DeleteOutcome::Deleted),
            wit::DeleteOutcome::Pending(o) => Ok(DeleteOutcome::Pending(Box::new(from_object(o)?))),
        }
    }
}

impl Env for Host {
    fn now_ms(&self) -> i64 {
        let now = wasip2::clocks::wall_clock::now();
        i64::try_from(now.seconds).unwrap_or(i64::MAX / 1000) * 1000
            + i64::from(now.nanoseconds / 1_000_000)
    }

    fn sleep_ms(&self, ms: u64) {
        wasip2::clocks::monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
    }

    fn config(&self, key: &str) -> Option<String> {
        config::get(key).ok()
    }

    fn log(&self, level: Level, message: &str) {
        let level = match level {
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        };
        log::write(level, message);
    }

    fn random_bytes(&self, n: usize) -> Vec<u8> {
        wasip2::random::random::get_random_bytes(n as u64)
    }
}
