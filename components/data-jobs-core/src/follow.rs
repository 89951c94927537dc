//! Which jobs a pass visits: what changed since the last pass, or everything.
//!
//! Between full passes the reconciler pays for what changed, not for the number of deployments,
//! in the manner of a watch-driven controller. A pass on the changes visits:
//!
//! | source | what it names | read before deciding |
//! |--------|---------------|----------------------|
//! | the desired-state feed ([`crate::feed`]) since the revision bookmark | jobs whose desired deployment was set, changed or deleted | rows, and the job's CronJobs (one label-selected LIST) |
//! | `kube` `changes` of the managed CronJobs since the CronJob bookmark | jobs whose CronJob was created, edited, deleted, or lost lethe's labels; orphans; jobs whose actual row records an orphan's name | rows; the CronJobs unless the change shows the one the actual row records, unchanged in spec, with the desired hash |
//! | the backoff table (`reconcile_backoff`) | jobs whose backoff is over | rows and CronJobs |
//!
//! Each job is then decided and acted on exactly as the full pass does (the `sync` module): the
//! same uid-precondition deletes, claim before create, ownership checks, backoff and parking.
//! A CronJob's status update (its controller writes `lastScheduleTime`) changes no generation,
//! so it costs a SQL read and no Kubernetes request.
//!
//! A full pass — every row and a paginated LIST of every managed CronJob — runs when the SDK's
//! [`lethe_guest::follow`] says one is due (at start, every `full_resync_seconds`, when the
//! CronJob bookmark is `gone`, when the kept state cannot be read, after a pass that deferred
//! work (`max_changes_per_pass`), and when the caller asks), and also when more jobs changed than
//! a LIST page holds (`page_size`: reading each would cost more than the pages). Bookmarks are
//! kept in `data_job_sync_follow`, named by the host's `lethe_instance_id` (a CronJob bookmark
//! means something only to the host that gave it).

use std::collections::{BTreeMap, BTreeSet};

use lethe_guest::backoff::BackoffTable;
use lethe_guest::follow::{Outcome, Pass, Watched, WhyFull};
use lethe_guest::kept::{Kept, KeptTable};
use lethe_guest::kube::{Change, ChangeType, Collection};

use crate::feed;
use crate::items::{self, Item, Live, RECONCILER, World};
use crate::{Host, Kube, KubeError, Level, Settings, SqlError, model};

/// The managed CronJobs, as followed.
fn cronjobs<'a>(kube: &'a dyn Kube, settings: &Settings) -> Watched<'a> {
    let collection = Collection {
        label_selector: Some(model::MANAGED_SELECTOR.to_string()),
        ..Collection::new("batch/v1", "CronJob", Some(&settings.namespace))
    };
    Watched::new(kube, collection)
}

/// What the reconciler keeps between passes, in SQL, under this host's name.
static KEPT: KeptTable = KeptTable {
    select: "SELECT value FROM data_job_sync_follow WHERE name = $1",
    upsert: "INSERT INTO data_job_sync_follow (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    delete: "DELETE FROM data_job_sync_follow WHERE name = $1",
};

/// Jobs held back by their failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HeldBack {
    /// Waiting for their backoff to end.
    pub(crate) backing_off: u32,
    /// Parked until their desired spec changes.
    pub(crate) parked: u32,
}

/// What a pass works on, and what to keep once it acted.
pub(crate) struct Gathered {
    /// The jobs and orphans to decide on.
    pub(crate) world: World,
    /// Jobs whose CronJobs could not be read: they fail this pass and back off.
    pub(crate) unread: BTreeMap<String, KubeError>,
    /// Whether this is a full pass.
    pub(crate) full: bool,
    /// Jobs held back by a failure that this pass does not visit.
    pub(crate) held_back: HeldBack,
    /// Milliseconds spent reading SQL.
    pub(crate) load_ms: u64,
    /// Milliseconds spent reading the cluster.
    pub(crate) list_ms: u64,
}

