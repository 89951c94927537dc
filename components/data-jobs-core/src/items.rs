//! What the reconciler knows of each data job when it decides: its desired row, its actual row,
//! its backoff state and its live CronJobs, keyed by the job's uid. A full pass gathers it for
//! every job ([`load_all`] and the managed LIST); a pass on the changes gathers it for the jobs
//! that changed ([`load_some`] and [`list_of_job`]).

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::model::{self, Resources, Spec};
use crate::{Identity, Kube, KubeError, ListOptions, Object, Settings, Sql, Value};
use lethe_guest::backoff::{self, Failures};
use lethe_guest::kube::{Collection, ObjectList};

/// A job's desired deployment, as the API wrote it.
pub(crate) struct Desired {
    pub(crate) team: String,
    pub(crate) job_name: String,
    pub(crate) job_version: String,
    pub(crate) spec: Spec,
    pub(crate) hash: String,
}

/// A job's actual deployment: the CronJob the reconciler last applied or adopted.
pub(crate) struct Actual {
    pub(crate) team: String,
    pub(crate) job_name: String,
    pub(crate) cronjob_name: String,
    pub(crate) cronjob_uid: String,
    pub(crate) resource_version: String,
    pub(crate) generation: Option<i64>,
    pub(crate) hash: String,
    pub(crate) applied_at: i64,
}

impl Actual {
    /// Whether the live CronJob is the one recorded, unchanged since: same uid, and the same
    /// generation (spec unchanged; status updates do not count) or resourceVersion.
    pub(crate) fn recorded(
        &self,
        uid: &str,
        resource_version: &str,
        generation: Option<i64>,
    ) -> bool {
        self.cronjob_uid == uid
            && (self.resource_version == resource_version
                || (self.generation.is_some() && self.generation == generation))
    }
}

/// A live CronJob labelled as lethe's.
pub(crate) struct Live {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) resource_version: String,
    pub(crate) generation: Option<i64>,
    pub(crate) annotation_hash: Option<String>,
    /// The fingerprint of the live spec, or the annotation when the object is unchanged since
    /// it was applied.
    pub(crate) live_hash: Option<String>,
    /// Deleted already and held by a finalizer: asking again would change nothing.
    pub(crate) terminating: bool,
    /// Its finalizers: others' (a backup tool's, a policy's), which a replace must keep.
    pub(crate) finalizers: Vec<String>,
}

impl Live {
    /// `obj` as the decision sees it. The spec is fingerprinted only when the actual row does not
    /// record this very object unchanged, so a large converged LIST is not parsed.
    pub(crate) fn of(obj: Object, actual: Option<&Actual>) -> Live {
        let annotation_hash = obj.annotation(model::HASH_ANNOTATION).map(str::to_string);
        let unchanged = actual.is_some_and(|a| {
            a.recorded(
                &obj.metadata.uid,
                &obj.metadata.resource_version,
                obj.metadata.generation,
            )
        });
        let live_hash = if unchanged {
            annotation_hash.clone()
        } else {
            model::live_fingerprint(obj.json())
        };
        Live {
            terminating: obj.metadata.deletion_timestamp.is_some(),
            name: obj.target.name,
            uid: obj.metadata.uid,
            resource_version: obj.metadata.resource_version,
            generation: obj.metadata.generation,
            annotation_hash,
            live_hash,
            finalizers: obj.metadata.finalizers,
        }
    }
}

/// Everything known of one job.
#[derive(Default)]
pub(crate) struct Item {
    pub(crate) desired: Option<Desired>,
    pub(crate) actual: Option<Actual>,
    /// Its failures in a row: backoff, or parking on a desired spec hash.
    pub(crate) state: Option<Failures>,
    pub(crate) live: Vec<Live>,
}

impl Item {
    /// How reports name it: `team/job`, or the CronJob, or the uid.
    pub(crate) fn label(&self, uid: &str) -> String {
        if let Some(d) = &self.desired {
            return format!("{}/{}", d.team, d.job_name);
        }
        if let Some(a) = &self.actual {
            return format!("{}/{}", a.team, a.job_name);
        }
        match self.live.first() {
            Some(l) => format!("cronjob {}", l.name),
            None => uid.to_string(),
        }
    }

