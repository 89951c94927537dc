//! Unique names at a constant number of API calls per create, as Cloud Controller's unique
//! database index gives them. A create first claims its name with a ConfigMap in the root
//! namespace, named after the name: an organization's among organizations, a space's among its
//! organization's spaces, without regard to case (Cloud Controller's columns are
//! case-insensitive). Creating an object is atomic on every Kubernetes API server, so of two
//! concurrent creates of one name exactly one gets the claim and the other is told the name is
//! taken, whatever the number of objects.
//!
//! A claim names the guid of the resource that holds it, and is checked, never trusted
//! blindly. It is stale when that resource does not exist, or no longer bears the name (it was
//! renamed by hand), and it is older than [`IN_FLIGHT_MS`]; a stale claim is deleted (with a uid
//! precondition, so only that claim) and made again. A younger one may belong to a create still
//! under way, so the name stays taken until then. A ConfigMap of a claim's name that lacks
//! lethe's mark is never touched: the name stays taken and the clash is logged.
//!
//! Objects made outside the API (with kubectl, or before claims existed) are claimed by the
//! reconciler: on first sight, and on every full pass, which also deletes stale claims.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use serde_json::json;

use lethe_guest::env::{Env, Level, parse_rfc3339_ms};
use lethe_guest::kube::{
    Collection, DeleteOptions, Identity, Kube, KubeError, ListOptions, Object, ObjectRef,
};

use crate::config::ResourceType;
use crate::kind::ResourceKind;
use crate::ownership::{self, MANAGED_BY};

/// The label every claim carries, its value the kind of resource it claims a name for (`org`,
/// `space`): what a full pass lists claims by.
pub const CLAIM_LABEL: &str = "cf.lethe.dev/name-claim";

/// The annotation of a claim naming the guid of the resource that holds the name.
pub const HOLDER_ANNOTATION: &str = "cf.lethe.dev/claimed-by";

/// How long a claim whose resource does not exist (yet) still holds its name: longer than any
/// create takes between its claim and its resource (the cf-api component's time limit is 15 s).
/// A claim's age is the host's clock against the API server's `creationTimestamp`, so this also
/// absorbs their skew, up to some 45 s.
pub const IN_FLIGHT_MS: i64 = 60_000;

/// The claim on one name: of an organization among organizations, or of a space among the
/// spaces of one organization.
#[derive(Debug, Clone, Copy)]
pub struct NameClaim<'a> {
    /// The root namespace, where claims live.
    pub root: &'a str,
    /// The kind of resource the name is for.
    pub kind: ResourceKind,
    /// Where the resources that compete for the name live: the root namespace for orgs, the
    /// organization's namespace (its guid) for spaces.
    pub namespace: &'a str,
    /// The resource type, to read a claim's holder by.
    pub t: &'a ResourceType,
    /// The name, as given.
    pub name: &'a str,
}

