//! lethe's deterministic simulator.
//!
//! One seed is four worlds, run one after the other, step by step: the data-jobs world, the CF
//! world, the Korifi world (lethe's job status in front of objects a simulated Korifi owns,
//! `korifi.rs`, which lists its own invariants) and the keeper world (the reconciler template on
//! the guest SDK's controller runtime, `keeper.rs`, which lists its own). In each, a seeded generator picks at every step which actor moves and how; invariants
//! are checked after every step, and once the clients, the hostile user and the faults stop, the
//! world must converge within a bounded number of passes. The same seed gives the same trace,
//! byte for byte: a world has no wall clock, no threads and no hash-map order (the cluster, the
//! hosts' clocks and their uuids are all functions of the seed).
//!
//! # What runs
//!
//! lethe's **real logic** — the data-jobs API and reconciler (`data_jobs_core::api::handle`,
//! `data_jobs_core::sync::tick_with`), the CF API, job status and reconciler
//! (`cf_core::api::handle`, `cf_core::jobs::handle`, `cf_core::follow::pass_on_changes` with
//! `cf_core::reconcile::load_backoff`) — through the capability traits of the one guest SDK, against
//! `lethe_guest::fake`: the in-memory cluster the component crates' tests use (uids,
//! resourceVersions, guarded replaces, uid-preconditioned deletes, finalizers and the
//! deletionTimestamp, namespaces that wait for the namespace controller and refuse new content
//! while terminating, label selectors, pagination, watches as a change feed, injectable faults)
//! and SQLite in memory with each component's own migrations. The wasm binaries are not run: the
//! logic inside them is the same code, and running it natively keeps a schedule at a fraction of
//! a millisecond, which is what lets thousands of seeds run in every CI job. The namespace
//! controller is stepped by the schedule, not run on a thread.
//!
//! **Why `lethe_guest::fake` and not the embedded cluster's store.** The issue asks to share the
//! cluster model with `host/apiserver` where practical. It is not practical yet: that store
//! stamps objects with the wall clock, wakes watchers through tokio channels and is reached
//! through an async HTTP front, so a world built on it would need a runtime and would not replay
//! byte for byte; the component logic calls the synchronous `Kube` trait, which the fake
//! implements directly. The fake is not a second model invented for the simulator: it is the
//! one the component crates' unit tests already run against, and every rule the simulator
//! needed was added there (a new resourceVersion on the deletion mark, no new content in a
//! terminating namespace, 404 into a missing one, lagging reads, timed-out writes), so those
//! tests gain them too.
//!
//! **What the simulated cluster leaves out, and why no invariant can tell.** Owner-reference
//! garbage collection: every delete lethe makes is `Background` (the owner goes at once, its
//! finalizers aside), lethe sets no ownerReferences and never reads an owner's dependents (a
//! CronJob's Jobs and Pods), so the collector's work happens outside everything lethe observes.
//! The one way it could reach lethe, a user pointing an ownerReference of lethe's CronJob or
//! namespace at an owner that then goes, ends in a `Background` delete of that object by
//! someone other than lethe: exactly the hostile user's hand deletes, which are modelled. Stale reads by the
//! reconcilers: they GET and LIST without a resourceVersion, which Kubernetes serves from etcd
//! with a quorum read, never from a cache; what may be late for them is the change feed (lost
//! watches, which are modelled). The CF API's reads are lagged, since the first poll in the
//! deletion seed met exactly that.
//!
//! # Actors
//!
//! * **Clients**. Data-jobs clients create jobs, deploy them (new versions, enabled or not),
//!   delete deployments and jobs, and re-create the same names. CF clients create orgs and spaces
//!   (the same names again, too) and delete them. Both poll the deletion jobs they got, as the cf
//!   CLI does, and call the API between any two capability calls of a pass, so a pass sees the
//!   desired state change under it, as when an API request and a pass run side by side. Each
//!   org and space the API makes has a **member**: a token whose only rights are in its
//!   namespace, which go when the namespace controller empties it (as RoleBindings do, the
//!   cascade of the first seed's early COMPLETE); members poll the deletion jobs of their org or
//!   space alongside the client.
//! * **A hostile user**. In the data-jobs world it hand-edits lethe's CronJobs, deletes them,
//!   adds a foreign finalizer to them, creates CronJobs of its own (under the names lethe's jobs
//!   want, too) and labelled orphans; between two calls of a pass, so between a read of lethe's
//!   and its write, it edits a CronJob's schedule, adds a label or an annotation of its own, or
//!   puts its finalizer on it. In the CF world it makes orgs by hand over namespaces of
//!   its own, squats the namespace names lethe's orgs and spaces need, deletes lethe's
//!   namespaces by hand, and puts its finalizer first or last on orgs and spaces (also between
//!   two calls of a pass). In one seed in eight, in both worlds, it also has rights to the
//!   reconciler's Lease: between passes it replaces lethe's Lease with one of its own (without
//!   lethe's `managed-by` label), forges lethe's (its label kept, held by `intruder` for 15 s),
//!   or takes its own away.
//! * **1–3 lethe hosts** running passes, competing for the reconciler's Lease; any pass may
//!   **crash** between two of its capability calls (what it committed stays), and one in eight
//!   is **paused** between two calls for longer than its Lease lasts (a stopped process, a long
//!   GC, a migrated VM) while another host takes the Lease over and runs a pass.
//! * **A fault injector**: failing verbs (the fake answers `unavailable`, as the host does once
//!   its retries are spent); storms of 429 whose `Retry-After` the hosts wait out on the virtual
//!   clock, as lethe's `kube` capability does, up to ten per call; creates whose answer is lost
//!   and replaces, patches and deletes that time out, each after it was applied or before; lost
//!   watches; (data jobs) objects momentarily hidden from a read; and (CF) an API whose reads lag
//!   up to 4 s behind the writes, as the first poll in the deletion seed met: changes seen late,
//!   deletions seen late, never an object hidden.
//! * **The namespace controller** (CF) and **the clock**, advanced by the schedule.
//!
//! # Invariants (after every step)
//!
//! Data jobs:
//! 1. A lethe pass never changes or deletes an object it does not own (the hostile user's
//!    CronJobs, which carry none of lethe's labels).
//! 2. A lethe pass never deletes a CronJob whose desired deployment (same job uid) exists.
//! 3. A deletion job is never `COMPLETE` while the job's CronJob exists, and no CronJob of a
//!    job is made once its deletion was seen `COMPLETE`.
//! 4. The first poll after a `202` is never 404.
//! 5. A foreign finalizer is never removed by lethe.
//! 6. No two hosts run a pass while the other's Lease is valid; a host paused past its Lease
//!    acts, once it resumes, on at most the one job it was in the middle of: it changes the
//!    CronJobs of no other job, nor even *sends* a write for one (a delete of an orphan the new
//!    leader already deleted is refused by the cluster, but was still made without the Lease).
//! 7. A pass that begins with a Lease lethe did not write under its name runs nothing and
//!    leaves that Lease as it was (a forged one is invariant 6's: no host runs while `intruder`
//!    holds it).
//!
//! CF:
//! 1. A lethe pass never changes or deletes a namespace that is not its own.
//! 2. An org or space holding a foreign finalizer keeps it (and so is never gone).
//! 3. lethe deletes a namespace it made only once its owner is being deleted, and a space only
//!    once its org is (or a client asked).
//! 4. A deletion job is never `COMPLETE` while its org or space exists.
//! 5. The first poll after a `202` is never 404.
//! 6. A host paused past its Lease acts, once it resumes, on at most the one org it was in the
//!    middle of (with its spaces, namespaces and name claims).
//! 7. As data jobs' 6 and 7: no host runs while another's (or `intruder`'s) Lease is valid, and
//!    a Lease lethe did not write stops every pass and is left as it was.
//! 8. The deletion job of an org or space that exists and is not being deleted is 404 to the
//!    admin, who may see it, and `COMPLETE` to a stranger, who may not (or 503 while the cluster
//!    fails): SECURITY.md, "What a job poll reveals". (The Korifi world polls its instances' and
//!    roles' jobs the same way, its invariant 7.)
//! 9. Races of one name: two creates of one name, the second arriving between two calls of the
//!    first, while its claim may be in flight; the first crashing there or losing its answer,
//!    and sent again at once. After each: no two orgs (or spaces of one org) bear the name,
//!    every `201` names an object that bears it, and no answer is a 5xx but a 503.
//!
//! # Liveness: the quiet period
//!
//! Every world ends quiet: the faults heal, the clients, the hostile user and its Lease stop,
//! and an administrator removes what the hostile user put in the way, except half of its
//! finalizers (on CronJobs, orgs and spaces), which stay. Then, for at most 30 rounds
//! (`world::QUIESCENT_PASSES`), the clock moves 700 s (past every Lease, backoff ceiling and
//! resync interval), the namespace controller runs and a host runs a full pass, and every
//! outstanding deletion job is polled. The world must converge, or the seed fails with what did
//! not:
//!
//! - data jobs: every desired deployment has its CronJob, carrying its uid and hash and running
//!   the desired spec (a hand edit of the schedule, the image or the fixed fields is put back),
//!   unless an earlier CronJob of that name is being deleted and held by a finalizer that stayed;
//!   no CronJob lethe manages is left without a deployment but one held so; every deletion job is
//!   `COMPLETE` but those whose CronJob is held so (which invariant 3 keeps from `COMPLETE`).
//! - CF: every org and space not being deleted has lethe's finalizer and its own namespace, its
//!   `Ready` condition `True` at its current generation and nothing `Blocked` or `Deleting`; none
//!   is left being deleted, no namespace lethe made outlives its owner; every name claim's holder
//!   exists and bears the name, and every name an org or space bears is claimed; and every
//!   deletion job is `COMPLETE`. Except what a finalizer that stayed holds: of an org or space
//!   being deleted that lethe had taken on (its finalizer was on it after a pass), lethe's own
//!   part must be done (its finalizer off, its namespace gone, `Blocked` `True`), and its
//!   deletion job is not `COMPLETE`; an org waits for a held space of its, and a namespace being
//!   deleted with a held space in it waits too.
//! - Korifi: every deletion job is `COMPLETE` once Korifi lets the objects go.
//!
//! The quiet period's rules were checked by weakening what they guard (`sim/mutate.py`'s
//! `repair-drift`, `head-of-line`, `cf-claim-sweep`, `cf-claim-backfill`, `cf-conditions-ready`,
//! `cf-release-held`): each passed the first 2,000 seeds before these checks and fails one now.

