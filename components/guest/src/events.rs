//! Kubernetes Events (`events.k8s.io/v1`) on the objects a component acts on, as client-go's
//! events library and kube-runtime's `Recorder` write them, so that `kubectl describe` and
//! `kubectl events` tell a person what lethe did and what holds it up.
//!
//! Repeats fold into one Event. An Event's name is derived from what it says (its object's uid,
//! type, reason, action and note), so a repeat finds it (`AlreadyExists`) and counts itself in its
//! `series` instead of making another; a series is written at most once per
//! [`SERIES_EVERY_MS`], as client-go's series heartbeat is. A recorder makes at most
//! [`WRITES_PER_RECORDER`] writes (one pass of a reconciler), so that a storm of changes cannot
//! turn into a storm of Events against the API server. Events are best effort: one that cannot
//! be written is logged and the work goes on.

use std::cell::Cell;

use serde_json::{Value as Json, json};

use crate::env::{Env, Level, format_micro_time, parse_rfc3339_ms};
use crate::kube::{Identity, Kube, KubeError, Object, ObjectRef, Patch};

/// How often a repeated Event's `series` is written at most.
pub const SERIES_EVERY_MS: i64 = 30_000;

/// The most writes one [`Recorder`] makes.
pub const WRITES_PER_RECORDER: u32 = 100;

/// The longest note the API server takes (1 kB).
const MAX_NOTE: usize = 1024;

/// Whether an Event reports routine work or something a person should look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// What was done.
    Normal,
    /// What went wrong, or what holds the work up.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One Event to record: on what, of what type, and what it says.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Normal or Warning.
    pub kind: EventType,
    /// Why, in UpperCamelCase (`NamespaceDeleted`, `DeletionBlocked`).
    pub reason: &'a str,
    /// What was done or tried, in UpperCamelCase (`Delete`, `Release`).
    pub action: &'a str,
    /// For a person: what happened, naming the objects concerned.
    pub note: &'a str,
}

impl<'a> Event<'a> {
    /// A Normal Event: `action` done, for `reason`, as `note` says.
    pub fn normal(reason: &'a str, action: &'a str, note: &'a str) -> Event<'a> {
        Event {
            kind: EventType::Normal,
            reason,
            action,
            note,
        }
    }

    /// A Warning Event: `action` tried or held up, for `reason`, as `note` says.
    pub fn warning(reason: &'a str, action: &'a str, note: &'a str) -> Event<'a> {
        Event {
            kind: EventType::Warning,
            ..Event::normal(reason, action, note)
        }
    }
}

/// Writes Events as one controller, from this host (`lethe_instance_id`).
pub struct Recorder<'a> {
    kube: &'a dyn Kube,
    env: &'a dyn Env,
    controller: String,
    instance: String,
    writes: Cell<u32>,
}

impl<'a> Recorder<'a> {
    /// A recorder for `controller` (`reportingController`, a qualified name such as
    /// `lethe.dev/cf-reconciler`), writing with the host's privileged identity.
    pub fn new(kube: &'a dyn Kube, env: &'a dyn Env, controller: &str) -> Recorder<'a> {
        let instance = env
            .config("lethe_instance_id")
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "lethe".to_string());
        Recorder {
            kube,
            env,
            controller: controller.to_string(),
            instance: instance.chars().take(128).collect(),
            writes: Cell::new(0),
        }
    }

    /// Records `event` on `regarding`: a new Event, or a repeat counted in the Event it repeats.
    /// Best effort: a failure is logged, never returned.
    pub fn record(&self, regarding: &Object, event: Event<'_>) {
        if let Err(e) = self.write(regarding, event) {
            self.env.log(
                Level::Warn,
                &format!(
                    "recording the event {} on {} {}: {e}",
                    event.reason, regarding.target.kind, regarding.target.name
                ),
            );
        }
    }

    /// How many writes this recorder made.
    pub fn writes(&self) -> u32 {
        self.writes.get()
    }

    fn write(&self, regarding: &Object, event: Event<'_>) -> Result<(), KubeError> {
        if self.writes.get() >= WRITES_PER_RECORDER {
            return Ok(());
        }
        let now = self.env.now_ms();
        let target = event_ref(regarding, event);
        // A UTF-8 character is at most four bytes: this many fit the server's limit.
        let note: String = event.note.chars().take(MAX_NOTE / 4).collect();
        let body = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": target.name, "namespace": target.namespace},
            "eventTime": format_micro_time(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.kind.as_str(),
            "note": note,
            "regarding": {
                "apiVersion": regarding.target.api_version,
                "kind": regarding.target.kind,
                "name": regarding.target.name,
                "namespace": regarding.target.namespace,
                "uid": regarding.metadata.uid,
                "resourceVersion": regarding.metadata.resource_version,
            },
        });
        self.writes.set(self.writes.get() + 1);
        match self.kube.create(&Identity::Privileged, &body) {
            Ok(_) => return Ok(()),
            Err(KubeError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        // A repeat: count it in the series, at most once per SERIES_EVERY_MS.
        let found = self.kube.get(&Identity::Privileged, &target)?;
        let json = found.json();
        let last = json
            .pointer("/series/lastObservedTime")
            .or(json.pointer("/eventTime"))
            .and_then(Json::as_str)
            .and_then(parse_rfc3339_ms)
            .unwrap_or(0);
        if now.saturating_sub(last) < SERIES_EVERY_MS {
            return Ok(());
        }
        let count = json
            .pointer("/series/count")
            .and_then(Json::as_i64)
            .unwrap_or(1);
        let series =
            json!({"series": {"count": count + 1, "lastObservedTime": format_micro_time(now)}});
        self.writes.set(self.writes.get() + 1);
        self.kube
            .patch(&Identity::Privileged, &target, &Patch::Merge(series))
            .map(|_| ())
    }
}

