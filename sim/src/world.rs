//! What both worlds share: the stage they play on (randomness, cluster, hosts, trace, faults),
//! how a step is rolled ([`Scenario`]), the request a client sends and how its answer is read,
//! and how a world that has quiesced is driven to convergence ([`Quiescent`]).

use lethe_guest::env::parse_rfc3339_ms;
use lethe_guest::fake::{FakeCluster, FakeHost};
use lethe_guest::{Request, Response};
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// What every world plays on: the schedule's randomness, the cluster, lethe's reconciler hosts
/// and its API host, the trace, the deletion jobs not yet seen COMPLETE by status path (`D`: what
/// the world remembers of one), and the cluster's 429s.
pub struct Stage<'w, 'a, D> {
    /// Every choice the schedule makes.
    pub rng: StdRng,
    /// The cluster.
    pub kube: &'a FakeCluster,
    /// lethe's instances that run reconciler passes.
    pub hosts: &'w [FakeHost<'a>],
    /// The host the clients' API calls go to.
    pub api: &'w FakeHost<'a>,
    /// What happened, line by line.
    pub trace: Vec<String>,
    /// Deletion jobs not yet seen COMPLETE, by status path.
    pub deletions: BTreeMap<String, D>,
    /// The cluster's 429s, which the reconciler hosts wait out.
    pub throttle: crate::host::Throttle,
    /// What each trace line starts with (the world's name, where traces are shown together).
    pub prefix: &'static str,
}

impl<'w, 'a, D> Stage<'w, 'a, D> {
    /// A stage with nothing traced, no deletion job and no 429 pending, whose trace lines start
    /// with `prefix`.
    pub fn new(
        rng: StdRng,
        kube: &'a FakeCluster,
        hosts: &'w [FakeHost<'a>],
        api: &'w FakeHost<'a>,
        prefix: &'static str,
    ) -> Self {
        Stage {
            rng,
            kube,
            hosts,
            api,
            trace: Vec::new(),
            deletions: BTreeMap::new(),
            throttle: crate::host::Throttle::default(),
            prefix,
        }
    }

    /// Which host runs the next pass (its index, and the host), and after how many capability
    /// calls it crashes: a full pass never does; any other one pass in 8 does, after up to
    /// `max_calls` calls.
    pub fn pick_pass(
        &mut self,
        full: bool,
        max_calls: u32,
    ) -> (usize, &'w FakeHost<'a>, Option<u32>) {
        let index = self.rng.random_range(0..self.hosts.len());
        let crash_after =
            (!full && self.rng.random_ratio(1, 8)).then(|| self.rng.random_range(0..max_calls));
        (index, &self.hosts[index], crash_after)
    }

    /// Injects the fault a roll of the schedule picks from `plan`, or the world's `own` where the
    /// roll falls past the plan's, and notes it.
    pub fn fault(
        &mut self,
        plan: &crate::host::faults::Plan,
        own: impl FnOnce(&FakeCluster, &mut StdRng) -> String,
    ) {
        let roll = self.rng.random_range(0..100);
        let line = plan
            .inject(self.kube, &mut self.rng, &self.throttle, roll)
            .unwrap_or_else(|| own(self.kube, &mut self.rng));
        self.note(&line);
    }

    /// Appends `line` to the trace, numbered, at the cluster's virtual time.
    pub fn note(&mut self, line: &str) {
        let line = format!("{}{line}", self.prefix);
        trace_line(&mut self.trace, self.kube.now.get(), &line);
    }

    /// Time passes on the cluster's clock, 0.1–30 s as the seed picks it, and is traced.
    pub fn let_time_pass(&mut self) {
        let ms = self.rng.random_range(100..30_000);
        self.kube.advance(ms);
        self.note(&format!("clock +{ms} ms"));
    }

    /// The status paths of the deletion jobs not seen `COMPLETE` yet.
    pub fn outstanding(&self) -> Vec<String> {
        self.deletions.keys().cloned().collect()
    }

    /// The path of one outstanding deletion job, as the seed picks it; nothing is drawn when
    /// there are none. A client polls the job it picks.
    pub fn pick_outstanding(&mut self) -> Option<String> {
        if self.deletions.is_empty() {
            return None;
        }
        let index = self.rng.random_range(0..self.deletions.len());
        self.deletions.keys().nth(index).cloned()
    }
}

/// Why a world failed: the invariant broken, in words.
pub type Failure = String;

/// Rounds allowed to converge once the clients, the hostile user and the faults have stopped.
pub const QUIESCENT_PASSES: usize = 30;

/// Appends `line` to a world's trace, numbered, at the virtual time `now_ms` counted from the
/// start of the world's clock.
fn trace_line(trace: &mut Vec<String>, now_ms: i64, line: &str) {
    let at = now_ms - FakeCluster::START_MS;
    trace.push(format!("{:>4} t={at}ms {line}", trace.len()));
}