#![warn(missing_docs)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A world allocates and frees many small JSON trees, strings and rows at every step, on every
/// worker thread at once; mimalloc's per-thread heaps spend far less time on that than the system
/// allocator (BENCHMARKS.md, "the simulator's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cf;
mod data_jobs;
mod foreign_lease;
mod glance;
mod host;
mod keeper;
mod korifi;
mod world;

/// What one seed's run found.
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Steps taken in both worlds, the quiescent passes included.
    pub steps: usize,
    /// One line per step: who moved, what they did, what came of it.
    pub trace: Vec<String>,
    /// The first invariant found broken, if any.
    pub violation: Option<String>,
}

/// Runs the worlds of `seed` for `steps` steps each (each only if the ones before kept every
/// invariant), each then quiescing.
pub fn run(seed: u64, steps: usize) -> Outcome {
    let (mut trace, mut violation) = data_jobs::play(seed, steps);
    for world in [cf::play, korifi::play, keeper::play] {
        if violation.is_some() {
            break;
        }
        let (more, found) = world(seed, steps);
        trace.extend(more);
        violation = found;
    }
    Outcome {
        seed,
        steps: trace.len(),
        trace,
        violation,
    }
}

/// The fewest steps (at most `steps`) after which the world of `seed` still breaks an invariant,
/// with that run: a failing schedule shrunk to its shortest prefix that fails (the quiescence
/// after it included). `None` if the seed passes.
pub fn shrink(seed: u64, steps: usize) -> Option<(usize, Outcome)> {
    shortest_failing(steps, |k| run(seed, k))
}

