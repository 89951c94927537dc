//! A leader Lease, as client-go's leader election keeps one: a `coordination.k8s.io/v1` Lease
//! whose `holderIdentity` is the host that may run a reconciler's passes. A holder renews it on
//! every pass and at checkpoints inside a long one (every [`LeaseConfig::renew_ms`]); another
//! host takes it over only once `renewTime + leaseDurationSeconds` has passed. Every write is a
//! replace guarded by the resourceVersion read, so two hosts can never both win.
//!
//! A Lease of that name that lethe did not write (it lacks `app.kubernetes.io/managed-by:
//! lethe`) is someone else's coordination: it is reported and never overwritten, and no pass
//! runs until it is gone.
//!
//! ```ignore
//! let config = LeaseConfig::from_env(env, "cf", "cf-reconciler")?;
//! let lease = match Lease::acquire(kube, &config, env.now_ms())? {
//!     Leadership::Held(lease) => lease,
//!     Leadership::Elsewhere(holder) => return Ok(PassReport::not_leader(holder)),
//! };
//! // ... and at checkpoints of the pass: lease.keep(env.now_ms())?
//! ```

use std::cell::{Cell, RefCell};

use serde_json::{Value as Json, json};

use crate::env::{Env, format_micro_time, parse_rfc3339_ms};
use crate::kube::{Identity, Kube, KubeError, ObjectRef};

/// The label every Lease lethe writes carries, and the only Leases it ever renews or takes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "lethe");

/// Which Lease, and this host's part in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Where the Lease lives.
    pub namespace: String,
    /// Its name: one per reconciler.
    pub name: String,
    /// This host's identity as its holder (`lethe_instance_id`).
    pub holder: String,
    /// How long a holder that stopped renewing keeps it (`leaseDurationSeconds`).
    pub duration_ms: i64,
    /// How often a holder renews it.
    pub renew_ms: i64,
}

impl LeaseConfig {
    /// The Lease `namespace`/`name`, timed by the component's configuration:
    /// `lease_duration_seconds` (default 15), `lease_renew_seconds` (default 5, and below the
    /// duration) and `lethe_instance_id` (the holder; default `lethe`). `Err` names a value that
    /// is set but malformed.
    pub fn from_env(env: &dyn Env, namespace: &str, name: &str) -> Result<LeaseConfig, String> {
        let seconds = |key: &str, default: i64| -> Result<i64, String> {
            match env.config(key).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(v) => v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=3600).contains(n))
                    .ok_or_else(|| {
                        format!("{key} must be a whole number of seconds from 1 to 3600, not {v:?}")
                    }),
            }
        };
        let duration = seconds("lease_duration_seconds", 15)?;
        let renew = seconds("lease_renew_seconds", 5)?;
        if renew >= duration {
            return Err(format!(
                "lease_renew_seconds ({renew}) must be below lease_duration_seconds ({duration})"
            ));
        }
        Ok(LeaseConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            holder: env
                .config("lethe_instance_id")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "lethe".to_string()),
            duration_ms: duration * 1000,
            renew_ms: renew * 1000,
        })
    }

    /// The Lease object.
    pub fn target(&self) -> ObjectRef {
        ObjectRef::new(
            "coordination.k8s.io/v1",
            "Lease",
            Some(&self.namespace),
            &self.name,
        )
    }

    /// The Lease as this host writes it.
    fn body(&self, acquired: &str, renewed: i64, transitions: i64, version: Option<&str>) -> Json {
        let mut metadata = json!({
            "name": self.name,
            "namespace": self.namespace,
            "labels": { MANAGED_BY.0: MANAGED_BY.1 },
        });
        if let Some(version) = version {
            metadata["resourceVersion"] = json!(version);
        }
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.duration_ms / 1000,
                "acquireTime": acquired,
                "renewTime": format_micro_time(renewed),
                "leaseTransitions": transitions,
            },
        })
    }
}

