//! The `__NAME__` component: desired `__KIND__`s (`__API_VERSION__`, a namespaced kind) kept in
//! SQL, made real in the cluster by a reconciler, and deleted asynchronously, with a job to poll.
//!
//! - [`api`]: the HTTP API. A caller states what they want (`PUT`), reads it back, and deletes it
//!   (`DELETE`, answered `202` with the job's `Location`). The cluster decides who may do what:
//!   each write asks its authorizer whether the caller may do the same to the `__KIND__` itself.
//! - [`reconcile`]: one pass, run by lethe's cron trigger (woken at once by every API write) and
//!   by Spin's. It makes the `__KIND__`s match the rows as lethe's own identity, on the SDK's
//!   controller pieces: a Lease (one host runs passes), the change feed and the watch (a pass
//!   visits what changed; a full pass every `full_resync_seconds`), per-object backoff, a
//!   finalizer (an object's deletion waits for the reconciler) and Events (`kubectl events`).
//!
//! What lethe owns is what it marked: a `__KIND__` it made carries the labels
//! `app.kubernetes.io/managed-by=lethe`, `lethe.dev/reconciler=__NAME__` and
//! `lethe.dev/desired-uid=<its row's uid>`. Every write of the pass is made to an object it has
//! just read with those marks, guarded by that object's uid or resourceVersion; an object of the
//! same name without them is reported and never touched.
//!
//! The logic is plain Rust over the SDK's `Kube`, `Sql` and `Env`, so it is tested natively
//! against the SDK's fake host (`src/tests.rs`: `cargo test`) and runs as wasm against lethe or
//! Spin (`src/wasm.rs`).

use lethe_guest::feed::FeedTable;
use lethe_guest::kept::KeptTable;
use lethe_guest::kube::{Object, ObjectRef};
use lethe_guest::sql::{SqlError, Value};
use serde_json::{Map, Value as Json};

pub mod api;
pub mod reconcile;

/// The kind this component keeps.
pub const API_VERSION: &str = "__API_VERSION__";
/// The kind's name.
pub const KIND: &str = "__KIND__";
/// The kind's API group (`""`: the core group) and resource (its plural, as RBAC names it).
pub const GROUP: &str = "__GROUP__";
/// The kind's resource.
pub const RESOURCE: &str = "__RESOURCE__";
/// The job type of its deletions: job GUIDs are `__JOB_TYPE__.delete~<namespace>~<name>`.
pub const JOB_TYPE: &str = "__JOB_TYPE__";
/// This reconciler's name: its Lease, its label value, its backoff rows, its Events' controller.
pub const RECONCILER: &str = "__NAME__";
/// The finalizer it puts on what it makes, so that a deletion waits for it.
pub const FINALIZER: &str = "lethe.dev/__NAME__";
/// The label that marks a `__KIND__` as lethe's.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "lethe");
/// The label that names the reconciler that made it.
pub const RECONCILER_LABEL: &str = "lethe.dev/reconciler";
/// The label that names the desired row it was made for.
pub const UID_LABEL: &str = "lethe.dev/desired-uid";

/// The change feed of desired state, over the component's tables.
pub static FEED: FeedTable = FeedTable {
    bump: "UPDATE __SNAKE___revision SET value = value + 1 WHERE name = $1",
    stamp: "INSERT INTO __SNAKE___change (object_key, revision) \
            SELECT $1, value FROM __SNAKE___revision WHERE name = $2 \
            ON CONFLICT (object_key) DO UPDATE SET revision = excluded.revision",
    head: "SELECT value FROM __SNAKE___revision WHERE name = $1",
    since: "SELECT object_key, revision FROM __SNAKE___change WHERE revision > $1 \
            ORDER BY revision LIMIT $2",
};

/// The feed's counter row.
pub const FEED_COUNTER: &str = "desired";

/// What the reconciler keeps between passes.
pub static KEPT: KeptTable = KeptTable {
    select: "SELECT value FROM __SNAKE___kept WHERE name = $1",
    upsert: "INSERT INTO __SNAKE___kept (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    delete: "DELETE FROM __SNAKE___kept WHERE name = $1",
};

/// One desired object: a row of `__SNAKE___desired`.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The id its object carries (label `lethe.dev/desired-uid`).
    pub uid: String,
    /// Its content: a JSON object of the kind's top-level fields but `apiVersion`, `kind`,
    /// `metadata` and `status`.
    pub content: Map<String, Json>,
    /// When its deletion was asked for; `None` while it is wanted.
    pub deleting_since: Option<i64>,
}

/// The columns [`Desired::from_row`] reads, in order.
pub const DESIRED_COLUMNS: &str = "namespace, name, uid, content, deleting_since";

