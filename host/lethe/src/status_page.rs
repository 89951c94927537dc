//! The status page (`/lethe/status` on the admin listener): what this host runs and what its
//! reconcilers last saw, as plain server-rendered HTML, readable without CSS or JavaScript.
//!
//! It shows the components with their routes and cron schedules; for each reconciler, whether
//! this host leads it (its last tick ran a pass) and its last report with every failure; and the
//! deletions in flight, with their age, state and why they are not done. Every value is
//! HTML-escaped: item names and failure reasons come from the cluster.
//!
//! [`render`] is a pure function of a [`StatusView`], so the page is unit-tested without a host.

use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::trigger::cron::{CronJob, TickOutcome};
use crate::trigger::reconcile::Pass;

/// What the page is built from: the application as loaded.
pub struct StatusSource {
    /// The application name from the manifest.
    pub app: String,
    /// `(route, component)` of every HTTP trigger.
    pub routes: Vec<(String, String)>,
    /// The cron triggers, whose last ticks the page reports.
    pub cron_jobs: Vec<Arc<CronJob>>,
    /// When the host started.
    pub started: DateTime<Utc>,
}

impl StatusSource {
    /// A snapshot of the page's content now.
    pub fn view(&self) -> StatusView {
        StatusView {
            app: self.app.clone(),
            now: Utc::now(),
            started: self.started,
            routes: self.routes.clone(),
            schedules: self
                .cron_jobs
                .iter()
                .map(|j| Schedule {
                    component: j.component_id().to_string(),
                    expression: j.expression().to_string(),
                    next: j.next_tick(),
                    last: j.last_tick().map(|t| (t.at, t.outcome)),
                })
                .collect(),
        }
    }
}

/// The content of the page at one instant.
#[derive(Debug, Clone)]
pub struct StatusView {
    /// The application name.
    pub app: String,
    /// When the view was taken.
    pub now: DateTime<Utc>,
    /// When the host started.
    pub started: DateTime<Utc>,
    /// `(route, component)` of every HTTP trigger.
    pub routes: Vec<(String, String)>,
    /// Every cron trigger.
    pub schedules: Vec<Schedule>,
}

/// One cron trigger as the page shows it.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The component it ticks.
    pub component: String,
    /// Its cron expression.
    pub expression: String,
    /// When it ticks next.
    pub next: Option<DateTime<Utc>>,
    /// When it last ticked, and how that ended.
    pub last: Option<(DateTime<Utc>, TickOutcome)>,
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn ago(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let ms = (now - then).num_milliseconds().max(0);
    seconds(u64::try_from(ms).unwrap_or(0))
}