impl<'a> NameClaim<'a> {
    /// The claim `object` (of `kind` and type `t`, claims in `root`) holds or needs, when it has
    /// a name to hold.
    pub fn of(
        root: &'a str,
        kind: ResourceKind,
        t: &'a ResourceType,
        object: &'a Object,
    ) -> Option<NameClaim<'a>> {
        Some(NameClaim {
            root,
            kind,
            namespace: object.target.namespace.as_deref()?,
            t,
            name: object.str_at("/spec/displayName")?,
        })
    }

    /// The ConfigMap of this claim: named after a SHA-256 of the lowercased name (and, for a
    /// space, its organization), so that any name makes a valid Kubernetes name.
    pub fn target(&self) -> ObjectRef {
        let digest = sha256_hex(self.name.to_lowercase().as_bytes());
        let name = match self.kind {
            ResourceKind::Org => format!("org-name-{}", &digest[..40]),
            ResourceKind::Space => format!("space-name-{}-{}", self.namespace, &digest[..40]),
        };
        ObjectRef::new("v1", "ConfigMap", Some(self.root), &name)
    }

    /// The ConfigMap that claims the name for the resource named `holder`.
    pub fn object(&self, holder: &str) -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.target().name,
                "namespace": self.root,
                "labels": { MANAGED_BY.0: MANAGED_BY.1, CLAIM_LABEL: self.kind.name() },
                "annotations": { HOLDER_ANNOTATION: holder },
            },
            "data": { "name": self.name, "namespace": self.namespace },
        })
    }

    /// Claims the name for the resource named `holder`: `Ok(true)` when it now holds it,
    /// `Ok(false)` when another holds it. At most two each of creates, reads of the claim, reads
    /// of a holder and deletes: whatever the number of resources.
    pub fn take(&self, kube: &dyn Kube, env: &dyn Env, holder: &str) -> Result<bool, KubeError> {
        let target = self.target();
        let claim = self.object(holder);
        for _ in 0..2 {
            match ownership::create_once(kube, env, &Identity::Privileged, claim.clone()) {
                Ok(_) => return Ok(true),
                Err(KubeError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
            let found = match kube.get(&Identity::Privileged, &target) {
                Ok(found) => found,
                // Released between the create and this read: try again.
                Err(KubeError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            match found.annotation(HOLDER_ANNOTATION) {
                Some(h) if h == holder && is_ours(&found) => return Ok(true),
                _ => {}
            }
            if !self.is_stale(kube, env, &found)? {
                return Ok(false);
            }
            delete_claim(kube, &target, &found.metadata.uid)?;
        }
        Ok(false)
    }

    /// Gives up the claim `holder` made (its create failed, or it is gone): deleted only while
    /// it is lethe's and still names `holder`. Best effort: a claim left behind is taken over
    /// once stale, and deleted by a full pass.
    pub fn release(&self, kube: &dyn Kube, holder: &str) {
        let Ok(found) = kube.get(&Identity::Privileged, &self.target()) else {
            return;
        };
        if is_ours(&found) && found.annotation(HOLDER_ANNOTATION) == Some(holder) {
            let _ = delete_claim(kube, &found.target, &found.metadata.uid);
        }
    }

    /// Whether `found`, the ConfigMap in this claim's place, is lethe's claim of a resource
    /// that does not hold the name, old enough that no create can still be making it.
    fn is_stale(&self, kube: &dyn Kube, env: &dyn Env, found: &Object) -> Result<bool, KubeError> {
        if !is_ours(found) {
            env.log(
                Level::Warn,
                &format!(
                    "ConfigMap {} in {} is in the way of a name claim and is not lethe's: the name {:?} stays taken",
                    found.target.name, self.root, self.name
                ),
            );
            return Ok(false);
        }
        if !old_enough(created_ms(found), env.now_ms()) {
            return Ok(false);
        }
        let Some(holder) = found.annotation(HOLDER_ANNOTATION) else {
            return Ok(true);
        };
        let resource = ObjectRef::new(
            &self.t.api_version,
            &self.t.kind,
            Some(self.namespace),
            holder,
        );
        match kube.get(&Identity::Privileged, &resource) {
            Ok(o) => Ok(!bears(&o, self.name)),
            Err(KubeError::NotFound(_)) => Ok(true),
            Err(e) => Err(e),
        }
    }
}

/// Whether `o` bears the name `name`, without regard to case.
pub fn bears(o: &Object, name: &str) -> bool {
    o.str_at("/spec/displayName")
        .is_some_and(|n| n.to_lowercase() == name.to_lowercase())
}

/// Whether `found` carries lethe's mark and claim label.
fn is_ours(found: &Object) -> bool {
    found.label(MANAGED_BY.0) == Some(MANAGED_BY.1) && found.label(CLAIM_LABEL).is_some()
}

/// When `found` was made, in milliseconds since the epoch.
fn created_ms(found: &Object) -> Option<i64> {
    found
        .metadata
        .creation_timestamp
        .as_deref()
        .and_then(parse_rfc3339_ms)
}

/// Whether a claim made at `created` was made at least [`IN_FLIGHT_MS`] before `now`.
fn old_enough(created: Option<i64>, now: i64) -> bool {
    created.is_some_and(|at| now.saturating_sub(at) >= IN_FLIGHT_MS)
}

/// Deletes the claim `target`, preconditioned on its `uid`; gone or replaced already is fine.
fn delete_claim(kube: &dyn Kube, target: &ObjectRef, uid: &str) -> Result<(), KubeError> {
    let how = DeleteOptions {
        precondition_uid: Some(uid.to_string()),
        ..Default::default()
    };
    match kube.delete(&Identity::Privileged, target, &how) {
        Ok(_) | Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// What a full pass keeps of one listed claim (not the object: a hundred bytes or so, so that
/// claims on tens of thousands of names fit a component's memory).
#[derive(Debug)]
struct Listed {
    /// The kind it claims a name for (`org`, `space`).
    kind: String,
    /// The guid of the resource that holds it.
    holder: String,
    /// Its uid, to delete exactly it.
    uid: String,
    /// When it was made.
    created: Option<i64>,
}

/// The claims in the root namespace, as one paginated LIST of a full pass showed them: which
/// objects still need one, and which claims outlived their holder.
#[derive(Debug, Default)]
pub struct Claims {
    /// Where they live.
    root: String,
    /// Claim name → what is kept of it.
    by_name: BTreeMap<String, Listed>,
}

impl Claims {
    /// Lists the claims in `root`, `page` at a time.
    pub fn list(kube: &dyn Kube, root: &str, page: u32) -> Result<Claims, KubeError> {
        let options = ListOptions {
            label_selector: Some(format!("{CLAIM_LABEL},{}={}", MANAGED_BY.0, MANAGED_BY.1)),
            limit: Some(page),
            ..Default::default()
        };
        let mut by_name = BTreeMap::new();
        let listing = kube.list_pages(
            &Identity::Privileged,
            &Collection::new("v1", "ConfigMap", Some(root)),
            &options,
            &mut |claims| {
                for claim in claims {
                    let listed = Listed {
                        kind: claim.label(CLAIM_LABEL).unwrap_or_default().to_string(),
                        holder: claim
                            .annotation(HOLDER_ANNOTATION)
                            .unwrap_or_default()
                            .to_string(),
                        created: created_ms(&claim),
                        uid: claim.metadata.uid,
                    };
                    by_name.insert(claim.target.name, listed);
                }
                ControlFlow::Continue(())
            },
        );
        match listing {
            Ok(()) | Err(KubeError::NotFound(_)) => Ok(Claims {
                root: root.to_string(),
                by_name,
            }),
            Err(e) => Err(e),
        }
    }

    /// Whether `claim` was listed as held by `holder`.
    pub fn held(&self, claim: &NameClaim<'_>, holder: &str) -> bool {
        self.by_name
            .get(&claim.target().name)
            .is_some_and(|c| c.holder == holder)
    }

    /// Deletes the claims made at least [`IN_FLIGHT_MS`] before `started` whose holder,
    /// `<kind>.<guid>`, is not in `listed`: every object of both kinds, listed after `started`
    /// (so a create whose claim is that old has made its object by then). Their resource is
    /// gone. Before each delete it asks `must_stop` (a leader paused past its Lease stops there,
    /// as before each item of a pass). Returns how many it deleted, and whether it stopped.
    pub fn delete_orphans(
        &self,
        kube: &dyn Kube,
        listed: &BTreeSet<String>,
        started: i64,
        must_stop: &dyn Fn() -> bool,
    ) -> Result<(u32, bool), KubeError> {
        let mut deleted = 0;
        for (name, claim) in &self.by_name {
            let holder = format!("{}.{}", claim.kind, claim.holder);
            if !old_enough(claim.created, started) || listed.contains(&holder) {
                continue;
            }
            if must_stop() {
                return Ok((deleted, true));
            }
            let target = ObjectRef::new("v1", "ConfigMap", Some(&self.root), name);
            delete_claim(kube, &target, &claim.uid)?;
            deleted += 1;
        }
        Ok((deleted, false))
    }
}

/// The lowercase hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
