//! Ownership marks: what ties an object lethe made with its privileged identity to the org or
//! space it was made for, and the check that runs before that identity adopts, writes into or
//! deletes anything (SECURITY.md, rows P1–P4).
//!
//! Namespaces are cluster-scoped, so an owner reference from a namespaced Org or Space cannot
//! point at them; RoleBindings live in another namespace than their org's record. Both carry the
//! owner's **uid** in a label instead, next to its type and name. The uid is what makes the mark
//! unforgeable in practice: only the server assigns it, a re-created object of the same name gets
//! a new one (and so inherits nothing), and adding the label to a namespace needs write rights on
//! that namespace, which is exactly what the mark protects.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::{Value as Json, json};

use lethe_guest::env::Env;
use lethe_guest::kube::{Collection, Identity, Kube, KubeError, ListOptions, Object, ObjectRef};
use lethe_retry::{Budget, Policy, Setback};

use crate::errors::HttpError;

/// The label naming the owner as `<type>.<name>` (`org.<guid>`), for people and selectors.
pub const OWNER_LABEL: &str = "cf.lethe.dev/owner";

/// The label holding the owner's `metadata.uid`: the mark the privileged identity checks.
pub const OWNER_UID_LABEL: &str = "cf.lethe.dev/owner-uid";

/// The label marking objects lethe manages.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "lethe");

/// The annotation the reconciler puts on an org or space whose way is blocked by an object that
/// is not lethe's: the report naming that object. Its deletion job turns `FAILED` with it.
pub const BLOCKED_BY_ANNOTATION: &str = "cf.lethe.dev/blocked-by";

/// What blocks `object`'s reconciliation, as the reconciler last recorded it.
pub fn blocked_by(object: &Object) -> Option<&str> {
    object.annotation(BLOCKED_BY_ANNOTATION)
}

/// The org or space on whose behalf the privileged identity acts.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// Its job-GUID type name (`org`, `space`).
    pub type_name: &'a str,
    /// The object itself, as read from the cluster (its uid is the mark).
    pub object: &'a Object,
}

/// An object in the way that lethe does not own: it is reported and never touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotOurs {
    /// The kind of the object in the way, e.g. `Namespace`.
    pub kind: String,
    /// Its namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Whom lethe acted for, as `<type> <name> (uid <uid>)`.
    pub owner: String,
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        };
        write!(
            f,
            "{} {path} is in the way of {} and is not lethe's (it lacks {OWNER_UID_LABEL} for \
             that owner); lethe left it untouched",
            self.kind, self.owner
        )
    }
}

impl<'a> Owner<'a> {
    /// The owner `object` of type `type_name`.
    pub fn new(type_name: &'a str, object: &'a Object) -> Self {
        Owner { type_name, object }
    }

    /// The name of the namespace it owns: its own name (guid).
    pub fn namespace_name(&self) -> &'a str {
        &self.object.target.name
    }

    /// The labels every object made for it carries.
    pub fn labels(&self) -> Json {
        json!({
            OWNER_LABEL: format!("{}.{}", self.type_name, self.object.target.name),
            OWNER_UID_LABEL: self.object.metadata.uid,
            MANAGED_BY.0: MANAGED_BY.1,
        })
    }

    /// Whether `candidate` carries this owner's mark: the same type and name, and the same uid.
    pub fn owns(&self, candidate: &Object) -> bool {
        self.is_mark(
            candidate.label(OWNER_LABEL),
            candidate.label(OWNER_UID_LABEL),
        )
    }

    /// Whether the values of [`OWNER_LABEL`] and [`OWNER_UID_LABEL`] name this owner.
    fn is_mark(&self, mark: Option<&str>, uid: Option<&str>) -> bool {
        !self.object.metadata.uid.is_empty()
            && uid == Some(self.object.metadata.uid.as_str())
            && mark == Some(format!("{}.{}", self.type_name, self.object.target.name).as_str())
    }

    /// `Ok` when `candidate` is this owner's, else the report of the object in the way.
    pub fn check(&self, candidate: &Object) -> Result<(), NotOurs> {
        if self.owns(candidate) {
            return Ok(());
        }
        Err(NotOurs {
            kind: candidate.target.kind.clone(),
            namespace: candidate.target.namespace.clone(),
            name: candidate.target.name.clone(),
            owner: format!(
                "{} {} (uid {})",
                self.type_name, self.object.target.name, self.object.metadata.uid
            ),
        })
    }
}

