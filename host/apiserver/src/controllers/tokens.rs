//! The token controller: legacy service-account token Secrets.

use crate::controllers::controller::{ClusterInfo, Controller};
use crate::store::{Change, Store};
use serde_json::Value;

pub(super) const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";

pub(super) const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";

pub(super) const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// The token controller's work on Secrets of type `kubernetes.io/service-account-token`: one
/// naming an existing ServiceAccount and holding no token yet gets `token` (a token of that
/// account, without expiry, valid while the Secret and the account exist), `ca.crt`,
/// `namespace` and the account's uid. One whose account does not exist yet is left until it
/// does. `true` when anything changed.
pub(super) fn legacy_token_secrets(store: &Store, info: &ClusterInfo) -> bool {
    let Some(signer) = &info.signer else {
        return false;
    };
    let pending: Vec<(String, String, String, String, String)> = store.read(|inner| {
        inner
            .entries("/secrets")
            .filter(|(_, o)| o.value["type"] == SA_TOKEN_TYPE && !o.deleting())
            .filter(|(_, o)| o.value["data"]["token"].as_str().is_none_or(str::is_empty))
            .filter_map(|((ns, name), o)| {
                let account = o.value["metadata"]["annotations"][SA_NAME_ANNOTATION].as_str()?;
                let sa = inner.get("/serviceaccounts", ns, account)?;
                let wanted_uid = o.value["metadata"]["annotations"][SA_UID_ANNOTATION].as_str();
                if wanted_uid.is_some_and(|u| !u.is_empty() && u != sa.uid()) {
                    return None;
                }
                Some((
                    ns.clone(),
                    name.clone(),
                    o.uid().to_string(),
                    account.to_string(),
                    sa.uid().to_string(),
                ))
            })
            .collect()
    });
    let Some(def) = crate::resources::builtins()
        .iter()
        .find(|d| d.group.is_empty() && d.plural == "secrets")
        .cloned()
    else {
        return false;
    };
    let mut changed = false;
    for (ns, name, secret_uid, account, account_uid) in pending {
        // A century: legacy tokens do not expire; they die with their Secret or account.
        let claims = crate::sa_token::claims(
            &ns,
            &account,
            &account_uid,
            &[crate::sa_token::ISSUER.to_string()],
            Some(("secret", &name, &secret_uid)),
            chrono::Utc::now().timestamp(),
            100 * 365 * 24 * 3600,
        );
        let Ok(token) = signer.sign(&claims) else {
            continue;
        };
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let res = store.mutate(def.key(), &ns, &name, |cur, _| {
            let Some(cur) = cur else {
                return Ok((Change::Keep, false));
            };
            if cur.uid() != secret_uid || cur.value["data"]["token"].is_string() {
                return Ok((Change::Keep, false));
            }
            let mut v = cur.value.clone();
            crate::util::set_in(&mut v, &["data", "token"], Value::String(b64(&token)));
            crate::util::set_in(&mut v, &["data", "namespace"], Value::String(b64(&ns)));
            crate::util::set_in(
                &mut v,
                &["data", "ca.crt"],
                Value::String(b64(&info.ca_pem)),
            );
            crate::util::set_in(
                &mut v,
                &["metadata", "annotations", SA_UID_ANNOTATION],
                Value::String(account_uid.clone()),
            );
            Ok((Change::Put(v), true))
        });
        changed |= matches!(res, Ok((_, true)));
    }
    changed
}

/// Fills legacy service-account token Secrets.
pub struct TokenController {
    /// What signs the tokens; without a signer the controller does nothing.
    pub info: ClusterInfo,
}

impl Controller for TokenController {
    fn name(&self) -> &'static str {
        "tokens"
    }

    fn step(&self, store: &Store) -> bool {
        legacy_token_secrets(store, &self.info)
    }
}