/// Where the Event saying `event` of `regarding` lives: in its namespace (`default` for a
/// cluster-scoped object), named after the object and a hash of what it says.
pub fn event_ref(regarding: &Object, event: Event<'_>) -> ObjectRef {
    let said = format!(
        "{}\n{}\n{}\n{}\n{}",
        regarding.metadata.uid,
        event.kind.as_str(),
        event.reason,
        event.action,
        event.note
    );
    let namespace = regarding
        .target
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default");
    let name = format!("{}.{:016x}", regarding.target.name, fnv1a(said.as_bytes()));
    ObjectRef::new("events.k8s.io/v1", "Event", Some(namespace), &name)
}

/// The 64-bit FNV-1a hash of `bytes`: short, stable across builds and hosts, and enough to tell
/// one object's Events apart.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests {
    use super::*;
    use crate::fake::{FakeCluster, FakeHost};

    fn org(host: &FakeHost<'_>) -> Object {
        host.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": "o", "namespace": "cf"}}))
    }

    const BLOCKED: Event<'static> = Event {
        kind: EventType::Warning,
        reason: "DeletionBlocked",
        action: "Delete",
        note: "Namespace o is not lethe's",
    };

    #[test]
    fn an_event_names_its_object_and_repeats_fold_into_a_series() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let regarding = org(&host);
        let recorder = Recorder::new(&host, &host, "lethe.dev/cf-reconciler");
        recorder.record(&regarding, BLOCKED);
        let events = cluster.all("Event");
        assert_eq!(events.len(), 1);
        let event = events[0].json();
        assert_eq!(event["regarding"]["uid"], regarding.metadata.uid.as_str());
        assert_eq!(event["regarding"]["kind"], "Org");
        assert_eq!(event["type"], "Warning");
        assert_eq!(event["reason"], "DeletionBlocked");
        assert_eq!(event["reportingController"], "lethe.dev/cf-reconciler");
        assert_eq!(events[0].target.namespace.as_deref(), Some("cf"));
        // A repeat soon after is neither a second Event nor a write of the first.
        host.advance(1_000);
        recorder.record(&regarding, BLOCKED);
        assert_eq!(cluster.all("Event").len(), 1);
        assert!(cluster.all("Event")[0].json().get("series").is_none());
        // Later ones are counted in its series.
        host.advance(SERIES_EVERY_MS);
        recorder.record(&regarding, BLOCKED);
        host.advance(SERIES_EVERY_MS);
        recorder.record(&regarding, BLOCKED);
        let events = cluster.all("Event");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].json()["series"]["count"], 3);
        // Another note is another Event.
        let cleared = Event {
            kind: EventType::Normal,
            reason: "DeletionUnblocked",
            note: "nothing foreign is in the way",
            ..BLOCKED
        };
        recorder.record(&regarding, cleared);
        assert_eq!(cluster.all("Event").len(), 2);
    }

    #[test]
    fn a_recorder_stops_writing_at_its_budget() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let regarding = org(&host);
        let recorder = Recorder::new(&host, &host, "lethe.dev/cf-reconciler");
        for i in 0..WRITES_PER_RECORDER + 10 {
            let note = format!("step {i}");
            recorder.record(
                &regarding,
                Event {
                    note: &note,
                    ..BLOCKED
                },
            );
        }
        assert_eq!(recorder.writes(), WRITES_PER_RECORDER);
        assert_eq!(
            cluster.all("Event").len(),
            usize::try_from(WRITES_PER_RECORDER).expect("small")
        );
    }

    #[test]
    fn a_cluster_scoped_objects_events_go_to_default() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let ns =
            host.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
        assert_eq!(
            event_ref(&ns, BLOCKED).namespace.as_deref(),
            Some("default")
        );
    }
}