/// Why the privileged identity did not act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The cluster failed or refused the call.
    Kube(KubeError),
    /// An object in the way is not lethe's.
    NotOurs(NotOurs),
}

impl From<KubeError> for Refusal {
    fn from(e: KubeError) -> Self {
        Refusal::Kube(e)
    }
}

impl From<NotOurs> for Refusal {
    fn from(e: NotOurs) -> Self {
        Refusal::NotOurs(e)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Kube(e) => e.fmt(f),
            Refusal::NotOurs(e) => e.fmt(f),
        }
    }
}

impl Refusal {
    /// The API's answer when lethe will not act: 422 naming the object in the way and what the
    /// request was for (`target`, e.g. `space`), or the cluster's own error.
    pub fn into_http_error(self, target: &str) -> HttpError {
        match self {
            Refusal::NotOurs(in_the_way) => HttpError::unprocessable(format!(
                "Invalid {target}: {in_the_way}. Ask an administrator to resolve the clash."
            )),
            Refusal::Kube(e) => HttpError::from_kube(e, "Unknown request"),
        }
    }
}

/// The annotation holding the id of the request that created an object whose name lethe chose.
pub const CREATE_REQUEST_ANNOTATION: &str = "cf.lethe.dev/create-request";

/// How a create whose outcome is unknown is made again: at most eight attempts in all, so an API
/// server answering one request in four with a 5xx (a storm) still fails a create only about once
/// in 65,000 requests; with full jitter over a ceiling from 100 ms doubling up to 500 ms, so that
/// all of them fit in under 3 s.
const CREATE_RETRY: Policy = Policy {
    max_attempts: 8,
    max_throttled: 8,
    base_delay: Duration::from_millis(100),
    max_delay: Duration::from_millis(500),
};

/// Makes `create` until it answers anything but unavailable or timed out (an unknown outcome),
/// under [`CREATE_RETRY`]. Returns the last answer, and whether an earlier attempt's outcome was
/// unknown (so that an `AlreadyExists` may be its own doing).
fn create_until_known(
    env: &dyn Env,
    mut create: impl FnMut() -> Result<Object, KubeError>,
) -> (Result<Object, KubeError>, bool) {
    let mut budget = Budget::new(CREATE_RETRY);
    loop {
        let earlier_unknown = budget.attempts() > 0;
        let answer = create();
        if matches!(
            answer,
            Err(KubeError::Unavailable(_) | KubeError::Timeout(_))
        ) {
            let mut random = [0u8; 8];
            for (slot, byte) in random.iter_mut().zip(env.random_bytes(8)) {
                *slot = byte;
            }
            let random = u64::from_be_bytes(random);
            if let Some(pause) = budget.next(Setback::Failed, None, None, random) {
                env.sleep_ms(u64::try_from(pause.as_millis()).unwrap_or(u64::MAX));
                continue;
            }
        }
        return (answer, earlier_unknown);
    }
}

/// Creates `object`, whose name lethe chose, as `identity`, so that the create is safe to make
/// again: the object carries a fresh request id ([`CREATE_REQUEST_ANNOTATION`]); a create whose
/// outcome is unknown (unavailable, timed out) is made again, with a growing pause, under
/// [`CREATE_RETRY`]; and an `AlreadyExists` on a later attempt counts as success only
/// when the object found (read privileged) carries that same request id, i.e. an earlier attempt
/// did land. Anyone else's object of that name stays an `AlreadyExists`.
pub fn create_once(
    kube: &dyn Kube,
    env: &dyn Env,
    identity: &Identity,
    mut object: Json,
) -> Result<Object, KubeError> {
    let request = env.new_uuid();
    object["metadata"]["annotations"][CREATE_REQUEST_ANNOTATION] = json!(request);
    let target = lethe_guest::kube::object_from_json(object.clone()).target;
    match create_until_known(env, || kube.create(identity, &object)) {
        (Err(KubeError::Conflict(m)), true) => {
            let found = kube.get(&Identity::Privileged, &target)?;
            if found.annotation(CREATE_REQUEST_ANNOTATION) == Some(request.as_str()) {
                Ok(found)
            } else {
                Err(KubeError::Conflict(m))
            }
        }
        (answer, _) => answer,
    }
}

/// The namespaces carrying lethe's mark, as one paginated LIST showed them: what a full pass
/// checks its objects' namespaces against, so that it costs LIST pages rather than a GET per
/// object. Only the marks are kept (a couple of hundred bytes a namespace), not the objects.
#[derive(Debug, Default)]
pub struct MarkedNamespaces {
    /// Namespace name → (its [`OWNER_LABEL`], its [`OWNER_UID_LABEL`], whether it is being
    /// deleted).
    marks: BTreeMap<String, (String, String, bool)>,
}

