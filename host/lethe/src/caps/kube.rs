//! `lethe:platform/kube`: dynamic Kubernetes objects under an explicit identity, backed by
//! `lethe-kube`, which owns discovery, the retry rules and the identity-specific clients.
//!
//! The grant check lives here: a client can be opened only with an identity the component's
//! manifest entry grants (SECURITY.md A7).

use wasmtime::component::Resource;

use super::CapsView;
use super::bindings::lethe::platform::kube::{
    Change, ChangeBatch, ChangeType, Collection, DeleteOptions, DeleteOutcome, Error, Host,
    HostClient, Identity, ListOptions, Metadata, Object, ObjectList, ObjectRef, PatchKind,
    PropagationPolicy, Status,
};
use crate::manifest::KubeIdentityGrant;

/// The host side of a `client` resource.
pub type ClientHandle = lethe_kube::KubeClient;

impl Host for CapsView<'_> {}

impl CapsView<'_> {
    /// Counts one call of `client` by its verb, kind and final answer, tells the component's
    /// [`crate::admin::denials::Denials`] of a privileged call the cluster refused (or allowed),
    /// and passes its result on.
    fn counted<T>(
        &self,
        client: &ClientHandle,
        verb: &'static str,
        kind: &str,
        result: lethe_kube::Result<T>,
    ) -> lethe_kube::Result<T> {
        if client.is_privileged() {
            let denials = &self.env.denials;
            match &result {
                Err(lethe_kube::KubeError::Forbidden(status)) => {
                    denials.refused(&self.env.component_id, verb, kind, &status.message);
                }
                Ok(_) => denials.allowed(&self.env.component_id, verb, kind),
                Err(_) => {}
            }
        }
        let code = match &result {
            Ok(_) => "2xx".to_string(),
            Err(e) => match e.status() {
                Some(status) => status.code.to_string(),
                None if matches!(e, lethe_kube::KubeError::Timeout(_)) => "timeout".to_string(),
                None => "unavailable".to_string(),
            },
        };
        // Each request, for tracing what a pass sends (`LETHE_LOG=lethe::caps::kube=trace`).
        tracing::trace!(component = %self.env.component_id, verb, kind, code = %code, "kube request");
        self.env
            .metrics
            .kube_requests
            .get_or_create(&crate::metrics::KubeLabels {
                component: self.env.component_id.to_string(),
                verb,
                kind: kind_label(kind),
                code,
            })
            .inc();
        result
    }
}

impl CapsView<'_> {
    /// Notes an object written through `client`: a leader Lease the component now holds for
    /// this host as its privileged identity is released when the host stops
    /// ([`super::held_leases`]).
    fn noted(&self, client: &ClientHandle, written: lethe_kube::Object) -> lethe_kube::Object {
        if client.is_privileged() {
            self.env
                .held_leases
                .observe(&written, self.env.instance_id());
        }
        written
    }
}