/// Marks the trace lines of what an actor did while a pass ran (between two of its capability
/// calls) as such.
pub fn during_the_pass(lines: &mut [String]) {
    for l in lines {
        *l = format!("  during the pass: {l}");
    }
}

/// How host `host`'s pass ended, as the trace says it: `ran` words a pass that returned, a
/// simulated crash says after how many calls, and any other panic fails the world.
pub fn pass_outcome<T, E: std::fmt::Display>(
    outcome: &std::thread::Result<Result<T, E>>,
    crash_after: Option<u32>,
    host: usize,
    ran: impl FnOnce(&T) -> String,
) -> Result<String, Failure> {
    match outcome {
        Ok(Ok(done)) => Ok(ran(done)),
        Ok(Err(e)) => Ok(format!("error: {e}")),
        Err(payload) if payload.is::<crate::host::Crash>() => {
            Ok(format!("crashed after {} calls", crash_after.unwrap_or(0)))
        }
        Err(_) => Err(format!("host-{host}'s pass panicked")),
    }
}

/// A request as a client with bearer `token` sends it.
pub fn request(method: &str, path: &str, token: &str, body: Option<Json>) -> Request {
    Request {
        method: method.into(),
        path: path.into(),
        headers: vec![(
            "authorization".into(),
            format!("Bearer {token}").into_bytes(),
        )]
        .into(),
        body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        ..Default::default()
    }
}

/// What a client reads of an answer: its status, its JSON body and its `Location`.
pub fn answer(r: &Response) -> (u16, Json, Option<String>) {
    let location = r
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("location"))
        .map(|(_, v)| v.clone());
    (r.status, r.json_body().unwrap_or(Json::Null), location)
}

/// What the first poll of a deletion job said, made right after its `202` as the cf CLI makes it.
pub struct FirstPoll {
    /// The job's path (the `/v3/jobs/...` part of the `Location`).
    pub path: String,
    /// Whether it answered 200 with the state `COMPLETE`.
    pub complete: bool,
    /// Its trace line.
    pub line: String,
    /// Set when the poll was 404: the job a `202` named must be there at once.
    pub violation: Option<String>,
}

/// Polls the job `location` names once through `get` (a client's `GET`, answering its status,
/// body and `Location`).
pub fn first_poll(
    location: String,
    get: impl FnOnce(&str) -> (u16, Json, Option<String>),
) -> FirstPoll {
    let path = location
        .find("/v3/jobs/")
        .map(|i| location[i..].to_string())
        .unwrap_or(location);
    let (status, body, _) = get(&path);
    FirstPoll {
        line: format!("client polls {path}: {status} {}", body["state"]),
        violation: (status == 404)
            .then(|| format!("the first poll of {path} after its 202 was 404")),
        complete: status == 200 && body["state"] == "COMPLETE",
        path,
    }
}

/// What a poll of the deletion job of a resource that exists and is not being deleted must
/// answer (SECURITY.md, "What a job poll reveals"): to a caller who may see the resource, 404
/// (there is no deletion job for it); to one who may not, `COMPLETE`, as Korifi answers (nothing
/// of theirs is left, and its existence is not confirmed). A 503 is an answer too: a lookup the
/// failing cluster did not answer fails closed. `who` and the answer are for the failure's words.
pub fn live_resources_job(
    path: &str,
    who: &str,
    sees: bool,
    status: u16,
    body: &Json,
) -> Result<(), Failure> {
    let complete = status == 200 && body["state"] == "COMPLETE";
    match (sees, status) {
        (_, 503) | (true, 404) => Ok(()),
        (false, _) if complete => Ok(()),
        _ => Err(format!(
            "{who}, who {} the resource, polled {path} while it exists and is not being deleted, and was told {status} {body}",
            if sees { "may see" } else { "may not see" }
        )),
    }
}

/// lethe's reconciler hosts, `host-0` to `host-2`: one to three of them, as the seed picks.
pub fn reconciler_hosts<'a>(
    rng: &mut StdRng,
    mut host: impl FnMut(&str) -> FakeHost<'a>,
) -> Vec<FakeHost<'a>> {
    let count = rng.random_range(1..=3);
    (0..count).map(|i| host(&format!("host-{i}"))).collect()
}

/// A world the schedule drives: each step rolls a number below 100, and the world acts on it
/// (a pass, a client's request, the hostile user, a fault, time passing, ...).
pub trait Scenario: Quiescent {
    /// The schedule's randomness, which every roll draws from.
    fn rng(&mut self) -> &mut StdRng;
    /// Acts on one roll in `0..100`.
    fn step(&mut self, roll: u32) -> Result<(), Failure>;
    /// Stops the clients, the hostile user and the faults, then [`Quiescent::converge`]s.
    fn quiesce(&mut self) -> Result<(), Failure>;