    /// Whether anything of the job is left: a row or a CronJob.
    pub(crate) fn exists(&self) -> bool {
        self.desired.is_some() || self.actual.is_some() || !self.live.is_empty()
    }
}

/// What a pass works on.
#[derive(Default)]
pub(crate) struct World {
    /// The jobs, by uid.
    pub(crate) items: BTreeMap<String, Item>,
    /// CronJobs labelled as managed by lethe that name no job.
    pub(crate) orphans: Vec<Live>,
}

impl World {
    /// Files a live CronJob under its job, or among the orphans.
    pub(crate) fn add_live(&mut self, obj: Object) {
        match obj.label(model::JOB_UID_LABEL).map(str::to_string) {
            Some(uid) => {
                let item = self.items.entry(uid).or_default();
                let live = Live::of(obj, item.actual.as_ref());
                item.live.push(live);
            }
            None => self.orphans.push(Live::of(obj, None)),
        }
    }
}

/// Rows read per query when reading whole tables.
const SQL_PAGE: i64 = 5000;

/// Jobs read per query when reading some of them; the last chunk is padded by repeating a uid, so
/// that every such query has the same text and is prepared once.
const SQL_CHUNK: usize = 50;

const DESIRED_COLUMNS: &str =
    "job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash";
const ACTUAL_COLUMNS: &str = "job_uid, team, job_name, cronjob_name, cronjob_uid, resource_version, spec_hash, applied_at, generation";

fn text(r: &[Value], i: usize) -> String {
    r.get(i).map(Value::text).unwrap_or_default().to_string()
}

fn desired_from_row(r: &[Value]) -> Desired {
    let resources = serde_json::from_str::<Json>(&text(r, 7))
        .ok()
        .and_then(|v| Resources::from_vdk(&v).ok())
        .unwrap_or_default();
    Desired {
        team: text(r, 1),
        job_name: text(r, 2),
        job_version: text(r, 3),
        spec: Spec {
            image: text(r, 4),
            schedule: text(r, 5),
            enabled: r.get(6).is_some_and(Value::as_bool),
            resources,
        },
        hash: text(r, 8),
    }
}

fn actual_from_row(r: &[Value]) -> Actual {
    Actual {
        team: text(r, 1),
        job_name: text(r, 2),
        cronjob_name: text(r, 3),
        cronjob_uid: text(r, 4),
        resource_version: text(r, 5),
        generation: r.get(8).and_then(Value::int),
        hash: text(r, 6),
        applied_at: r.get(7).and_then(Value::int).unwrap_or(0),
    }
}

/// One table's rows for the job, as `file` files them.
struct Table {
    name: &'static str,
    /// The column holding the job's uid; the first of `columns`.
    key: &'static str,
    /// A column that must hold [`RECONCILER`], in a table shared with other reconcilers.
    scope: Option<&'static str>,
    columns: &'static str,
    what: &'static str,
    file: fn(&mut Item, &[Value]),
}

/// The data-jobs reconciler's name in the SDK's backoff table.
pub(crate) const RECONCILER: &str = "data-jobs";

impl Table {
    /// `{scope} = $n AND ` when the table is shared, with `$n` the scope's parameter.
    fn scope_condition(&self, n: usize) -> String {
        self.scope
            .map(|column| format!("{column} = ${n} AND "))
            .unwrap_or_default()
    }

    /// `params`, and the reconciler's name after them when the table is shared.
    fn scope_params(&self, mut params: Vec<Value>) -> Vec<Value> {
        if self.scope.is_some() {
            params.push(RECONCILER.into());
        }
        params
    }
}

const TABLES: [Table; 3] = [
    Table {
        name: "desired_data_job_deployment",
        key: "job_uid",
        scope: None,
        columns: DESIRED_COLUMNS,
        what: "desired deployments",
        file: |item, r| item.desired = Some(desired_from_row(r)),
    },
    Table {
        name: "actual_data_job_deployment",
        key: "job_uid",
        scope: None,
        columns: ACTUAL_COLUMNS,
        what: "actual deployments",
        file: |item, r| item.actual = Some(actual_from_row(r)),
    },
    Table {
        name: backoff::TABLE,
        key: "object_key",
        scope: Some("reconciler"),
        columns: backoff::COLUMNS,
        what: "the backoff state",
        file: |item, r| item.state = Failures::from_row(r).map(|(_, f)| f),
    },
];

