//! The host's Prometheus metrics, served as text on the admin listener's `/metrics`.
//!
//! Names follow Prometheus' naming guide: the `lethe_` prefix, base units in the name
//! (`_seconds`), and `_total` on counters (added by the encoder). Every label has a bounded set
//! of values: routes and components come from the manifest, kinds from what the components ask
//! for, codes from HTTP. Nothing a client sends becomes a label value, except the HTTP method,
//! which is folded to `other` unless it is a standard one.
//!
//! Counters the capability crates keep themselves (retries, throttling) are read at scrape time
//! from the database and cluster handles registered with [`Metrics::watch_database`] and
//! [`Metrics::watch_cluster`], so the retry loops need no knowledge of Prometheus.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Labels of an HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The manifest route that served it, or `none`.
    pub route: Arc<str>,
    /// The method, or `other`.
    pub method: &'static str,
    /// The status code answered.
    pub status: u16,
}

/// Labels of an HTTP request's latency.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The manifest route that served it, or `none`.
    pub route: Arc<str>,
    /// The method, or `other`.
    pub method: &'static str,
}

/// Labels naming a component.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabels {
    /// The component id from the manifest.
    pub component: String,
}

/// Labels of a component invocation that failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The component id.
    pub component: String,
    /// `busy`, `timeout`, `trap`, `out_of_memory` or `error`.
    pub reason: &'static str,
}

/// Labels of a Kubernetes call a component made.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeLabels {
    /// The component id.
    pub component: String,
    /// `get`, `list`, `create`, `update`, `patch` or `delete`.
    pub verb: &'static str,
    /// The object kind.
    pub kind: String,
    /// The HTTP status of the final answer, or `unavailable` / `timeout` when none came.
    pub code: String,
}

/// Labels of SQL work a component did.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlLabels {
    /// The component id.
    pub component: String,
    /// `ok`, or the error variant (`conflict`, `unavailable`, ...).
    pub outcome: &'static str,
}

/// Labels of a reconcile pass.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabels {
    /// The component id.
    pub component: String,
    /// `ran`, `not_leader` or `error`.
    pub outcome: &'static str,
}

/// Labels of the changes a pass made.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangeLabels {
    /// The component id.
    pub component: String,
    /// `created`, `updated` or `deleted`.
    pub change: &'static str,
}

/// Labels of deletions in flight.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeletionLabels {
    /// The reconciler component that reported them.
    pub component: String,
    /// The deletion job's state: `PROCESSING` or `FAILED`.
    pub state: String,
}

/// Labels of a step of start-up.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StartupLabels {
    /// `database` (opening it and the migrations), `cluster` (connecting, or starting the
    /// embedded one and applying its manifests), `compile` (compiling or loading the components,
    /// side by side with those two), `link`, or `total`.
    pub step: &'static str,
}

/// Every metric the host records.
pub struct Metrics {
    registry: Registry,
    /// HTTP requests answered, by route, method and status.
    pub http_requests: Family<HttpLabels, Counter>,
    /// Time to the response head, by route and method.
    pub http_duration: Family<RouteLabels, Histogram>,
    /// Component instances created.
    pub instantiations: Family<ComponentLabels, Counter>,
    /// Invocations that ended without an answer from the component.
    pub component_failures: Family<FailureLabels, Counter>,
    /// Kubernetes calls made by components, by their final answer.
    pub kube_requests: Family<KubeLabels, Counter>,
    /// SQL statements run by components (each statement of a batch counts).
    pub sql_statements: Family<SqlLabels, Counter>,
    /// SQL transactions ended by components.
    pub sql_transactions: Family<SqlLabels, Counter>,
    /// Reconcile ticks, by outcome.
    pub passes: Family<PassLabels, Counter>,
    /// Wall time of the passes that ran.
    pub pass_duration: Family<ComponentLabels, Histogram>,
    /// Items the passes visited.
    pub pass_items: Family<ComponentLabels, Counter>,
    /// Objects the passes created, updated or deleted.
    pub pass_changes: Family<ChangeLabels, Counter>,
    /// Items that failed in a pass.
    pub pass_failures: Family<ComponentLabels, Counter>,
    /// 1 while this host's last tick of the component ran a pass (it leads), else 0.
    pub leader: Family<ComponentLabels, Gauge>,
    /// Times this host became or stopped being the component's leader.
    pub leader_transitions: Family<ComponentLabels, Counter>,
    /// Deletions under way, as the last pass saw them.
    pub deletions_in_flight: Family<DeletionLabels, Gauge>,
    /// Age of the oldest deletion under way, as the last pass saw it.
    pub deletion_oldest_age: Family<DeletionLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// How long each step of start-up took.
    pub startup: Family<StartupLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    backends: Arc<Backends>,
}

