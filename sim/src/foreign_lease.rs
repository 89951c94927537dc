//! A Lease under lethe's name that lethe did not write. In one seed in eight the hostile user
//! has rights to the reconciler's Lease and uses them between passes: it replaces lethe's Lease
//! with one of its own (no `managed-by: lethe` label, a holder that is no lethe host), forges
//! lethe's (the label kept, the holder `intruder`, renewed now for 15 s), or takes its own away
//! again. Its choices come from a stream of their own, derived from the schedule's, so the other
//! seven seeds in eight keep their schedules.
//!
//! The invariant: a pass that begins with a foreign Lease under its name runs nothing, and leaves
//! that Lease as it was. A forged Lease is the leader invariant's business
//! ([`crate::world::one_leader`]): no host runs while `intruder` holds it.

use lethe_guest::env::format_micro_time;
use lethe_guest::fake::FakeCluster;
use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, ObjectRef};
use lethe_guest::lease::MANAGED_BY;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::world::Failure;

/// The holder the forged Lease names.
const INTRUDER: &str = "intruder";

/// The hostile user's hand on one reconciler's Lease.
pub struct Squatter {
    /// Its choices; `None` in the seeds where it leaves the Lease alone.
    rng: Option<StdRng>,
    namespace: &'static str,
    name: &'static str,
}

impl Squatter {
    /// The squatter of the Lease `namespace/name`, active in one seed in eight: which, and
    /// what it does, is derived from `schedule` without drawing from it.
    pub fn new(schedule: &StdRng, namespace: &'static str, name: &'static str) -> Squatter {
        let seed: u64 = schedule.clone().random();
        let mut rng = StdRng::seed_from_u64(seed ^ 0x632b_e59b_d9b4_e019);
        Squatter {
            rng: rng.random_ratio(1, 8).then_some(rng),
            namespace,
            name,
        }
    }

    fn target(&self) -> ObjectRef {
        ObjectRef::new(
            "coordination.k8s.io/v1",
            "Lease",
            Some(self.namespace),
            self.name,
        )
    }

    fn admin() -> Identity {
        Identity::Caller("admin".into())
    }

    /// One move of the hostile user's, or none (one hostile step in three touches the Lease):
    /// its trace line.
    pub fn act(&mut self, kube: &FakeCluster) -> Option<String> {
        let rng = self.rng.as_mut()?;
        if !rng.random_ratio(1, 3) {
            return None;
        }
        let forge = rng.random_ratio(1, 2);
        let now = format_micro_time(kube.now.get());
        let (namespace, name) = (self.namespace, self.name);
        match kube.object("Lease", namespace, name) {
            Some(lease) if lease.label(MANAGED_BY.0) != Some(MANAGED_BY.1) => {
                let r = kube.delete(&Self::admin(), &self.target(), &DeleteOptions::default());
                Some(format!(
                    "hostile removes its own Lease {namespace}/{name}: {}",
                    r.is_ok()
                ))
            }
            Some(_) if forge => {
                kube.edit("Lease", namespace, name, |lease| {
                    lease["spec"]["holderIdentity"] = json!(INTRUDER);
                    lease["spec"]["renewTime"] = json!(now);
                    lease["spec"]["leaseDurationSeconds"] = json!(15);
                });
                Some(format!(
                    "hostile forges lethe's Lease {namespace}/{name}: held by {INTRUDER} for 15 s"
                ))
            }
            was => {
                if was.is_some() {
                    let _ = kube.delete(&Self::admin(), &self.target(), &DeleteOptions::default());
                }
                kube.put(json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": namespace, "labels": {"app": "theirs"}},
                    "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 15, "renewTime": now},
                }));
                Some(format!(
                    "hostile {} a Lease of its own under lethe's name {namespace}/{name}",
                    if was.is_some() {
                        "replaces lethe's with"
                    } else {
                        "puts"
                    }
                ))
            }
        }
    }

    /// At quiescence: takes its own Lease away (a forged one lapses by itself); the trace line.
    pub fn stop(&self, kube: &FakeCluster) -> Option<String> {
        self.foreign(kube)?;
        let r = kube.delete(&Self::admin(), &self.target(), &DeleteOptions::default());
        Some(format!(
            "quiescence: the hostile user removes its own Lease: {}",
            r.is_ok()
        ))
    }

    /// The Lease lethe did not write under the name, if one is there: its uid and
    /// resourceVersion.
    pub fn foreign(&self, kube: &FakeCluster) -> Option<(String, String)> {
        let lease = kube.object("Lease", self.namespace, self.name)?;
        (lease.label(MANAGED_BY.0) != Some(MANAGED_BY.1))
            .then_some((lease.metadata.uid, lease.metadata.resource_version))
    }

    /// The invariant, after a pass by `host-<index>` that began with `before` (what
    /// [`Squatter::foreign`] read then) and `ran` or not.
    pub fn kept(
        &self,
        kube: &FakeCluster,
        index: usize,
        ran: bool,
        before: Option<(String, String)>,
    ) -> Result<(), Failure> {
        let Some(before) = before else {
            return Ok(());
        };
        if ran {
            return Err(format!(
                "host-{index} ran a pass while a Lease lethe did not write held its name"
            ));
        }
        if self.foreign(kube).as_ref() != Some(&before) {
            return Err(format!(
                "host-{index} changed or deleted the Lease {}/{} that lethe did not write",
                self.namespace, self.name
            ));
        }
        Ok(())
    }
}
