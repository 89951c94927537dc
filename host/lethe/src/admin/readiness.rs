//! `/readyz`'s checks: the start's steps as they finish, the database's `SELECT 1` and the
//! cluster's `/version` (a supported Kubernetes), reported in kube-apiserver's words.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::denials;

/// How long one `/readyz` probe of the database or the cluster may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A start-up step `/readyz` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Compiling and pre-linking the manifest's components.
    Components,
    /// Applying the manifest's `kubernetes_manifests` (embedded cluster only).
    Manifests,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Components => "components",
            Step::Manifests => "manifests",
        }
    }
}

/// How far a step has come.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Progress {
    Pending(String),
    Done,
    Failed(String),
}

/// What `/readyz` checks: the start-up steps as they complete, and the database and cluster once
/// they are known.
#[derive(Debug)]
pub struct Readiness {
    steps: Mutex<Vec<(Step, Progress)>>,
    databases: Mutex<Vec<lethe_sql::Database>>,
    cluster: OnceLock<lethe_kube::Cluster>,
    denials: Arc<denials::Denials>,
    shutting_down: std::sync::atomic::AtomicBool,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new()
    }
}

impl Readiness {
    /// Every step pending, no database or cluster yet.
    pub fn new() -> Readiness {
        Readiness {
            steps: Mutex::new(vec![
                (Step::Components, Progress::Pending("starting".into())),
                (Step::Manifests, Progress::Pending("starting".into())),
            ]),
            databases: Mutex::default(),
            cluster: OnceLock::new(),
            denials: Arc::default(),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Where the components' capabilities tell of privileged calls the cluster refused: the
    /// `permissions` check fails while one has not succeeded since.
    pub fn denials(&self) -> &Arc<denials::Denials> {
        &self.denials
    }

    /// The host is shutting down: from now on the `shutdown` check fails, as kube-apiserver's
    /// does, so that load balancers stop sending requests while the host still serves them.
    pub fn shut_down(&self) {
        self.shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn set(&self, step: Step, progress: Progress) {
        let mut steps = self.steps.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = steps.iter_mut().find(|(s, _)| *s == step) {
            entry.1 = progress;
        }
    }

    /// `step` is under way: `doing` says what it does now.
    pub fn pending(&self, step: Step, doing: impl Into<String>) {
        self.set(step, Progress::Pending(doing.into()));
    }

    /// `step` has completed.
    pub fn done(&self, step: Step) {
        self.set(step, Progress::Done);
    }

    /// `step` has failed for good (the host is about to exit).
    pub fn failed(&self, step: Step, why: impl Into<String>) {
        self.set(step, Progress::Failed(why.into()));
    }

    /// Probes `database` (one label's) from now on, beside any others.
    pub fn watch_database(&self, database: &lethe_sql::Database) {
        self.databases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(database.clone());
    }

    /// Probes `cluster` from now on.
    pub fn watch_cluster(&self, cluster: &lethe_kube::Cluster) {
        let _ = self.cluster.set(cluster.clone());
    }

    /// The cluster it probes, once known.
    pub fn cluster(&self) -> Option<&lethe_kube::Cluster> {
        self.cluster.get()
    }

    /// Runs every check; `(ready, report)` with one line per check, each failure with its
    /// reason.
    pub async fn check(&self) -> (bool, String) {
        report(&self.checks().await, true, &[])
    }

    /// Runs every check: each check's name and outcome, in order.
    pub(super) async fn checks(&self) -> Vec<(&'static str, Result<(), String>)> {
        let steps = self
            .steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut lines = Vec::new();
        let mut line = |name: &'static str, result: Result<(), String>| lines.push((name, result));
        let outcome = |p: &Progress| match p {
            Progress::Done => Ok(()),
            Progress::Pending(doing) => Err(format!("not yet: {doing}")),
            Progress::Failed(why) => Err(why.clone()),
        };
        if let Some((_, p)) = steps.iter().find(|(s, _)| *s == Step::Components) {
            line(Step::Components.name(), outcome(p));
        }
        let databases = self
            .databases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if !databases.is_empty() {
            let mut probed = Ok(());
            for db in &databases {
                if let Err(why) = probe_database(db).await {
                    probed = Err(format!("{}: {why}", db.location()));
                    break;
                }
            }
            line("database", probed);
        }
        if let Some(cluster) = self.cluster.get() {
            line("cluster", probe_cluster(cluster).await);
            line("permissions", self.denials.check());
        }
        if let Some((_, p)) = steps.iter().find(|(s, _)| *s == Step::Manifests) {
            line(Step::Manifests.name(), outcome(p));
        }
        let shutting_down = self.shutting_down.load(std::sync::atomic::Ordering::SeqCst);
        line(
            "shutdown",
            match shutting_down {
                false => Ok(()),
                true => Err("process is shutting down".into()),
            },
        );
        lines
    }
}

/// Whether every check passed, and the text of the report: kube-apiserver's `[+]name ok` /
/// `[-]name failed: reason` lines and a verdict, with each reason given when `reasons` and
/// `reason withheld` otherwise.
pub(super) fn report(
    lines: &[(&str, Result<(), String>)],
    reasons: bool,
    excluded: &[&str],
) -> (bool, String) {
    let ready = lines
        .iter()
        .all(|(name, result)| result.is_ok() || excluded.contains(name));
    let mut text = String::new();
    for (name, result) in lines {
        match result {
            _ if excluded.contains(name) => text.push_str(&format!("[+]{name} excluded: ok\n")),
            Ok(()) => text.push_str(&format!("[+]{name} ok\n")),
            Err(why) if reasons => text.push_str(&format!("[-]{name} failed: {}\n", one_line(why))),
            Err(_) => text.push_str(&format!("[-]{name} failed: reason withheld\n")),
        }
    }
    text.push_str(if ready {
        "readyz check passed\n"
    } else {
        "readyz check failed\n"
    });
    (ready, text)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn probe_database(db: &lethe_sql::Database) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, db.query("SELECT 1", &[])).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

async fn probe_cluster(cluster: &lethe_kube::Cluster) -> Result<(), String> {
    let client = cluster.privileged();
    match tokio::time::timeout(PROBE_TIMEOUT, client.server_version()).await {
        Ok(Ok(version)) => supported(&version),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// The oldest Kubernetes lethe and `deploy/` support, as `(major, minor)`: the first with
/// `batch/v1` CronJobs and `policy/v1` PodDisruptionBudgets.
pub const OLDEST_KUBERNETES: (u32, u32) = (1, 21);

/// Whether a server whose `gitVersion` is `version` (`v1.32.0`, `v1.29.4-eks-1`, `v1.30.2+k3s1`)
/// is one lethe supports. A version that does not read as `v<major>.<minor>` is let through:
/// the server answered, and its API discovery is what lethe relies on.
fn supported(version: &str) -> Result<(), String> {
    let mut numbers = version.trim_start_matches('v').split(['.', '-', '+']);
    let mut next = || numbers.next().and_then(|n| n.parse::<u32>().ok());
    match (next(), next()) {
        (Some(major), Some(minor)) if (major, minor) < OLDEST_KUBERNETES => Err(format!(
            "Kubernetes {version} is older than v{}.{}, the oldest lethe supports",
            OLDEST_KUBERNETES.0, OLDEST_KUBERNETES.1
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn servers_older_than_the_oldest_supported_are_named() {
        for ok in [
            "v1.32.0",
            "v1.21.0",
            "v1.29.4-eks-1",
            "v1.30.2+k3s1",
            "v2.0.0",
            "dev",
            "",
        ] {
            assert_eq!(supported(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            supported("v1.20.15"),
            Err("Kubernetes v1.20.15 is older than v1.21, the oldest lethe supports".into())
        );
        assert!(supported("v1.19.0-gke.1").is_err());
    }

    #[tokio::test]
    async fn readiness_names_what_is_not_ready_until_every_step_is_done() {
        let r = Readiness::new();
        let (ready, report) = r.check().await;
        assert!(!ready);
        assert!(
            report.contains("[-]components failed: not yet: starting"),
            "{report}"
        );
        r.done(Step::Components);
        r.pending(Step::Manifests, "applying crds.json");
        let (ready, report) = r.check().await;
        assert!(!ready);
        assert!(report.contains("[+]components ok"), "{report}");
        assert!(
            report.contains("[-]manifests failed: not yet: applying crds.json"),
            "{report}"
        );
        r.done(Step::Manifests);
        let (ready, report) = r.check().await;
        assert!(ready, "{report}");
        assert!(report.contains("[+]shutdown ok"), "{report}");
        assert!(report.ends_with("readyz check passed\n"), "{report}");
        r.shut_down();
        let (ready, report) = r.check().await;
        assert!(!ready);
        assert!(
            report.contains("[-]shutdown failed: process is shutting down"),
            "{report}"
        );
        let r = Readiness::new();
        r.done(Step::Components);
        r.done(Step::Manifests);
        r.failed(Step::Components, "component `x`:\n  cannot compile");
        let (ready, report) = r.check().await;
        assert!(!ready);
        assert!(
            report.contains("[-]components failed: component `x`: cannot compile"),
            "{report}"
        );
    }

    #[test]
    fn a_brief_report_names_the_failing_checks_but_withholds_why() {
        let lines = [
            ("components", Ok(())),
            (
                "database",
                Err("password authentication failed for user \"lethe\"".into()),
            ),
        ];
        let (ready, brief) = report(&lines, false, &[]);
        assert!(!ready);
        assert_eq!(
            brief,
            "[+]components ok\n[-]database failed: reason withheld\nreadyz check failed\n"
        );
        let (_, full) = report(&lines, true, &[]);
        assert!(
            full.contains("[-]database failed: password authentication failed"),
            "{full}"
        );
    }

    #[test]
    fn an_excluded_check_is_listed_but_does_not_decide() {
        let lines = [
            ("components", Ok(())),
            ("permissions", Err("component `hostile`: forbidden".into())),
        ];
        let (ready, text) = report(&lines, true, &["permissions"]);
        assert!(ready, "{text}");
        assert_eq!(
            text,
            "[+]components ok\n[+]permissions excluded: ok\nreadyz check passed\n"
        );
        let lines = [
            ("components", Err("still compiling".into())),
            ("permissions", Ok(())),
        ];
        assert!(
            !report(&lines, true, &["permissions"]).0,
            "only the excluded one is left out"
        );
    }

    #[tokio::test]
    async fn a_database_that_answers_is_ready() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db =
            lethe_sql::Database::open(&format!("sqlite:{}", dir.path().join("r.db").display()))
                .await
                .expect("database");
        let r = Readiness::new();
        r.done(Step::Components);
        r.done(Step::Manifests);
        r.watch_database(&db);
        let (ready, report) = r.check().await;
        assert!(ready, "{report}");
        assert!(report.contains("[+]database ok"), "{report}");
    }
}