impl MarkedNamespaces {
    /// Lists the namespaces with an [`OWNER_UID_LABEL`], `page` at a time.
    pub fn list(kube: &dyn Kube, page: u32) -> Result<MarkedNamespaces, KubeError> {
        let options = ListOptions {
            label_selector: Some(OWNER_UID_LABEL.to_string()),
            limit: Some(page),
            ..Default::default()
        };
        let mut marks = BTreeMap::new();
        kube.list_pages(
            &Identity::Privileged,
            &Collection::new("v1", "Namespace", None),
            &options,
            &mut |namespaces| {
                for ns in namespaces {
                    let mark = ns.label(OWNER_LABEL).unwrap_or_default().to_string();
                    let uid = ns.label(OWNER_UID_LABEL).unwrap_or_default().to_string();
                    let deleting = ns.metadata.deletion_timestamp.is_some();
                    marks.insert(ns.target.name, (mark, uid, deleting));
                }
                ControlFlow::Continue(())
            },
        )?;
        Ok(MarkedNamespaces { marks })
    }

    /// Whether the namespace `owner` owns was listed with `owner`'s mark ([`Owner::owns`]).
    pub fn holds(&self, owner: Owner<'_>) -> bool {
        self.marks
            .get(owner.namespace_name())
            .is_some_and(|(mark, uid, _)| owner.is_mark(Some(mark), Some(uid)))
    }

    /// Whether the namespace `owner` owns was listed with `owner`'s mark and not being deleted.
    pub fn standing(&self, owner: Owner<'_>) -> bool {
        self.marks
            .get(owner.namespace_name())
            .is_some_and(|(mark, uid, deleting)| !deleting && owner.is_mark(Some(mark), Some(uid)))
    }

    /// The listed namespaces, not being deleted, whose mark names an owner of their own name
    /// (`<type>.<namespace name>`) that is not among `present` (marks of the objects listed):
    /// `(type, name)` of each, to be swept if its owner is really gone.
    pub fn unowned<'a>(
        &'a self,
        present: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.marks
            .iter()
            .filter(move |(_, (mark, _, deleting))| !deleting && !present.contains(mark))
            .filter_map(|(name, (mark, _, _))| {
                let (type_name, owner) = mark.split_once('.')?;
                (owner == name).then_some((type_name, name.as_str()))
            })
    }
}

/// A reference to the namespace `name`.
pub fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef::new("v1", "Namespace", None, name)
}