/// The smallest `k` in `0..=steps` whose `run(k)` breaks an invariant, with that run.
fn shortest_failing(steps: usize, run: impl Fn(usize) -> Outcome) -> Option<(usize, Outcome)> {
    (0..=steps).find_map(|k| {
        let outcome = run(k);
        outcome.violation.is_some().then_some((k, outcome))
    })
}

/// What a run of many seeds found.
pub struct Summary {
    /// Seeds run (all of them, unless one failed: then the run stops early).
    pub seeds: u64,
    /// Steps taken in all of them.
    pub steps: usize,
    /// The lowest failing seed among those run, with its trace.
    pub failure: Option<Outcome>,
}

/// Runs seeds `first..first + count`, `steps` steps each, on `threads` threads. Each seed's run
/// is the same whatever the threads do; a failure stops the others from taking new seeds.
pub fn run_seeds(first: u64, count: u64, steps: usize, threads: usize) -> Summary {
    let next = AtomicU64::new(first);
    let end = first.saturating_add(count);
    let (ran, total_steps) = (AtomicU64::new(0), AtomicUsize::new(0));
    let failed: Mutex<Option<Outcome>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end || failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                        return;
                    }
                    let outcome = run(seed, steps);
                    ran.fetch_add(1, Ordering::Relaxed);
                    total_steps.fetch_add(outcome.steps, Ordering::Relaxed);
                    if outcome.violation.is_some()
                        && let Ok(mut first) = failed.lock()
                        && first.as_ref().is_none_or(|f| f.seed > outcome.seed)
                    {
                        *first = Some(outcome);
                    }
                }
            });
        }
    });
    Summary {
        seeds: ran.into_inner(),
        steps: total_steps.into_inner(),
        failure: failed.into_inner().ok().flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(steps: usize, fails: bool) -> Outcome {
        Outcome {
            seed: 7,
            steps,
            trace: vec![format!("{steps} steps")],
            violation: fails.then(|| "broken".to_string()),
        }
    }

    #[test]
    fn a_failing_schedule_shrinks_to_its_shortest_failing_prefix() {
        let (k, shrunk) = shortest_failing(200, |k| outcome(k, k >= 37)).expect("fails");
        assert_eq!(k, 37);
        assert_eq!(shrunk.trace, vec!["37 steps".to_string()]);
        // Not every longer prefix need fail: the first that does is the one.
        let (k, _) = shortest_failing(200, |k| outcome(k, k == 12 || k > 150)).expect("fails");
        assert_eq!(k, 12);
        assert!(shortest_failing(200, |k| outcome(k, false)).is_none());
    }
}