/// Gathers what this pass visits: a full pass when `full` asks for one or one is due (see the
/// module documentation), else the changes since the last pass. `checkpoint` is called between
/// LIST pages (the Lease is renewed there). `Err` when nothing could be read. The [`Pass`] is
/// given to [`finish`] once the pass acted.
pub(crate) fn gather<'a>(
    host: &'a dyn Host,
    settings: &Settings,
    kube: &'a dyn Kube,
    full: bool,
    checkpoint: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(Gathered, Pass<'a>), String> {
    let kept = Kept::new(host, &KEPT, &settings.instance_id);
    let mut pass = Pass::begin(host, kept, "data-jobs sync", settings.full_resync_ms, full);
    if !pass.is_full() {
        match on_changes(host, settings, kube, &mut pass) {
            Ok(gathered) => return Ok((gathered, pass)),
            Err(why) => pass.go_full(why),
        }
    }
    let gathered = full_pass(host, settings, kube, &mut pass, checkpoint)?;
    Ok((gathered, pass))
}

/// Bookmarks first, then every row and every managed CronJob.
fn full_pass(
    host: &dyn Host,
    settings: &Settings,
    kube: &dyn Kube,
    pass: &mut Pass<'_>,
    checkpoint: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Gathered, String> {
    let started = host.now_ms();
    if let Err(e) = pass.mark(&cronjobs(kube, settings)) {
        host.log(
            Level::Warn,
            &format!("data-jobs sync: cannot follow the CronJobs' changes, so the next pass is full too: {e}"),
        );
    }
    if let Err(e) = pass.mark(&feed::desired(host)) {
        host.log(
            Level::Warn,
            &format!("data-jobs sync: cannot read the desired-state feed, so the next pass is full too: {e}"),
        );
    }
    let mut world = World {
        items: items::load_all(host)?,
        ..World::default()
    };
    let listed_at = host.now_ms();
    let mut token = None;
    loop {
        let page = items::list_page(
            kube,
            settings,
            model::MANAGED_SELECTOR.to_string(),
            token.take(),
        )
        .map_err(|e| format!("listing the managed CronJobs failed: {e}"))?;
        for obj in page.items {
            world.add_live(obj);
        }
        checkpoint()?;
        // While listing, the total is what is known so far: rows loaded and CronJobs seen.
        let seen = world.items.len() + world.orphans.len();
        host.progress(0, u64::try_from(seen).unwrap_or(u64::MAX));
        match page.continue_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    Ok(Gathered {
        world,
        unread: BTreeMap::new(),
        full: true,
        held_back: HeldBack::default(),
        load_ms: u64::try_from(listed_at - started).unwrap_or(0),
        list_ms: u64::try_from(host.now_ms() - listed_at).unwrap_or(0),
    })
}

/// The pass between full passes.
fn on_changes(
    host: &dyn Host,
    settings: &Settings,
    kube: &dyn Kube,
    pass: &mut Pass<'_>,
) -> Result<Gathered, WhyFull> {
    let started = pass.started_ms();
    // Jobs whose CronJobs are read before deciding.
    let mut read: BTreeSet<String> = pass.changes(&feed::desired(host))?.into_iter().collect();
    let backoff = BackoffTable::new(host, RECONCILER);
    read.extend(backoff.due(started).map_err(WhyFull::Kept)?);

    // The CronJobs' changes: every one of each job's, and the last one per CronJob name (which
    // alone says whether a CronJob is an orphan now).
    let listed_at = host.now_ms();
    let mut carried: BTreeMap<String, Vec<Change>> = BTreeMap::new();
    let mut last: BTreeMap<String, Change> = BTreeMap::new();
    for change in pass.changes(&cronjobs(kube, settings))? {
        if let Some(uid) = change.object.label(model::JOB_UID_LABEL) {
            carried
                .entry(uid.to_string())
                .or_default()
                .push(change.clone());
        }
        last.insert(change.object.target.name.clone(), change);
    }
    let mut world = World::default();
    for (name, change) in last {
        if change.object.label(model::JOB_UID_LABEL).is_some() {
            continue;
        }
        // The job whose CronJob this was, if its JOB_UID_LABEL was edited away.
        let owners = host
            .query(
                "SELECT job_uid FROM actual_data_job_deployment WHERE cronjob_name = $1",
                &[name.as_str().into()],
            )
            .map_err(WhyFull::Kept)?;
        read.extend(
            owners
                .iter()
                .filter_map(|r| r.first())
                .map(|v| v.text().to_string()),
        );
        if change.change_type != ChangeType::Deleted {
            world.orphans.push(Live::of(change.object, None));
        }
    }

    let changed_at = host.now_ms();
    let uids: Vec<String> = read
        .iter()
        .chain(carried.keys())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let loaded = items::load_some(host, &uids).map_err(|e| WhyFull::Kept(SqlError::Failed(e)))?;
    let loaded_at = host.now_ms();
    // The jobs held back that this pass does not visit, so the report still counts them.
    let held = backoff.held_back(started).map_err(WhyFull::Kept)?;
    let mut held_back = HeldBack::default();
    let visited = |uid: &str| uids.binary_search_by(|v| v.as_str().cmp(uid)).is_ok();
    for (_, failures) in held.iter().filter(|(uid, _)| !visited(uid)) {
        match failures.parked_on {
            Some(_) => held_back.parked += 1,
            None => held_back.backing_off += 1,
        }
    }
    let mut unread = BTreeMap::new();
    let to_read: Vec<(String, Item)> = loaded
        .into_iter()
        .filter(|(uid, item)| {
            let changes = carried.remove(uid).unwrap_or_default();
            read.contains(uid) || !settled(item, &changes)
        })
        .collect();
    if to_read.len() > usize::try_from(settings.page_size).unwrap_or(usize::MAX) {
        // One LIST per job would cost more than the pages of a full pass.
        return Err(WhyFull::Dearer(format!(
            "{} jobs changed (more than a LIST page holds)",
            to_read.len()
        )));
    }
    for (uid, mut item) in to_read {
        match items::list_of_job(kube, settings, &uid) {
            Ok(objects) => {
                for obj in objects {
                    let live = Live::of(obj, item.actual.as_ref());
                    item.live.push(live);
                }
                world.items.insert(uid, item);
            }
            Err(e) => {
                unread.insert(uid.clone(), e);
                world.items.insert(uid, item);
            }
        }
    }
    Ok(Gathered {
        world,
        unread,
        full: false,
        held_back,
        load_ms: u64::try_from((listed_at - started) + (loaded_at - changed_at)).unwrap_or(0),
        list_ms: u64::try_from((changed_at - listed_at) + (host.now_ms() - loaded_at)).unwrap_or(0),
    })
}

/// Whether the CronJob changes of a job need no visit: either the job left nothing in SQL and
/// every change is a CronJob going away, or each change shows the very CronJob the actual row
/// records, under the desired name, its spec unchanged since it was applied and annotated with
/// the desired hash, not being deleted, and the job not backing off. A status update is such a
/// change.
fn settled(item: &Item, changes: &[Change]) -> bool {
    if item.desired.is_none() && item.actual.is_none() && item.state.is_none() {
        return changes.iter().all(|c| c.change_type == ChangeType::Deleted);
    }
    let (Some(d), Some(a), None) = (&item.desired, &item.actual, &item.state) else {
        return false;
    };
    let name = model::cronjob_name(&d.team, &d.job_name);
    a.hash == d.hash
        && changes.iter().all(|c| {
            let o = &c.object;
            c.change_type != ChangeType::Deleted
                && o.metadata.deletion_timestamp.is_none()
                && o.target.name == name
                && a.recorded(
                    &o.metadata.uid,
                    &o.metadata.resource_version,
                    o.metadata.generation,
                )
                && o.annotation(model::HASH_ANNOTATION) == Some(d.hash.as_str())
        })
}

/// Keeps, once the pass acted, what the next pass starts from. A pass that left work for later
/// (`deferred`) makes the next pass full, which finds that work again. A full pass then prunes
/// the desired-state feed up to where it started.
pub(crate) fn finish(host: &dyn Host, pass: Pass<'_>, deferred: bool) {
    let pruned_upto = pass
        .is_full()
        .then(|| {
            pass.bookmark(&feed::desired(host))
                .and_then(|r| r.parse().ok())
        })
        .flatten();
    pass.finish(if deferred {
        Outcome::Deferred
    } else {
        Outcome::Done
    });
    if let Some(revision) = pruned_upto
        && let Err(e) = crate::feed::prune(host, revision)
    {
        host.log(
            Level::Warn,
            &format!("data-jobs sync: cannot prune the desired-state feed: {e}"),
        );
    }
}