/// Reads the namespace `owner` owns. `Ok(None)` when it does not exist; `NotOurs` when a
/// namespace of that name exists without `owner`'s mark (SECURITY.md P1).
pub fn owned_namespace(kube: &dyn Kube, owner: Owner<'_>) -> Result<Option<Object>, Refusal> {
    match kube.get(
        &Identity::Privileged,
        &namespace_ref(owner.namespace_name()),
    ) {
        Ok(ns) => {
            owner.check(&ns)?;
            Ok(Some(ns))
        }
        Err(KubeError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Creates the namespace `owner` owns if it is missing; `Ok(true)` if this call created it.
/// A namespace of that name without `owner`'s mark is never adopted: `NotOurs` (SECURITY.md P1).
/// An `AlreadyExists` on create is re-read and judged the same way, so a namespace that appeared
/// in between is adopted only if it is this owner's. One attempt: the reconciler's own backoff
/// decides when a failed create is made again.
pub fn ensure_namespace(kube: &dyn Kube, owner: Owner<'_>) -> Result<bool, Refusal> {
    ensure_namespace_by(kube, owner, |ns| kube.create(&Identity::Privileged, ns))
}

/// [`ensure_namespace`] for a request a client waits on: the conflict rule makes the create safe
/// to repeat, so one whose outcome is unknown is made again, as [`create_once`] does.
pub fn ensure_namespace_now(
    kube: &dyn Kube,
    env: &dyn Env,
    owner: Owner<'_>,
) -> Result<bool, Refusal> {
    ensure_namespace_by(kube, owner, |ns| {
        create_until_known(env, || kube.create(&Identity::Privileged, ns)).0
    })
}

fn ensure_namespace_by(
    kube: &dyn Kube,
    owner: Owner<'_>,
    create: impl FnOnce(&Json) -> Result<Object, KubeError>,
) -> Result<bool, Refusal> {
    if owned_namespace(kube, owner)?.is_some() {
        return Ok(false);
    }
    make_namespace(kube, owner, create)
}

/// [`ensure_namespace`] once a LIST of the [`MarkedNamespaces`] showed no namespace with
/// `owner`'s mark: it is created at once, and only an `AlreadyExists` (one made since, or one in
/// the way) is read and judged as [`ensure_namespace`] judges it.
pub fn make_unlisted_namespace(kube: &dyn Kube, owner: Owner<'_>) -> Result<bool, Refusal> {
    make_namespace(kube, owner, |ns| kube.create(&Identity::Privileged, ns))
}

fn make_namespace(
    kube: &dyn Kube,
    owner: Owner<'_>,
    create: impl FnOnce(&Json) -> Result<Object, KubeError>,
) -> Result<bool, Refusal> {
    let ns = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": owner.namespace_name(), "labels": owner.labels() },
    });
    match create(&ns) {
        Ok(_) => Ok(true),
        Err(KubeError::Conflict(m)) => match owned_namespace(kube, owner)? {
            Some(_) => Ok(false),
            // Created and deleted again in between: the next pass decides afresh.
            None => Err(KubeError::Conflict(m).into()),
        },
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lethe_guest::kube::object_from_json;

    fn object(kind: &str, name: &str, uid: &str, labels: Json) -> Object {
        object_from_json(json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "uid": uid, "labels": labels},
        }))
    }

    #[test]
    fn only_the_owners_uid_and_name_make_the_mark() {
        let space = object("Space", "s1", "uid-1", json!({}));
        let owner = Owner::new("space", &space);
        let marked = object("Namespace", "s1", "ns-uid", owner.labels());
        assert!(owner.owns(&marked));
        // The same name re-created: a new uid inherits nothing.
        let again = object("Space", "s1", "uid-2", json!({}));
        assert!(!Owner::new("space", &again).owns(&marked));
        // The name label alone (or the uid of another type) is not the mark.
        let named = object("Namespace", "s1", "x", json!({OWNER_LABEL: "space.s1"}));
        assert!(!owner.owns(&named));
        assert!(!Owner::new("org", &space).owns(&marked));
        // An owner without a uid owns nothing, whatever is written on the candidate.
        let blank = object("Space", "s1", "", json!({}));
        let forged = object(
            "Namespace",
            "s1",
            "x",
            json!({OWNER_LABEL: "space.s1", OWNER_UID_LABEL: ""}),
        );
        assert!(!Owner::new("space", &blank).owns(&forged));
        let report = owner.check(&named).expect_err("not ours").to_string();
        assert!(report.starts_with("Namespace s1 is in the way of space s1 (uid uid-1)"));
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_is_tried_again_eight_times_with_a_jittered_capped_pause() {
        let cluster = lethe_guest::fake::FakeCluster::new();
        let env = lethe_guest::fake::FakeHost::on(&cluster);
        let start = env.now.get();
        let mut calls = 0;
        let (answer, retried) = create_until_known(&env, || {
            calls += 1;
            Err(KubeError::Unavailable("storm".into()))
        });
        assert_eq!(calls, CREATE_RETRY.max_attempts);
        assert!(retried && matches!(answer, Err(KubeError::Unavailable(_))));
        // Seven pauses, each at most its ceiling: 100, 200, 400, then 500 ms (the cap) for the
        // last four.
        let paused = env.now.get() - start;
        assert!(paused <= 100 + 200 + 400 + 500 * 4, "{paused} ms");
        assert!(paused > 0, "the pauses are jittered, not skipped");
        let mut calls = 0;
        let (answer, retried) = create_until_known(&env, || {
            calls += 1;
            Err(KubeError::Conflict("taken".into()))
        });
        assert_eq!((calls, retried), (1, false), "a known answer is final");
        assert!(matches!(answer, Err(KubeError::Conflict(_))));
    }

    #[test]
    fn a_refusal_says_what_refused_or_what_is_in_the_way() {
        let kube = Refusal::from(KubeError::Unavailable("the cluster is down".into()));
        assert_eq!(kube.to_string(), "unavailable: the cluster is down");
        let in_the_way = Refusal::from(NotOurs {
            kind: "Namespace".into(),
            namespace: None,
            name: "team".into(),
            owner: "org team (uid 1)".into(),
        });
        assert!(in_the_way.to_string().contains("team"), "{in_the_way}");
        assert_eq!(
            in_the_way.to_string(),
            match &in_the_way {
                Refusal::NotOurs(e) => e.to_string(),
                Refusal::Kube(_) => unreachable!(),
            }
        );
    }
}