impl HostClient for CapsView<'_> {
    async fn open(
        &mut self,
        identity: Identity,
    ) -> wasmtime::Result<Result<Resource<ClientHandle>, Error>> {
        let (grant, identity) = match identity {
            Identity::Caller(token) => (
                KubeIdentityGrant::Caller,
                lethe_kube::Identity::Caller(token),
            ),
            Identity::Privileged => (
                KubeIdentityGrant::Privileged,
                lethe_kube::Identity::Privileged,
            ),
        };
        if !self.env.grants.allows_identity(grant) {
            return Ok(Err(Error::Forbidden(Status {
                code: 403,
                reason: "Forbidden".into(),
                message: format!(
                    "component `{}` is not granted the {} Kubernetes identity",
                    self.env.component_id,
                    match grant {
                        KubeIdentityGrant::Caller => "caller",
                        KubeIdentityGrant::Privileged => "privileged",
                    }
                ),
            })));
        }
        let Some(cluster) = self.env.cluster.as_ref() else {
            return Ok(Err(Error::Unavailable(
                "no Kubernetes cluster is configured".into(),
            )));
        };
        match cluster.client(&identity) {
            Ok(client) => {
                let waited = self.kube_waited.get_or_init(Default::default).clone();
                let mut client = client
                    .with_deadline(self.deadline)
                    .with_rate_limit(self.env.kube_rate_limit.clone(), waited)
                    .with_waker(self.env.wake.clone());
                if let (Some(caller), lethe_kube::Identity::Privileged) = (self.caller, &identity) {
                    client = client.charged_to(caller);
                }
                Ok(Ok(self.table.push(client)?))
            }
            Err(e) => Ok(Err(from_error(e))),
        }
    }

    async fn authenticate(
        &mut self,
        client: Resource<ClientHandle>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let client = self.table.get(&client)?;
        Ok(client.authenticate().await.map_err(from_error))
    }

    async fn get(
        &mut self,
        client: Resource<ClientHandle>,
        target: ObjectRef,
    ) -> wasmtime::Result<Result<Object, Error>> {
        let client = self.table.get(&client)?;
        let result = client.get(&to_ref(target.clone())).await;
        Ok(self
            .counted(client, "get", &target.kind, result)
            .map(from_object)
            .map_err(from_error))
    }

    async fn list(
        &mut self,
        client: Resource<ClientHandle>,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        options: ListOptions,
    ) -> wasmtime::Result<Result<ObjectList, Error>> {
        let client = self.table.get(&client)?;
        let options = lethe_kube::convert_list_options!(options => lethe_kube::ListOptions);
        let result = client
            .list(&api_version, &kind, namespace.as_deref(), &options)
            .await;
        Ok(self
            .counted(client, "list", &kind, result)
            .map(|l| ObjectList {
                items: l.items.into_iter().map(from_object).collect(),
                continue_token: l.continue_token,
                resource_version: l.resource_version,
            })
            .map_err(from_error))
    }

    async fn create(
        &mut self,
        client: Resource<ClientHandle>,
        json: String,
    ) -> wasmtime::Result<Result<Object, Error>> {
        let client = self.table.get(&client)?;
        let result = client.create(&json).await;
        let kind = kind_of(&json);
        Ok(self
            .counted(client, "create", &kind, result)
            .map(|o| self.noted(client, o))
            .map(from_object)
            .map_err(from_error))
    }

    async fn replace(
        &mut self,
        client: Resource<ClientHandle>,
        target: ObjectRef,
        json: String,
    ) -> wasmtime::Result<Result<Object, Error>> {
        let client = self.table.get(&client)?;
        let result = client.replace(&to_ref(target.clone()), &json).await;
        Ok(self
            .counted(client, "update", &target.kind, result)
            .map(|o| self.noted(client, o))
            .map(from_object)
            .map_err(from_error))
    }

    async fn patch(
        &mut self,
        client: Resource<ClientHandle>,
        target: ObjectRef,
        kind: PatchKind,
        patch: String,
        subresource: Option<String>,
    ) -> wasmtime::Result<Result<Object, Error>> {
        let client = self.table.get(&client)?;
        let kind = match kind {
            PatchKind::Merge => lethe_kube::PatchKind::Merge,
            PatchKind::Json => lethe_kube::PatchKind::Json,
            PatchKind::StrategicMerge => lethe_kube::PatchKind::StrategicMerge,
        };
        let result = client
            .patch(
                &to_ref(target.clone()),
                kind,
                &patch,
                subresource.as_deref(),
            )
            .await;
        Ok(self
            .counted(client, "patch", &target.kind, result)
            .map(|o| self.noted(client, o))
            .map(from_object)
            .map_err(from_error))
    }

    async fn delete(
        &mut self,
        client: Resource<ClientHandle>,
        target: ObjectRef,
        options: DeleteOptions,
    ) -> wasmtime::Result<Result<DeleteOutcome, Error>> {
        let client = self.table.get(&client)?;
        let options = lethe_kube::DeleteOptions {
            propagation_policy: options.propagation_policy.map(|p| match p {
                PropagationPolicy::Background => lethe_kube::PropagationPolicy::Background,
                PropagationPolicy::Foreground => lethe_kube::PropagationPolicy::Foreground,
                PropagationPolicy::Orphan => lethe_kube::PropagationPolicy::Orphan,
            }),
            precondition_uid: options.precondition_uid,
            precondition_resource_version: options.precondition_resource_version,
        };
        let result = client.delete(&to_ref(target.clone()), &options).await;
        Ok(self
            .counted(client, "delete", &target.kind, result)
            .map(|o| match o {
                lethe_kube::DeleteOutcome::Deleted => DeleteOutcome::Deleted,
                lethe_kube::DeleteOutcome::Pending(obj) => DeleteOutcome::Pending(from_object(obj)),
            })
            .map_err(from_error))
    }

    async fn changes(
        &mut self,
        client: Resource<ClientHandle>,
        collection: Collection,
        since: Option<String>,
        max: u32,
    ) -> wasmtime::Result<Result<ChangeBatch, Error>> {
        let client = self.table.get(&client)?;
        let kind = collection.kind.clone();
        let collection = lethe_kube::convert_collection!(collection => lethe_kube::Collection);
        let result = client.changes(&collection, since.as_deref(), max).await;
        Ok(self
            .counted(client, "changes", &kind, result)
            .map(|batch| ChangeBatch {
                changes: batch
                    .changes
                    .into_iter()
                    .map(|c| Change {
                        type_: match c.change_type {
                            lethe_kube::ChangeType::Added => ChangeType::Added,
                            lethe_kube::ChangeType::Modified => ChangeType::Modified,
                            lethe_kube::ChangeType::Deleted => ChangeType::Deleted,
                        },
                        object: from_object(c.object),
                    })
                    .collect(),
                bookmark: batch.bookmark,
                more: batch.more,
            })
            .map_err(from_error))
    }

    async fn drop(&mut self, client: Resource<ClientHandle>) -> wasmtime::Result<()> {
        self.table.delete(client)?;
        Ok(())
    }
}