/// The page's HTML.
pub fn render(view: &StatusView) -> String {
    let mut h = String::new();
    let app = escape(&view.app);
    // `write!` into a String cannot fail.
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>lethe: {app}</title>\n</head>\n<body>\n<h1>lethe: {app}</h1>\n\
         <p>Up since {} ({} ago). This page was rendered at {}.</p>\n",
        view.started.to_rfc3339(),
        ago(view.now, view.started),
        view.now.to_rfc3339(),
    );

    h.push_str("<h2 id=\"components\">Components</h2>\n");
    h.push_str("<table id=\"routes\">\n<caption>HTTP routes</caption>\n<tr><th>Route</th><th>Component</th></tr>\n");
    for (route, component) in &view.routes {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td></tr>",
            escape(route),
            escape(component)
        );
    }
    h.push_str("</table>\n");
    h.push_str("<table id=\"schedules\">\n<caption>Cron schedules</caption>\n<tr><th>Component</th><th>Schedule</th><th>Next tick</th><th>Last tick</th></tr>\n");
    for s in &view.schedules {
        let next = s
            .next
            .map(|n| n.to_rfc3339())
            .unwrap_or_else(|| "none".into());
        let last = match &s.last {
            Some((at, outcome)) => format!("{} ({})", at.to_rfc3339(), tick_summary(outcome)),
            None => "not yet".into(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(&s.component),
            escape(&s.expression),
            escape(&next),
            escape(&last)
        );
    }
    h.push_str("</table>\n");

    h.push_str("<h2 id=\"reconcilers\">Reconcilers</h2>\n");
    let reconcilers: Vec<&Schedule> = view
        .schedules
        .iter()
        .filter(|s| matches!(s.last, Some((_, TickOutcome::Pass(_)))))
        .collect();
    if reconcilers.is_empty() {
        h.push_str("<p>No reconciler pass has run on this host yet.</p>\n");
    }
    let mut deletions = Vec::new();
    for s in reconcilers {
        let Some((at, TickOutcome::Pass(pass))) = &s.last else {
            continue;
        };
        let component = escape(&s.component);
        let _ = writeln!(
            h,
            "<section class=\"reconciler\" id=\"reconciler-{component}\">\n<h3>{component}</h3>"
        );
        match pass {
            Pass::NotLeader { holder } => {
                let _ = writeln!(
                    h,
                    "<p>Leader: <strong>{}</strong>, not this host. Its last tick, at {}, ran no pass.</p>",
                    escape(holder),
                    at.to_rfc3339()
                );
            }
            Pass::Ran {
                report,
                kube_waited,
            } => {
                let _ = writeln!(
                    h,
                    "<p>Leader: <strong>this host</strong>. Last pass at {}: examined {}, created {}, updated {}, deleted {}, failed {}, in {}.</p>",
                    at.to_rfc3339(),
                    report.examined,
                    report.created,
                    report.updated,
                    report.deleted,
                    report.failed.len(),
                    seconds(report.duration_ms)
                );
                if !kube_waited.is_zero() {
                    let _ = writeln!(
                        h,
                        "<p>Its Kubernetes calls waited {} for the rate limit (kube_qps, kube_burst).</p>",
                        seconds(u64::try_from(kube_waited.as_millis()).unwrap_or(u64::MAX))
                    );
                }
                if !report.failed.is_empty() {
                    h.push_str("<table class=\"failures\">\n<caption>Failures of the last pass</caption>\n<tr><th>Item</th><th>Reason</th><th>Parked</th></tr>\n");
                    for f in &report.failed {
                        let _ = writeln!(
                            h,
                            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                            escape(&f.item),
                            escape(&f.reason),
                            if f.parked { "yes" } else { "no" }
                        );
                    }
                    h.push_str("</table>\n");
                }
                deletions.extend(report.deletions.iter().map(|d| (s.component.as_str(), d)));
            }
        }
        h.push_str("</section>\n");
    }

    h.push_str("<h2 id=\"deletions\">Deletions in flight</h2>\n");
    if deletions.is_empty() {
        h.push_str("<p>None, as of the last passes this host ran.</p>\n");
    } else {
        h.push_str("<table id=\"deletions-table\">\n<tr><th>Item</th><th>State</th><th>Age</th><th>Why</th><th>Reconciler</th></tr>\n");
        for (component, d) in deletions {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&d.item),
                escape(&d.state),
                seconds(d.age_ms),
                escape(d.reason.as_deref().unwrap_or("")),
                escape(component)
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn tick_summary(outcome: &TickOutcome) -> String {
    match outcome {
        TickOutcome::Done => "done".into(),
        TickOutcome::Pass(Pass::Ran { report, .. }) => {
            format!("pass ran, {} failed", report.failed.len())
        }
        TickOutcome::Pass(Pass::NotLeader { holder }) => format!("not the leader; {holder} leads"),
        TickOutcome::Failed(why) => format!("failed: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trigger::reconcile::{DeletionInFlight, ItemFailure, Report};

    fn report() -> Report {
        Report {
            examined: 3,
            created: 1,
            updated: 0,
            deleted: 2,
            failed: vec![ItemFailure {
                item: "org/o1".into(),
                reason: "namespace <o1> is not lethe's".into(),
                parked: false,
            }],
            duration_ms: 1500,
            deletions: vec![DeletionInFlight {
                item: "org/o1".into(),
                state: "FAILED".into(),
                age_ms: 61_000,
                reason: Some("org deletion cannot finish: Namespace <o1> is not lethe's".into()),
            }],
            leader_elsewhere: None,
        }
    }

    #[test]
    fn the_page_shows_routes_schedules_the_leader_failures_and_deletions_escaped() {
        let now = Utc::now();
        let view = StatusView {
            app: "lethe <demo>".into(),
            now,
            started: now,
            routes: vec![("/v3/...".into(), "cf-api".into())],
            schedules: vec![
                Schedule {
                    component: "cf-reconciler".into(),
                    expression: "* * * * * *".into(),
                    next: Some(now),
                    last: Some((
                        now,
                        TickOutcome::Pass(Pass::Ran {
                            report: report(),
                            kube_waited: std::time::Duration::from_millis(1500),
                        }),
                    )),
                },
                Schedule {
                    component: "data-jobs".into(),
                    expression: "*/5 * * * * *".into(),
                    next: Some(now),
                    last: Some((
                        now,
                        TickOutcome::Pass(Pass::NotLeader {
                            holder: "host-b".into(),
                        }),
                    )),
                },
            ],
        };
        let html = render(&view);
        for needle in [
            "<title>lethe: lethe &lt;demo&gt;</title>",
            "<td><code>/v3/...</code></td><td>cf-api</td>",
            "<td><code>*/5 * * * * *</code></td>",
            "Leader: <strong>this host</strong>",
            "Its Kubernetes calls waited 1.5 s for the rate limit",
            "Leader: <strong>host-b</strong>, not this host",
            "<td>namespace &lt;o1&gt; is not lethe&#39;s</td>",
            "<tr><td>org/o1</td><td>FAILED</td><td>61.0 s</td><td>org deletion cannot finish: Namespace &lt;o1&gt; is not lethe&#39;s</td><td>cf-reconciler</td></tr>",
        ] {
            assert!(html.contains(needle), "missing `{needle}` in:\n{html}");
        }
        assert!(!html.contains("<script"), "no JavaScript");
    }

    #[test]
    fn a_host_that_ran_no_pass_says_so() {
        let now = Utc::now();
        let html = render(&StatusView {
            app: "a".into(),
            now,
            started: now,
            routes: vec![],
            schedules: vec![],
        });
        assert!(html.contains("No reconciler pass has run on this host yet."));
        assert!(html.contains("None, as of the last passes this host ran."));
    }
}