/// Every job's rows, read page by page in uid order.
pub(crate) fn load_all(sql: &dyn Sql) -> Result<BTreeMap<String, Item>, String> {
    let mut items: BTreeMap<String, Item> = BTreeMap::new();
    for table in &TABLES {
        let query = format!(
            "SELECT {} FROM {} WHERE {}{key} > $1 ORDER BY {key} LIMIT $2",
            table.columns,
            table.name,
            table.scope_condition(3),
            key = table.key,
        );
        let mut after = String::new();
        loop {
            let rows = sql
                .query(
                    &query,
                    &table.scope_params(vec![after.clone().into(), SQL_PAGE.into()]),
                )
                .map_err(|e| format!("reading {}: {e}", table.what))?;
            let n = rows.len();
            for r in rows {
                let uid = text(&r, 0);
                after.clone_from(&uid);
                (table.file)(items.entry(uid).or_default(), &r);
            }
            if i64::try_from(n).unwrap_or(0) < SQL_PAGE {
                break;
            }
        }
    }
    Ok(items)
}

/// The rows of the jobs `uids` (each gets an item, rows or not).
pub(crate) fn load_some(sql: &dyn Sql, uids: &[String]) -> Result<BTreeMap<String, Item>, String> {
    let mut items: BTreeMap<String, Item> =
        uids.iter().map(|u| (u.clone(), Item::default())).collect();
    let placeholders = (1..=SQL_CHUNK)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    for table in &TABLES {
        let query = format!(
            "SELECT {} FROM {} WHERE {}{} IN ({placeholders})",
            table.columns,
            table.name,
            table.scope_condition(SQL_CHUNK + 1),
            table.key,
        );
        for chunk in uids.chunks(SQL_CHUNK) {
            let Some(last) = chunk.last() else { continue };
            let params: Vec<Value> = chunk
                .iter()
                .chain(std::iter::repeat(last))
                .take(SQL_CHUNK)
                .map(|u| u.as_str().into())
                .collect();
            let rows = sql
                .query(&query, &table.scope_params(params))
                .map_err(|e| format!("reading {}: {e}", table.what))?;
            for r in rows {
                if let Some(item) = items.get_mut(r.first().map(Value::text).unwrap_or_default()) {
                    (table.file)(item, &r);
                }
            }
        }
    }
    Ok(items)
}

/// One page of the CronJobs in the data-jobs namespace that `selector` picks, as the privileged
/// identity. A missing namespace (the Lease creates it) is an empty page: nothing is deployed.
pub(crate) fn list_page(
    kube: &dyn Kube,
    settings: &Settings,
    selector: String,
    continue_token: Option<String>,
) -> Result<ObjectList, KubeError> {
    let options = ListOptions {
        label_selector: Some(selector),
        limit: Some(settings.page_size),
        continue_token,
        ..Default::default()
    };
    match kube.list(
        &Identity::Privileged,
        &Collection::new("batch/v1", "CronJob", Some(&settings.namespace)),
        &options,
    ) {
        Err(KubeError::NotFound(_)) => Ok(ObjectList::default()),
        other => other,
    }
}

/// The selector of the CronJobs labelled as job `uid`'s.
pub(crate) fn job_selector(uid: &str) -> String {
    format!("{},{}={uid}", model::MANAGED_SELECTOR, model::JOB_UID_LABEL)
}

/// The live CronJobs of job `uid`, every page.
pub(crate) fn list_of_job(
    kube: &dyn Kube,
    settings: &Settings,
    uid: &str,
) -> Result<Vec<Object>, KubeError> {
    let mut objects = Vec::new();
    let mut token = None;
    loop {
        let page = list_page(kube, settings, job_selector(uid), token.take())?;
        objects.extend(page.items);
        match page.continue_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(objects),
        }
    }
}