/// Why the Lease could not be read or taken: the step that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Reading it.
    #[error("reading the lease: {0}")]
    Reading(KubeError),
    /// Creating it, when there was none (`NotFound` here: its namespace does not exist).
    #[error("creating the lease: {0}")]
    Creating(KubeError),
    /// Writing it, to take it over or renew it.
    #[error("writing the lease: {0}")]
    Writing(KubeError),
    /// A Lease of that name is someone else's.
    #[error(
        "Lease {namespace}/{name} exists and is not lethe's (it lacks {}={}); lethe left it untouched and runs no pass until it is removed",
        MANAGED_BY.0,
        MANAGED_BY.1
    )]
    NotOurs {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// The Lease was lost in the middle of a pass: the pass must stop, since another host may now
/// run one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lost the lease while renewing it: {0}")]
pub struct LeaseLost(pub KubeError);

/// Who may run passes now.
#[derive(Debug)]
pub enum Leadership<'a> {
    /// This host: run the pass, keeping the Lease at its checkpoints.
    Held(Lease<'a>),
    /// Another host, by its holder identity: run none.
    Elsewhere(String),
}

/// The Lease, while this host holds it. Kept through a shared reference, so that every part of
/// a pass can renew it at its checkpoints.
pub struct Lease<'a> {
    kube: &'a dyn Kube,
    config: &'a LeaseConfig,
    resource_version: RefCell<String>,
    acquired: String,
    transitions: i64,
    renewed_at: Cell<i64>,
}

impl std::fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("config", self.config)
            .field("renewed_at", &self.renewed_at.get())
            .finish_non_exhaustive()
    }
}

impl<'a> Lease<'a> {
    /// Takes the Lease at `now` if it is free, expired or already this host's (renewing it if
    /// due), creating it when there is none.
    pub fn acquire(
        kube: &'a dyn Kube,
        config: &'a LeaseConfig,
        now: i64,
    ) -> Result<Leadership<'a>, LeaseError> {
        let held = |version: String, acquired: String, transitions: i64, renewed_at: i64| {
            Leadership::Held(Lease {
                kube,
                config,
                resource_version: RefCell::new(version),
                acquired,
                transitions,
                renewed_at: Cell::new(renewed_at),
            })
        };
        let current = match kube.get(&Identity::Privileged, &config.target()) {
            Ok(current) => current,
            Err(KubeError::NotFound(_)) => {
                let acquired = format_micro_time(now);
                let body = config.body(&acquired, now, 0, None);
                return match kube.create(&Identity::Privileged, &body) {
                    Ok(made) => Ok(held(made.metadata.resource_version, acquired, 0, now)),
                    Err(KubeError::Conflict(_)) => {
                        Ok(Leadership::Elsewhere("another host (just created)".into()))
                    }
                    Err(e) => Err(LeaseError::Creating(e)),
                };
            }
            Err(e) => return Err(LeaseError::Reading(e)),
        };
        if current.label(MANAGED_BY.0) != Some(MANAGED_BY.1) {
            return Err(LeaseError::NotOurs {
                namespace: config.namespace.clone(),
                name: config.name.clone(),
            });
        }
        let spec = &current.json()["spec"];
        let holder = spec["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let duration_ms = spec["leaseDurationSeconds"].as_i64().unwrap_or(15) * 1000;
        let renewed = spec["renewTime"]
            .as_str()
            .and_then(parse_rfc3339_ms)
            .unwrap_or(0);
        let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
        let mine = holder == config.holder;
        if !mine && !holder.is_empty() && renewed.saturating_add(duration_ms) > now {
            return Ok(Leadership::Elsewhere(holder));
        }
        let (acquired, transitions) = if mine {
            let acquired = spec["acquireTime"].as_str().map(str::to_string);
            (
                acquired.unwrap_or_else(|| format_micro_time(now)),
                transitions,
            )
        } else {
            (format_micro_time(now), transitions + 1)
        };
        let version = current.metadata.resource_version.clone();
        if mine && now - renewed < config.renew_ms && renewed <= now {
            // Held and renewed recently: a tick every second costs one read, not a write too;
            // `keep` renews it once it is due.
            return Ok(held(version, acquired, transitions, renewed));
        }
        let body = config.body(&acquired, now, transitions, Some(&version));
        match kube.replace(&Identity::Privileged, &config.target(), &body) {
            Ok(written) => Ok(held(
                written.metadata.resource_version,
                acquired,
                transitions,
                now,
            )),
            // Another host wrote it since it was read: who holds it now is not known from here
            // (not the holder read, which may be this host or a lapsed one).
            Err(KubeError::Conflict(_)) => Ok(Leadership::Elsewhere("another host (raced)".into())),
            Err(e) => Err(LeaseError::Writing(e)),
        }
    }

