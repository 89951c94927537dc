//! The capabilities the host supplies to components, one module each (like Spin's factors):
//! `log`, `config`, `sql` and `kube`. Each module implements its WIT `Host` traits on
//! [`CapsView`], the per-instance view of a component's [`CapabilityEnv`].
//!
//! Lifecycle: [`add_to_linker`] links every capability once (init); [`CapabilityEnv`] is built per
//! component from the manifest at start (configure app, where grants and variables are checked);
//! [`Capabilities::new`] is the cheap per-instance state (prepare); the `Host` impls answer the
//! component's calls.

pub mod config;
pub mod held_leases;
pub mod kube;
pub mod log;
pub mod sql;

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker, ResourceTable};

use crate::manifest::Grants;

/// Host-side bindings of the `lethe:platform` capability interfaces.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "lethe:platform/host-capabilities",
        imports: { default: async | trappable },
        with: {
            "lethe:platform/sql.transaction": super::sql::TransactionHandle,
            "lethe:platform/kube.client": super::kube::ClientHandle,
        },
    });
}

/// Everything one component's capabilities need, built once at start.
pub struct CapabilityEnv {
    /// The component id, for logs.
    pub component_id: Arc<str>,
    /// What the manifest grants it.
    pub grants: Grants,
    /// Its configuration values, resolved from the manifest's variables.
    pub config: BTreeMap<String, String>,
    /// The database, when `sql` is granted.
    pub database: Option<lethe_sql::Database>,
    /// The cluster, when `kube` is granted.
    pub cluster: Option<lethe_kube::Cluster>,
    /// The buckets its Kubernetes calls wait for (`kube_qps`, `kube_burst`), one per identity.
    pub kube_rate_limit: Arc<lethe_kube::RateLimit>,
    /// Where `log.progress` reports go, when someone is watching (`lethe sync --once`).
    pub progress: Option<Arc<Progress>>,
    /// Where the component's calls are counted.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Rings when something the component acts on changed: a collection it follows through
    /// `kube` `changes` received a change, or it answered a write request. Its cron triggers
    /// then tick at once rather than at their next scheduled time.
    pub wake: Arc<tokio::sync::Notify>,
    /// Where its privileged calls that the cluster refused are told (`/readyz`, the log).
    pub denials: Arc<crate::admin::denials::Denials>,
    /// The leader Leases it holds for this host, released on a clean stop.
    pub held_leases: held_leases::HeldLeases,
}

impl CapabilityEnv {
    /// This host's identity as a Lease holder (`lethe_instance_id`).
    pub fn instance_id(&self) -> &str {
        self.config
            .get(config::INSTANCE_ID_KEY)
            .map_or("", String::as_str)
    }

    /// Releases the leader Leases the component holds for this host (see [`held_leases`]), as
    /// its own privileged identity, within `within`. A component holding none costs nothing.
    pub async fn release_leases(&self, within: std::time::Duration) {
        let Some(cluster) = self.cluster.as_ref() else {
            return;
        };
        if self.held_leases.is_empty() {
            return;
        }
        match cluster.client(&lethe_kube::Identity::Privileged) {
            Ok(client) => {
                let client = client.with_deadline(std::time::Instant::now() + within);
                self.held_leases
                    .release_all(&client, self.instance_id(), &self.component_id)
                    .await;
            }
            Err(e) => tracing::warn!(
                component = %self.component_id,
                "cannot release its Leases: {e}"
            ),
        }
    }
}

#[cfg(test)]
impl CapabilityEnv {
    /// A component `component_id` granted `grants`, with no configuration, database, cluster or
    /// watcher, and the default rate limit: what a test of one capability starts from.
    pub(crate) fn bare(component_id: &str, grants: Grants) -> Self {
        CapabilityEnv {
            component_id: Arc::from(component_id),
            grants,
            config: BTreeMap::new(),
            database: None,
            cluster: None,
            progress: None,
            metrics: Default::default(),
            kube_rate_limit: Arc::new(
                lethe_kube::RateLimit::new(Default::default()).expect("the default rate limit"),
            ),
            wake: Default::default(),
            denials: Default::default(),
            held_leases: Default::default(),
        }
    }
}

/// The latest `log.progress` report of a component: `done` of `total`.
#[derive(Debug, Default)]
pub struct Progress {
    /// Items done.
    pub done: std::sync::atomic::AtomicU64,
    /// Items in all.
    pub total: std::sync::atomic::AtomicU64,
}

