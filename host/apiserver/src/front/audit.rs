//! The audit trail of writes: who changed what, as kube-apiserver's audit log records it (its
//! `user` and `impersonatedUser`), kept in memory for the last [`AuditLog::CAPACITY`] writes and
//! served to the administrator at `GET /lethe/audit`. It is how a test sees that a component's
//! writes, Leases and Events are made as the component's own account, with lethe's host account
//! only as the impersonator.

use std::collections::VecDeque;

use parking_lot::Mutex;
use serde::Serialize;

/// One write the server answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The user the request acted as: the impersonated user when there was one.
    pub user: String,
    /// The user who sent the request while impersonating [`AuditEvent::user`], if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_by: Option<String>,
    /// The HTTP method: `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The status code answered.
    pub code: u16,
}

/// The last writes answered, oldest first.
#[derive(Default)]
pub struct AuditLog(Mutex<VecDeque<AuditEvent>>);

impl AuditLog {
    /// How many writes are kept: enough for a test's scenario, bounded for a long run.
    pub const CAPACITY: usize = 10_000;

    /// Records `event` when it is a write; reads are not audited here.
    pub fn record(&self, event: AuditEvent) {
        if !matches!(event.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE") {
            return;
        }
        let mut events = self.0.lock();
        if events.len() == Self::CAPACITY {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// The writes kept, oldest first.
    pub fn snapshot(&self) -> Vec<AuditEvent> {
        self.0.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(method: &str, path: &str) -> AuditEvent {
        AuditEvent {
            user: "u".into(),
            impersonated_by: None,
            method: method.into(),
            path: path.into(),
            code: 200,
        }
    }

    #[test]
    fn only_writes_are_kept_and_the_oldest_go_first() {
        let log = AuditLog::default();
        log.record(event("GET", "/api/v1/namespaces"));
        for i in 0..AuditLog::CAPACITY + 2 {
            log.record(event("POST", &format!("/w/{i}")));
        }
        let kept = log.snapshot();
        assert_eq!(kept.len(), AuditLog::CAPACITY);
        assert_eq!(kept[0].path, "/w/2");
        assert!(kept.iter().all(|e| e.method == "POST"));
    }
}