impl Desired {
    /// A row of [`DESIRED_COLUMNS`]; `None` for one this component did not write.
    pub fn from_row(row: &[Value]) -> Option<Desired> {
        let [namespace, name, uid, content, deleting_since] = row else {
            return None;
        };
        let content = match serde_json::from_str(content.text()) {
            Ok(Json::Object(map)) => map,
            _ => return None,
        };
        Some(Desired {
            namespace: namespace.text().to_string(),
            name: name.text().to_string(),
            uid: uid.text().to_string(),
            content,
            deleting_since: deleting_since.int(),
        })
    }

    /// Its key in the feed and the backoff table.
    pub fn key(&self) -> String {
        key(&self.namespace, &self.name)
    }

    /// What its state is parked on: a failure that retrying cannot mend (the API server
    /// rejected the content) waits until the content, the row or its deletion changes.
    pub fn fingerprint(&self) -> String {
        // Its deletion too: a row parked while wanted, then deleted, is visited again.
        let deleting = self.deleting_since.is_some();
        let text = format!(
            "{}\n{}\n{deleting}",
            self.uid,
            Json::Object(self.content.clone())
        );
        // FNV-1a: stable across builds and hosts, which `std`'s hasher does not promise.
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{hash:016x}")
    }

    /// The object it stands for, as the reconciler creates it.
    pub fn object(&self) -> Json {
        let mut object = self.content.clone();
        object.insert("apiVersion".into(), API_VERSION.into());
        object.insert("kind".into(), KIND.into());
        object.insert(
            "metadata".into(),
            serde_json::json!({
                "name": self.name,
                "namespace": self.namespace,
                "labels": {
                    MANAGED_BY.0: MANAGED_BY.1,
                    RECONCILER_LABEL: RECONCILER,
                    UID_LABEL: self.uid,
                },
                "finalizers": [FINALIZER],
            }),
        );
        Json::Object(object)
    }

    /// Whether `live` holds every field of the content as desired (a field the API server or
    /// another writer added is left alone; a field the content sets, changed, is drift). Judged
    /// on the object's content, never on an annotation lethe wrote.
    pub fn held_by(&self, live: &Object) -> bool {
        let live = live.json();
        self.content.iter().all(|(field, value)| {
            live.get(field)
                .is_some_and(|l| lethe_guest::kube::holds(l, value))
        })
    }
}

/// The key of `namespace`/`name`.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Where `namespace`/`name` lives.
pub fn target(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// Whether `object` is one this reconciler made: lethe's marks, with this reconciler's name.
pub fn is_ours(object: &Object) -> bool {
    object.label(MANAGED_BY.0) == Some(MANAGED_BY.1)
        && object.label(RECONCILER_LABEL) == Some(RECONCILER)
        && object.label(UID_LABEL).is_some()
}

/// The selector of the objects this reconciler made.
pub fn selector() -> String {
    format!(
        "{}={},{RECONCILER_LABEL}={RECONCILER}",
        MANAGED_BY.0, MANAGED_BY.1
    )
}

/// The objects this reconciler made, as it follows and lists them.
pub fn ours() -> lethe_guest::kube::Collection {
    lethe_guest::kube::Collection {
        label_selector: Some(selector()),
        ..lethe_guest::kube::Collection::new(API_VERSION, KIND, None)
    }
}

/// The desired rows at `keys` (all of them when `None`).
pub fn desired_rows(
    sql: &dyn lethe_guest::sql::Sql,
    keys: Option<&[String]>,
) -> Result<Vec<Desired>, SqlError> {
    let rows = match keys {
        None => sql.query(
            &format!("SELECT {DESIRED_COLUMNS} FROM __SNAKE___desired ORDER BY namespace, name"),
            &[],
        )?,
        Some(keys) => {
            let mut rows = Vec::new();
            for key in keys {
                let Some((namespace, name)) = key.split_once('/') else {
                    continue;
                };
                rows.extend(sql.query(
                    &format!(
                        "SELECT {DESIRED_COLUMNS} FROM __SNAKE___desired \
                         WHERE namespace = $1 AND name = $2"
                    ),
                    &[namespace.into(), name.into()],
                )?);
            }
            rows
        }
    };
    Ok(rows
        .iter()
        .filter_map(|row| Desired::from_row(row))
        .collect())
}

/// Checks the component's configuration (the `configuration` export, which lethe calls at
/// start): every value that is set must be well-formed.
pub fn check_configuration(host: &dyn lethe_guest::Capabilities) -> Result<(), String> {
    for (key, default) in [
        ("deletion_timeout_seconds", api::DEFAULT_DELETION_TIMEOUT_S),
        ("job_retention_seconds", reconcile::DEFAULT_JOB_RETENTION_S),
    ] {
        lethe_guest::env::seconds_ms(host, key, default)?;
    }
    lethe_guest::controller::Config::from_env(host, RECONCILER, &KEPT).map(|_| ())
}

#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(test)]
mod tests;