/// The `kind` of an object to be created, for its metric.
fn kind_of(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// `kind` as a metric label: only a kind-like word is taken as it is, so that a malformed body
/// or reference cannot put arbitrary text into a label.
fn kind_label(kind: &str) -> String {
    let kind_like =
        !kind.is_empty() && kind.len() <= 63 && kind.chars().all(|c| c.is_ascii_alphanumeric());
    if kind_like {
        kind.to_string()
    } else {
        "unknown".to_string()
    }
}

fn to_ref(r: ObjectRef) -> lethe_kube::ObjectRef {
    lethe_kube::ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

fn from_ref(r: lethe_kube::ObjectRef) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

fn from_object(o: lethe_kube::Object) -> Object {
    Object {
        target: from_ref(o.target),
        metadata: lethe_kube::convert_metadata!(o.metadata => Metadata),
        json: o.json,
    }
}

fn from_status(s: lethe_kube::Status) -> Status {
    Status {
        code: s.code,
        reason: s.reason,
        message: s.message,
    }
}

fn from_error(e: lethe_kube::KubeError) -> Error {
    use lethe_kube::KubeError as E;
    match e {
        E::NotFound(s) => Error::NotFound(from_status(s)),
        E::Conflict(s) => Error::Conflict(from_status(s)),
        E::Forbidden(s) => Error::Forbidden(from_status(s)),
        E::Unauthorized(s) => Error::Unauthorized(from_status(s)),
        E::Invalid(s) => Error::Invalid(from_status(s)),
        E::Gone(s) => Error::Gone(from_status(s)),
        E::Unavailable(m) => Error::Unavailable(m),
        E::Timeout(m) => Error::Timeout(m),
    }
}

#[cfg(test)]
mod tests {

    use wasmtime::component::ResourceTable;

    use super::*;
    use crate::caps::CapabilityEnv;
    use crate::manifest::{Capability, Grants};

    fn env(identities: Vec<KubeIdentityGrant>) -> CapabilityEnv {
        CapabilityEnv::bare(
            "probe",
            Grants {
                capabilities: vec![Capability::Kube],
                kube_identities: identities,
                ..Grants::default()
            },
        )
    }

    async fn open(env: &CapabilityEnv, identity: Identity) -> Result<(), Error> {
        let mut table = ResourceTable::new();
        let waited = std::sync::OnceLock::new();
        let mut view = CapsView {
            env,
            table: &mut table,
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(5),
            kube_waited: &waited,
            caller: None,
        };
        view.open(identity).await.expect("no trap").map(|_| ())
    }

    /// SECURITY.md: a component whose grant lacks `privileged` never gets a privileged client,
    /// whatever it asks for; the refusal comes before any cluster is consulted.
    #[tokio::test]
    async fn privileged_is_refused_to_a_component_granted_only_caller() {
        let caller_only = env(vec![KubeIdentityGrant::Caller]);
        match open(&caller_only, Identity::Privileged).await {
            Err(Error::Forbidden(status)) => {
                assert_eq!(status.code, 403);
                assert!(
                    status
                        .message
                        .contains("`probe` is not granted the privileged Kubernetes identity"),
                    "{}",
                    status.message
                );
            }
            other => panic!("privileged was not refused: {other:?}"),
        }
        // The granted identity passes the check (and then finds no cluster configured).
        assert!(matches!(
            open(&caller_only, Identity::Caller("t".into())).await,
            Err(Error::Unavailable(_))
        ));
        // And the other way round.
        let privileged_only = env(vec![KubeIdentityGrant::Privileged]);
        assert!(matches!(
            open(&privileged_only, Identity::Caller("t".into())).await,
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            open(&env(vec![]), Identity::Privileged).await,
            Err(Error::Forbidden(_))
        ));
    }
}
