//! The privileged Kubernetes calls the cluster refused lately: a component's own account is
//! missing a right the component asked for (RBAC for a configured kind, say). Such a refusal is never the
//! caller's fault, so components answer it as 503 without detail; this is where an operator
//! learns which right is missing, on `/readyz` and in the log.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// What was refused: the component, the verb and the kind.
type Call = (String, &'static str, String);

/// The refused privileged calls that have not succeeded since.
#[derive(Debug, Default)]
pub struct Denials {
    refused: Mutex<BTreeMap<Call, String>>,
}

impl Denials {
    /// The cluster refused `component`'s privileged `verb` on `kind`, in `message` (the API
    /// server's words, which name the identity, the resource and the namespace). Logged the first
    /// time, until the call succeeds again.
    pub fn refused(&self, component: &str, verb: &'static str, kind: &str, message: &str) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        let call = (component.to_string(), verb, kind.to_string());
        if refused.insert(call, message.to_string()).is_none() {
            tracing::error!(
                component,
                verb,
                kind,
                "the component's own account was refused a privileged call; grant it if the component needs it: {message}"
            );
        }
    }

    /// `component`'s privileged `verb` on `kind` succeeded: the right is there now.
    pub fn allowed(&self, component: &str, verb: &'static str, kind: &str) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if !refused.is_empty() {
            refused.remove(&(component.to_string(), verb, kind.to_string()));
        }
    }

    /// `Err` naming every right missing, as the API server worded each refusal.
    pub fn check(&self) -> Result<(), String> {
        let refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.is_empty() {
            return Ok(());
        }
        Err(refused
            .iter()
            .map(|((component, _, _), message)| format!("component `{component}`: {message}"))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_named_until_the_same_call_succeeds() {
        let denials = Denials::default();
        assert_eq!(denials.check(), Ok(()));
        let message = r#"cfapps.korifi.cloudfoundry.org "a" is forbidden: User "system:serviceaccount:lethe-system:lethe" cannot get resource "cfapps" in API group "korifi.cloudfoundry.org" in the namespace "cf""#;
        denials.refused("cf-job-status", "get", "CFApp", message);
        denials.allowed("cf-job-status", "list", "CFApp");
        denials.allowed("cf-api", "get", "CFApp");
        let named = denials.check().expect_err("refused");
        assert!(named.starts_with("component `cf-job-status`: "), "{named}");
        assert!(named.contains(r#"cannot get resource "cfapps""#), "{named}");
        denials.allowed("cf-job-status", "get", "CFApp");
        assert_eq!(denials.check(), Ok(()));
    }
}