    /// Plays `steps` rolls, then quiesces: the first invariant found broken, if one is.
    fn play(&mut self, steps: usize) -> Result<(), Failure> {
        for _ in 0..steps {
            let roll = self.rng().random_range(0..100);
            self.step(roll)?;
        }
        self.quiesce()
    }
}

/// A world after its clients, hostile user and faults stopped.
pub trait Quiescent {
    /// One round: time past every lease, backoff and resync interval, then a full pass (and
    /// whatever else the world steps, such as its controllers).
    fn settle(&mut self) -> Result<(), Failure>;
    /// The status paths of the deletion jobs not seen `COMPLETE` yet.
    fn outstanding(&self) -> Vec<String>;
    /// Polls one deletion job (checking what its answer claims).
    fn poll_one(&mut self, path: &str) -> Result<(), Failure>;
    /// How the cluster differs from what lethe should have made of it, if it does.
    fn divergence(&self) -> Option<String>;
    /// Whether the deletion job at `path` waits on something foreign that quiescence left in
    /// place (the hostile user's finalizer on what it deletes): it cannot be `COMPLETE`, and the
    /// rest must converge beside it.
    fn held_back(&self, path: &str) -> bool {
        let _ = path;
        false
    }

    /// Rounds until nothing diverges and every deletion job is `COMPLETE` but those
    /// [`Self::held_back`], at most [`QUIESCENT_PASSES`] of them.
    fn converge(&mut self) -> Result<(), Failure> {
        let mut last = String::new();
        for _ in 0..QUIESCENT_PASSES {
            self.settle()?;
            for path in self.outstanding() {
                self.poll_one(&path)?;
            }
            let left: Vec<String> = self
                .outstanding()
                .into_iter()
                .filter(|path| !self.held_back(path))
                .collect();
            match self.divergence() {
                None if left.is_empty() => return Ok(()),
                None => last = format!("deletion jobs not COMPLETE: {left:?}"),
                Some(d) => last = d,
            }
        }
        Err(format!(
            "no convergence after {QUIESCENT_PASSES} quiescent passes: {last}"
        ))
    }
}

/// The holder, renew time and duration of the Lease `namespace/name`, if there is one.
pub fn lease(kube: &FakeCluster, namespace: &str, name: &str) -> Option<(String, i64, i64)> {
    let lease = kube.object("Lease", namespace, name)?;
    let spec = &lease.json()["spec"];
    Some((
        spec["holderIdentity"].as_str()?.to_string(),
        parse_rfc3339_ms(spec["renewTime"].as_str()?)?,
        spec["leaseDurationSeconds"].as_i64()? * 1000,
    ))
}

/// The leader invariant: `host-<index>`, which `ran` a pass starting at `now`, did not do so
/// while `lease` (as read before the pass) was another host's and still valid.
pub fn one_leader(
    index: usize,
    ran: bool,
    lease: Option<(String, i64, i64)>,
    now: i64,
) -> Result<(), Failure> {
    match lease {
        Some((holder, renewed, duration))
            if ran && holder != format!("host-{index}") && now < renewed + duration =>
        {
            Err(format!(
                "two leaders: host-{index} ran while {holder}'s lease was valid until {}",
                renewed + duration
            ))
        }
        _ => Ok(()),
    }
}

/// Whether, and where, host `index`'s pass (one of `hosts`) is paused past its Lease while
/// another host takes over: the call it stops before (below `max_call`), the other host, and for
/// how long (past the 15 s Lease). One pass in 8, not a forced full one, and only beside another
/// host.
pub fn pause_plan(
    rng: &mut StdRng,
    hosts: usize,
    index: usize,
    full: bool,
    max_call: u32,
) -> Option<(u32, usize, i64)> {
    let others = hosts - 1;
    if full || others == 0 || !rng.random_ratio(1, 8) {
        return None;
    }
    let rival = (index + rng.random_range(1..=others)) % (others + 1);
    let at = rng.random_range(0..max_call);
    Some((at, rival, rng.random_range(15_001..=40_000)))
}

/// The trace lines of a pause: how long, before which call, what the other host's pass did
/// (`said`), and whether it took the Lease over.
pub fn pause_lines(ms: i64, at: u32, rival: usize, said: &str, took_over: bool) -> Vec<String> {
    let mut line = format!("paused {ms} ms before call {at}; meanwhile host-{rival}: {said}");
    if !took_over {
        line.push_str(" (no takeover)");
    }
    let mut lines = vec![line];
    during_the_pass(&mut lines);
    lines
}