/// The database and clusters whose own counters are read at scrape time.
#[derive(Debug, Default)]
struct Backends {
    databases: Mutex<Vec<lethe_sql::Database>>,
    clusters: Mutex<Vec<lethe_kube::Cluster>>,
    /// Each component's Kubernetes rate limit, by component id.
    rate_limits: Mutex<Vec<(String, Arc<lethe_kube::RateLimit>)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn pass_histogram() -> Histogram {
    // 10 ms to about 5 min.
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

impl Metrics {
    /// A fresh set of metrics, registered under the `lethe_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("lethe");
        let http_requests = Family::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by manifest route, method and status",
            http_requests.clone(),
        );
        let http_duration = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "http_request_duration",
            "Time from a request's arrival to its response head, by manifest route and method",
            Unit::Seconds,
            http_duration.clone(),
        );
        let instantiations = Family::default();
        registry.register(
            "component_instantiations",
            "Component instances created (one per request, tick or pass)",
            instantiations.clone(),
        );
        let component_failures = Family::default();
        registry.register(
            "component_failures",
            "Component invocations that ended without an answer: trap, timeout, out_of_memory or error",
            component_failures.clone(),
        );
        let kube_requests = Family::default();
        registry.register(
            "kube_requests",
            "Kubernetes calls made by components, by verb, kind and the code of the final answer",
            kube_requests.clone(),
        );
        let sql_statements = Family::default();
        registry.register(
            "sql_statements",
            "SQL statements run by components, by outcome",
            sql_statements.clone(),
        );
        let sql_transactions = Family::default();
        registry.register(
            "sql_transactions",
            "SQL transactions ended by components: ok for a commit, else why it ended",
            sql_transactions.clone(),
        );
        let passes = Family::default();
        registry.register(
            "reconcile_passes",
            "Reconcile ticks, by outcome: ran, not_leader or error",
            passes.clone(),
        );
        let pass_duration = Family::new_with_constructor(pass_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "reconcile_pass_duration",
            "Wall time of the reconcile passes that ran",
            Unit::Seconds,
            pass_duration.clone(),
        );
        let pass_items = Family::default();
        registry.register(
            "reconcile_items",
            "Items the reconcile passes visited",
            pass_items.clone(),
        );
        let pass_changes = Family::default();
        registry.register(
            "reconcile_changes",
            "Objects the reconcile passes created, updated or deleted",
            pass_changes.clone(),
        );
        let pass_failures = Family::default();
        registry.register(
            "reconcile_item_failures",
            "Items that failed in a reconcile pass (the pass went on)",
            pass_failures.clone(),
        );
        let leader = Family::default();
        registry.register(
            "reconciler_leader",
            "1 while this host's last tick of the reconciler ran a pass (it holds the lease, or the reconciler needs none), else 0",
            leader.clone(),
        );
        let leader_transitions = Family::default();
        registry.register(
            "reconciler_leader_transitions",
            "Times this host became, or stopped being, the reconciler's leader",
            leader_transitions.clone(),
        );
        let deletions_in_flight = Family::default();
        registry.register(
            "deletions_in_flight",
            "Deletion jobs under way, by state, as the reconciler's last pass saw them",
            deletions_in_flight.clone(),
        );
        let deletion_oldest_age = Family::default();
        registry.register_with_unit(
            "deletion_oldest_age",
            "Age of the oldest deletion job under way, by state, as the reconciler's last pass saw it",
            Unit::Seconds,
            deletion_oldest_age.clone(),
        );
        let startup = Family::default();
        registry.register_with_unit(
            "startup_step",
            "How long each step of start-up took: database, cluster and compile run side by side, then link; total is the whole",
            Unit::Seconds,
            startup.clone(),
        );
        let backends = Arc::new(Backends::default());
        registry.register_collector(Box::new(backends.clone()));
        Metrics {
            registry,
            http_requests,
            http_duration,
            instantiations,
            component_failures,
            kube_requests,
            sql_statements,
            sql_transactions,
            passes,
            pass_duration,
            pass_items,
            pass_changes,
            pass_failures,
            leader,
            leader_transitions,
            deletions_in_flight,
            deletion_oldest_age,
            startup,
            backends,
        }
    }

    /// Reads `database`'s retry counter at every scrape.
    pub fn watch_database(&self, database: &lethe_sql::Database) {
        lock(&self.backends.databases).push(database.clone());
    }

    /// Reads `cluster`'s retry and throttling counters at every scrape.
    pub fn watch_cluster(&self, cluster: &lethe_kube::Cluster) {
        lock(&self.backends.clusters).push(cluster.clone());
    }

    /// Reads how long `component`'s Kubernetes calls waited for `limit` at every scrape.
    pub fn watch_rate_limit(&self, component: &str, limit: &Arc<lethe_kube::RateLimit>) {
        lock(&self.backends.rate_limits).push((component.to_string(), limit.clone()));
    }

    /// Records one answered HTTP request. (Nothing is allocated: the route is shared, the method
    /// a constant.)
    pub fn http_request(
        &self,
        route: &Arc<str>,
        method: &http::Method,
        status: u16,
        took: Duration,
    ) {
        let method = match *method {
            http::Method::GET => "GET",
            http::Method::HEAD => "HEAD",
            http::Method::POST => "POST",
            http::Method::PUT => "PUT",
            http::Method::PATCH => "PATCH",
            http::Method::DELETE => "DELETE",
            http::Method::OPTIONS => "OPTIONS",
            _ => "other",
        };
        self.http_requests
            .get_or_create(&HttpLabels {
                route: route.clone(),
                method,
                status,
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                route: route.clone(),
                method,
            })
            .observe(took.as_secs_f64());
    }

    /// Records that an instance of `component` was created.
    pub fn instantiated(&self, component: &str) {
        self.instantiations
            .get_or_create(&ComponentLabels {
                component: component.to_string(),
            })
            .inc();
    }

    /// Records an invocation of `component` that failed for `reason`: `busy`, `timeout`, `trap`,
    /// `out_of_memory` or `error`.
    pub fn component_failed(&self, component: &str, reason: &'static str) {
        self.component_failures
            .get_or_create(&FailureLabels {
                component: component.to_string(),
                reason,
            })
            .inc();
    }

    /// The metrics in the OpenMetrics text format (which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector for Backends {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sql_retries: u64 = lock(&self.databases)
            .iter()
            .map(|d| d.stats().retries)
            .sum();
        let (kube_retries, kube_throttled, kube_watches) = lock(&self.clusters)
            .iter()
            .map(|c| c.stats())
            .fold((0, 0, 0), |(r, t, w), s| {
                (r + s.retries, t + s.throttled, w + s.followed)
            });
        let counters = [
            (
                "sql_retries",
                "SQL attempts replayed after a transient failure that applied nothing",
                sql_retries,
            ),
            (
                "kube_retries",
                "Kubernetes attempts replayed by the retry policy (429, 5xx and transport failures where safe)",
                kube_retries,
            ),
            (
                "kube_throttled",
                "Kubernetes answers of 429 Too Many Requests (each was waited out per Retry-After)",
                kube_throttled,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        let watches = ConstGauge::new(i64::try_from(kube_watches).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "kube_watches",
            "Collections the host follows with an open watch, for components' `changes` calls",
            None,
            watches.metric_type(),
        )?;
        watches.encode(metric)?;
        let limits = lock(&self.rate_limits);
        if !limits.is_empty() {
            let mut family = encoder.encode_descriptor(
                "kube_rate_limit_wait",
                "Time Kubernetes calls waited for the component's client-side rate limit (kube_qps, kube_burst)",
                Some(&Unit::Seconds),
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (component, limit) in limits.iter() {
                let labels = ComponentLabels {
                    component: component.clone(),
                };
                let counter = ConstCounter::new(limit.waited().as_secs_f64());
                counter.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_family_with_units_and_totals() {
        let m = Metrics::new();
        let route: Arc<str> = Arc::from("/v3/...");
        m.http_request(&route, &http::Method::GET, 200, Duration::from_millis(3));
        m.http_request(
            &route,
            &http::Method::from_bytes(b"BREW").expect("method"),
            404,
            Duration::from_millis(1),
        );
        m.instantiated("cf_api");
        let text = m.encode();
        for needle in [
            "lethe_http_requests_total{route=\"/v3/...\",method=\"GET\",status=\"200\"} 1",
            "lethe_http_requests_total{route=\"/v3/...\",method=\"other\",status=\"404\"} 1",
            "# TYPE lethe_http_request_duration_seconds histogram",
            "lethe_component_instantiations_total{component=\"cf_api\"} 1",
            "lethe_sql_retries_total 0",
            "lethe_kube_throttled_total 0",
            "lethe_kube_watches 0",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
        }
    }
}