/// The per-instance capability state: a handle on the component's environment, and when the
/// instance's time runs out.
pub struct Capabilities {
    env: Arc<CapabilityEnv>,
    deadline: std::time::Instant,
    /// The time this instance's Kubernetes calls waited for the rate limit (made on first use).
    kube_waited: std::sync::OnceLock<Arc<lethe_kube::Waited>>,
    /// The caller (its token's SHA-256) whose request this instance answers, if it answers one.
    caller: Option<[u8; 32]>,
}

impl Capabilities {
    /// Prepares the capabilities of one instance that may run for `time_limit`; allocates
    /// nothing but a reference count. Capability calls end by [`answer_margin`] before the
    /// limit.
    pub fn new(env: Arc<CapabilityEnv>, time_limit: std::time::Duration) -> Self {
        let deadline = time_limit.saturating_sub(answer_margin(time_limit));
        Capabilities {
            env,
            deadline: std::time::Instant::now() + deadline,
            kube_waited: std::sync::OnceLock::new(),
            caller: None,
        }
    }

    /// This instance answers a request of the caller whose token has SHA-256 `caller`: its
    /// privileged Kubernetes calls draw from that caller's rate-limit bucket, as the calls it
    /// makes as the caller do, not from the bucket the component's background work shares.
    pub fn answer_for(&mut self, caller: [u8; 32]) {
        self.caller = Some(caller);
    }

    /// How long this instance's Kubernetes calls have waited for the rate limit.
    pub fn kube_waited(&self) -> std::time::Duration {
        self.kube_waited
            .get()
            .map_or(std::time::Duration::ZERO, |w| w.total())
    }

    /// What the host calls of an instance holding these capabilities and `table` see.
    pub fn view<'a>(&'a self, table: &'a mut ResourceTable) -> CapsView<'a> {
        CapsView {
            env: &self.env,
            table,
            deadline: self.deadline,
            kube_waited: &self.kube_waited,
            caller: self.caller,
        }
    }
}

/// How long before its time limit an instance's capability calls stop retrying and waiting:
/// a fifth of the limit, at most 2 s. The component then still has time to turn the failure into
/// its own answer (a 503 the caller may retry) instead of running out of time (a 500). A tenth,
/// at most 500 ms, proved too little on a loaded machine: a job poll under a storm of 503s got
/// its last failure in time and was still cut off before it answered.
pub fn answer_margin(time_limit: std::time::Duration) -> std::time::Duration {
    (time_limit / 5).min(std::time::Duration::from_secs(2))
}

/// What capability host calls see: the component's environment and the instance's resources.
pub struct CapsView<'a> {
    env: &'a CapabilityEnv,
    table: &'a mut ResourceTable,
    /// When retries must have ended (see [`Capabilities::new`]).
    deadline: std::time::Instant,
    /// Where the instance's rate-limit waits are summed.
    kube_waited: &'a std::sync::OnceLock<Arc<lethe_kube::Waited>>,
    /// The caller whose request the instance answers ([`Capabilities::answer_for`]).
    caller: Option<[u8; 32]>,
}

struct CapsData;

impl HasData for CapsData {
    type Data<'a> = CapsView<'a>;
}

/// Links every lethe capability into `linker` (once, at start); `view` finds an instance's
/// capabilities in its store's state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> CapsView<'_>,
) -> wasmtime::Result<()> {
    bindings::HostCapabilities::add_to_linker::<T, CapsData>(linker, view)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn capability_calls_end_a_fifth_of_the_limit_early_and_never_more_than_two_seconds() {
        for (limit_ms, margin_ms) in [
            (0, 0),
            (1_000, 200),
            (5_000, 1_000),
            (10_000, 2_000),
            (30_000, 2_000),
        ] {
            assert_eq!(
                answer_margin(Duration::from_millis(limit_ms)),
                Duration::from_millis(margin_ms),
                "a limit of {limit_ms} ms"
            );
        }
    }

    #[test]
    fn an_instances_calls_stop_at_its_limit_less_the_margin() {
        let env = Arc::new(CapabilityEnv::bare("c", Grants::default()));
        let before = Instant::now();
        let caps = Capabilities::new(env, Duration::from_secs(10));
        let after = Instant::now();
        assert!(caps.deadline >= before + Duration::from_secs(8));
        assert!(caps.deadline <= after + Duration::from_secs(8));
    }
}
