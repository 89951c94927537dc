//! The simulator as part of `cargo test`: thousands of seeded worlds (`LETHE_SIM_SEEDS`, default
//! 10,000), and 500 more of this commit's own, must keep every invariant and converge; a seed
//! must replay identically; and every guard `sim/mutate.py` weakens must still be in its file.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The repository's root, where `git` and `sim/mutate.py` run.
fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_seeded_world_keeps_the_invariants_and_converges() {
    let seeds = count("LETHE_SIM_SEEDS", 10_000);
    run_or_replay(0, seeds);
}

/// Besides the fixed seeds, every commit runs schedules of its own, from a range derived from
/// its hash (far past the fixed ones), so that CI explores new worlds on every run.
#[test]
fn seeds_of_this_commit_keep_the_invariants_too() {
    let root = repo_root();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(head) = head else {
        eprintln!(
            "not a git checkout: the commit's own seeds are not derived (the fixed ones still run)"
        );
        return;
    };
    let first = commit_seeds(&head);
    eprintln!("commit {head}: seeds {first}..");
    run_or_replay(first, count("LETHE_SIM_COMMIT_SEEDS", 500));
}

/// Where the seeds of commit `head` start: from its first 10 hex digits, past the first million
/// (the fixed seeds and the documented long runs).
fn commit_seeds(head: &str) -> u64 {
    let digits: String = head.chars().take(10).collect();
    1_000_000 + u64::from_str_radix(&digits, 16).unwrap_or(0)
}

/// `name` from the environment, or `default`.
fn count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `seeds` worlds from `first`; a failure is shrunk and panics with its replay command.
fn run_or_replay(first: u64, seeds: u64) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let summary = lethe_sim::run_seeds(first, seeds, 200, threads);
    if let Some(failure) = summary.failure {
        let (steps, failure) = lethe_sim::shrink(failure.seed, 200).unwrap_or((200, failure));
        let tail = failure.trace.len().saturating_sub(60);
        panic!(
            "seed {} broke an invariant: {}\nreplay: cargo run -p lethe-sim -- --seed {} --steps {steps}\n{}",
            failure.seed,
            failure.violation.unwrap_or_default(),
            failure.seed,
            failure.trace[tail..].join("\n")
        );
    }
    assert_eq!(summary.seeds, seeds);
}

/// Seeds that break an invariant when a bug the simulator found comes back (the first failing
/// seed of the world as it is now, with the fix undone: `python3 sim/mutate.py finalizers cf-sweep
/// cf-status-reread lease-orphans`; for `cf-lease-orphans`, the seed of the 10,000 that found it
/// when the CF world learned the in-pass pause, 18229 since the races and the live polls, from a
/// soak from seed 10,000; 72983, the soak seed that caught `lease-orphans` before the leader
/// invariant counted the writes a paused host sends), with what they found; each must keep
/// passing.
const REGRESSIONS: [(u64, &str); 8] = [
    (
        0,
        "reverting a hand edit replaced the CronJob without the finalizer someone else had added",
    ),
    (
        401,
        "a namespace lethe made (for a hand-made org, by a space create) outlived its org, deleted \
         before the reconciler had put its finalizer on it",
    ),
    (
        34,
        "a job poll by a member whose rights had gone with the namespace said COMPLETE at once on \
         a read that lagged behind the org's deletion, while the org still existed",
    ),
    (
        72983,
        "a data-jobs host paused past its Lease resumed and deleted orphaned CronJobs beside the \
         host that had taken the Lease over: the orphans were deleted without a Lease check (found \
         by the soak seed 78221, then 29467, each of which stopped failing when the schedules \
         moved: the hostile user's edits inside passes, then its hand on the Lease)",
    ),
    (
        121,
        "a data-jobs host paused past its Lease resumed and sent deletes for two orphans the new \
         leader had already deleted: refused by the cluster, but made without the Lease",
    ),
    (
        18229,
        "a CF host paused past its Lease resumed and deleted an orphaned name claim beside the \
         host that had taken the Lease over: the claims were deleted without a Lease check (found \
         by seed 6934, which stopped failing when the CF world learned the races of one name and \
         the polls of live resources' jobs)",
    ),
    (
        66619,
        "the reconciler template: a row parked on content the cluster rejected, then deleted, \
         stayed parked (its fingerprint ignored the deletion), so its row was never forgotten \
         (found by the keeper world's first soak)",
    ),
    (
        217873,
        "a space created through the API in an org being deleted, on a read that did not show the \
         deletion yet, made the org's namespace again after lethe had released the org, which \
         another's finalizer held: nothing deleted that namespace (found by a soak on \
         2026-12-08; a full pass now deletes the namespace of an object being deleted that lethe \
         no longer holds)",
    ),
];

#[test]
fn the_seeds_that_found_bugs_pass() {
    for (seed, found) in REGRESSIONS {
        let outcome = lethe_sim::run(seed, 200);
        assert!(
            outcome.violation.is_none(),
            "seed {seed} ({found}) fails again: {:?}",
            outcome.violation
        );
    }
}

#[test]
fn a_seed_replays_identically() {
    let first = lethe_sim::run(42, 200);
    let again = lethe_sim::run(42, 200);
    assert!(first.trace.len() >= 200, "{} steps", first.trace.len());
    assert_eq!(first.trace, again.trace);
    assert_eq!(first.violation, again.violation);
}

/// Every guard `sim/mutate.py` weakens is still in its file, once: a refactor that moves one
/// must move the mutation with it, or the simulator's teeth go unmeasured.
#[test]
fn every_mutation_still_finds_its_guard() {
    let root = repo_root();
    let check = std::process::Command::new("python3")
        .args(["sim/mutate.py", "--check"])
        .current_dir(&root)
        .output()
        .expect("python3 runs sim/mutate.py");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}