    /// Renews the Lease at `now` when it is due, guarded by the resourceVersion last written;
    /// `Err` when it was lost (written by another host meanwhile, or not writable): the pass
    /// must stop.
    pub fn keep(&self, now: i64) -> Result<(), LeaseLost> {
        if now - self.renewed_at.get() < self.config.renew_ms {
            return Ok(());
        }
        let version = self.resource_version.borrow().clone();
        let body = self
            .config
            .body(&self.acquired, now, self.transitions, Some(&version));
        let written = self
            .kube
            .replace(&Identity::Privileged, &self.config.target(), &body)
            .map_err(LeaseLost)?;
        *self.resource_version.borrow_mut() = written.metadata.resource_version;
        self.renewed_at.set(now);
        Ok(())
    }
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests {
    use super::*;
    use crate::fake::{FakeCluster, FakeHost};

    fn config(holder: &str) -> LeaseConfig {
        LeaseConfig {
            namespace: "ns".into(),
            name: "passes".into(),
            holder: holder.into(),
            duration_ms: 15_000,
            renew_ms: 5_000,
        }
    }

    fn holder_of(cluster: &FakeCluster) -> String {
        let lease = cluster.object("Lease", "ns", "passes").expect("lease");
        lease.json()["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn one_host_holds_it_until_it_expires_then_another_takes_it() {
        let cluster = FakeCluster::new();
        let (a, b) = (config("a"), config("b"));
        let now = FakeCluster::START_MS;
        assert!(matches!(
            Lease::acquire(&cluster, &a, now),
            Ok(Leadership::Held(_))
        ));
        match Lease::acquire(&cluster, &b, now + 1_000) {
            Ok(Leadership::Elsewhere(holder)) => assert_eq!(holder, "a"),
            other => panic!("{other:?}"),
        }
        // Still held one millisecond before it expires; taken at expiry, with a transition.
        assert!(matches!(
            Lease::acquire(&cluster, &b, now + 14_999),
            Ok(Leadership::Elsewhere(_))
        ));
        assert!(matches!(
            Lease::acquire(&cluster, &b, now + 15_000),
            Ok(Leadership::Held(_))
        ));
        assert_eq!(holder_of(&cluster), "b");
        let lease = cluster.object("Lease", "ns", "passes").expect("lease");
        assert_eq!(lease.json()["spec"]["leaseTransitions"], 1);
        assert_eq!(lease.label(MANAGED_BY.0), Some(MANAGED_BY.1));
    }

    #[test]
    fn a_holder_renews_only_when_due() {
        let cluster = FakeCluster::new();
        let a = config("a");
        let now = FakeCluster::START_MS;
        let Ok(Leadership::Held(lease)) = Lease::acquire(&cluster, &a, now) else {
            panic!("not held");
        };
        let version = |c: &FakeCluster| {
            c.object("Lease", "ns", "passes")
                .expect("lease")
                .metadata
                .resource_version
        };
        let first = version(&cluster);
        lease.keep(now + 4_999).expect("kept");
        assert_eq!(version(&cluster), first, "not due: no write");
        lease.keep(now + 5_000).expect("kept");
        assert_ne!(version(&cluster), first, "due: renewed");
        // A tick soon after is one read, and the Lease stays as it was.
        let renewed = version(&cluster);
        assert!(matches!(
            Lease::acquire(&cluster, &a, now + 6_000),
            Ok(Leadership::Held(_))
        ));
        assert_eq!(version(&cluster), renewed);
    }

    fn version(cluster: &FakeCluster) -> String {
        cluster
            .object("Lease", "ns", "passes")
            .expect("lease")
            .metadata
            .resource_version
    }

    #[test]
    fn a_holder_back_after_its_lease_lapsed_writes_it_before_it_runs() {
        let cluster = FakeCluster::new();
        let a = config("a");
        let now = FakeCluster::START_MS;
        assert!(matches!(
            Lease::acquire(&cluster, &a, now),
            Ok(Leadership::Held(_))
        ));
        // Renewal is due exactly `renew_ms` after the last one, as `keep` has it...
        let first = version(&cluster);
        assert!(matches!(
            Lease::acquire(&cluster, &a, now + 5_000),
            Ok(Leadership::Held(_))
        ));
        let renewed = version(&cluster);
        assert_ne!(renewed, first, "due: written");
        // ...and a holder back from a pause longer than the Lease (nobody took it meanwhile)
        // writes it again rather than run on a Lease another host could take at any moment.
        assert!(matches!(
            Lease::acquire(&cluster, &a, now + 60_000),
            Ok(Leadership::Held(_))
        ));
        assert_ne!(version(&cluster), renewed, "lapsed: written");
    }

    #[test]
    fn a_released_lease_is_taken_with_a_write() {
        let cluster = FakeCluster::new();
        let (a, b) = (config("a"), config("b"));
        let now = FakeCluster::START_MS;
        assert!(matches!(
            Lease::acquire(&cluster, &a, now),
            Ok(Leadership::Held(_))
        ));
        // Its holder let it go (client-go empties `holderIdentity` on a clean stop).
        cluster.edit("Lease", "ns", "passes", |l| {
            l["spec"]["holderIdentity"] = json!("");
        });
        assert!(matches!(
            Lease::acquire(&cluster, &b, now + 1_000),
            Ok(Leadership::Held(_))
        ));
        assert_eq!(holder_of(&cluster), "b", "held only once written");
    }

    #[test]
    fn a_takeover_that_loses_the_race_never_names_itself_the_holder() {
        let cluster = FakeCluster::new();
        let (a, b) = (config("a"), config("b"));
        let now = FakeCluster::START_MS;
        assert!(matches!(
            Lease::acquire(&cluster, &a, now),
            Ok(Leadership::Held(_))
        ));
        assert!(matches!(
            Lease::acquire(&cluster, &b, now + 20_000),
            Ok(Leadership::Held(_))
        ));
        // `a` comes back and reads a cache that has not seen `b`'s takeover: its own lapsed
        // Lease. Its write then conflicts; it has lost, and must not report itself as the holder.
        cluster.read_lag_ms.set(10_000);
        let raced = cluster.read_late(|| Lease::acquire(&cluster, &a, now + 20_500));
        cluster.read_lag_ms.set(0);
        match raced {
            Ok(Leadership::Elsewhere(holder)) => assert_eq!(holder, "another host (raced)"),
            other => panic!("{other:?}"),
        }
        assert_eq!(holder_of(&cluster), "b");
    }

    #[test]
    fn a_lease_lost_mid_pass_stops_the_holder() {
        let cluster = FakeCluster::new();
        let (a, b) = (config("a"), config("b"));
        let now = FakeCluster::START_MS;
        let Ok(Leadership::Held(lease)) = Lease::acquire(&cluster, &a, now) else {
            panic!("not held");
        };
        // A paused holder: its Lease expires and another host takes it mid-pass.
        assert!(matches!(
            Lease::acquire(&cluster, &b, now + 20_000),
            Ok(Leadership::Held(_))
        ));
        assert!(matches!(
            lease.keep(now + 20_001),
            Err(LeaseLost(KubeError::Conflict(_)))
        ));
        assert_eq!(holder_of(&cluster), "b");
    }

    #[test]
    fn a_lease_not_lethes_is_never_written() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        host.put(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "passes", "namespace": "ns"},
            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 1,
                     "renewTime": "2000-01-01T00:00:00.000000Z"}}),
        );
        let before = cluster.object("Lease", "ns", "passes").expect("lease");
        let a = config("a");
        assert!(matches!(
            Lease::acquire(&cluster, &a, FakeCluster::START_MS),
            Err(LeaseError::NotOurs { .. })
        ));
        let after = cluster.object("Lease", "ns", "passes").expect("lease");
        assert_eq!(
            after.metadata.resource_version,
            before.metadata.resource_version
        );
    }

    #[test]
    fn its_timing_comes_from_the_configuration() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let config = LeaseConfig::from_env(&host, "cf", "cf-reconciler").expect("defaults");
        assert_eq!((config.duration_ms, config.renew_ms), (15_000, 5_000));
        host.set_config("lease_duration_seconds", "6");
        host.set_config("lease_renew_seconds", "1");
        host.set_config("lethe_instance_id", "host-2");
        let config = LeaseConfig::from_env(&host, "cf", "cf-reconciler").expect("set");
        assert_eq!((config.duration_ms, config.renew_ms), (6_000, 1_000));
        assert_eq!(config.holder, "host-2");
        host.set_config("lease_renew_seconds", "6");
        assert!(LeaseConfig::from_env(&host, "cf", "cf-reconciler").is_err());
        host.set_config("lease_renew_seconds", "soon");
        assert!(LeaseConfig::from_env(&host, "cf", "cf-reconciler").is_err());
    }
}
