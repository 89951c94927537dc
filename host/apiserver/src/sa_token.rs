//! Service-account tokens as the real API server issues them: JWTs signed with a key of the
//! cluster's (ES256 here, which kube-apiserver accepts for service-account keys, where kubeadm
//! happens to generate RSA), carrying the `kubernetes.io` claim that binds them to a
//! ServiceAccount's uid, so that they survive a restart and die with the account.

use crate::auth::UserInfo;
use crate::store::Store;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// kubeadm's `--service-account-issuer`, which is also the API server's default audience.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Clock skew allowed on `exp` and `nbf`, as go-jose's default leeway that the real
/// validator uses.
const LEEWAY_SECONDS: i64 = 60;

/// How long a token whose signature held is not verified again: kube-apiserver keeps a
/// successful token authentication for 10 s (`TokenSuccessCacheTTL`). Only the signature check
/// is skipped here; lifetime, audience and the ServiceAccount and bound objects still existing
/// are checked on every request, so a revoked token stops working at once.
const VERIFIED_FOR: Duration = Duration::from_secs(10);
/// Most tokens remembered as verified; past it, the expired ones are forgotten (all, when every
/// one is still fresh).
const MAX_VERIFIED: usize = 4096;

/// Verified claims by the SHA-256 of their token, with when the signature was checked.
type Verified = HashMap<[u8; 32], (Arc<Value>, Instant)>;

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn unb64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish()
    }
}

/// The cluster's service-account signing key (ECDSA P-256): it signs the tokens the
/// TokenRequest API issues and verifies the bearer tokens that look like JWTs.
pub struct Signer {
    key: EcdsaKeyPair,
    /// As the real server derives it: base64url(SHA-256(SubjectPublicKeyInfo DER)).
    kid: String,
    rng: SystemRandom,
    /// The claims of tokens whose signature held, by the SHA-256 of the token, and when it was
    /// checked (see [`VERIFIED_FOR`]).
    verified: parking_lot::Mutex<Verified>,
}

impl Signer {
    /// The key in `path` (PEM, PKCS#8), generated and written there on first use; without a
    /// path, a key that lives as long as the process.
    pub fn load_or_generate(path: Option<&Path>) -> anyhow::Result<Signer> {
        let existing = path.and_then(|p| std::fs::read_to_string(p).ok());
        let pair = match &existing {
            Some(pem) => rcgen::KeyPair::from_pem(pem)?,
            None => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?,
        };
        if let (Some(p), None) = (path, &existing) {
            crate::util::write_private(p, &pair.serialize_pem())?;
        }
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &pair.serialize_der(),
            &rng,
        )
        .map_err(|e| anyhow::anyhow!("service-account signing key: {e}"))?;
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(key.public_key().as_ref());
        let kid = b64(ring::digest::digest(&ring::digest::SHA256, &spki).as_ref());
        Ok(Signer {
            key,
            kid,
            rng,
            verified: Default::default(),
        })
    }

    /// Signs `claims` into a compact JWS.
    pub fn sign(&self, claims: &Value) -> anyhow::Result<String> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(&header)?),
            b64(&serde_json::to_vec(claims)?)
        );
        let sig = self
            .key
            .sign(&self.rng, input.as_bytes())
            .map_err(|e| anyhow::anyhow!("signing: {e}"))?;
        Ok(format!("{input}.{}", b64(sig.as_ref())))
    }

    /// The claims of a token this signer made, if its signature holds; a token verified within
    /// [`VERIFIED_FOR`] is not verified again.
    fn signed_claims(&self, token: &str) -> Option<Arc<Value>> {
        let mut key = [0u8; 32];
        key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
        if let Some((claims, at)) = self.verified.lock().get(&key)
            && at.elapsed() < VERIFIED_FOR
        {
            return Some(claims.clone());
        }
        let claims = Arc::new(self.verify(token)?);
        let mut verified = self.verified.lock();
        if verified.len() >= MAX_VERIFIED {
            verified.retain(|_, (_, at)| at.elapsed() < VERIFIED_FOR);
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(key, (claims.clone(), Instant::now()));
        Some(claims)
    }

    /// The claims of a token this signer made, checking its signature.
    fn verify(&self, token: &str) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, p, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&unb64(h)?).ok()?;
        if header["alg"] != "ES256" {
            return None;
        }
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.key.public_key().as_ref(),
        );
        public
            .verify(format!("{h}.{p}").as_bytes(), &unb64(s)?)
            .ok()?;
        serde_json::from_slice(&unb64(p)?).ok()
    }

    /// The user a token authenticates as: a valid signature, from this issuer, for the API
    /// server's audience, within its lifetime, and for a ServiceAccount (and bound object)
    /// that still exists with the uid it was issued for.
    pub fn authenticate(&self, store: &Store, token: &str, now: i64) -> Option<UserInfo> {
        let c = self.signed_claims(token)?;
        if c["iss"] != ISSUER {
            return None;
        }
        let exp = c["exp"].as_i64()?;
        let nbf = c["nbf"].as_i64().unwrap_or(i64::MIN);
        if now > exp + LEEWAY_SECONDS || now + LEEWAY_SECONDS < nbf {
            return None;
        }
        let for_us = match &c["aud"] {
            Value::String(a) => a == ISSUER,
            Value::Array(a) => a.iter().any(|a| a == ISSUER),
            _ => false,
        };
        if !for_us {
            return None;
        }
        let k = &c["kubernetes.io"];
        let ns = k["namespace"].as_str()?;
        let name = k["serviceaccount"]["name"].as_str()?;
        let uid = k["serviceaccount"]["uid"].as_str()?;
        let still = |key: &str, obj_name: &str, obj_uid: &str| {
            store
                .get(key, ns, obj_name, false)
                .is_some_and(|o| o.uid() == obj_uid)
        };
        if !still("/serviceaccounts", name, uid) {
            return None;
        }
        // No Pods are served, so a token bound to one (a foreign issuer's, or a persisted
        // one) names an object that does not exist.
        if k.get("pod").is_some() {
            return None;
        }
        if let Some(bound) = k.get("secret") {
            let ok = match (bound["name"].as_str(), bound["uid"].as_str()) {
                (Some(n), Some(u)) => still("/secrets", n, u),
                _ => false,
            };
            if !ok {
                return None;
            }
        }
        if c["sub"].as_str() != Some(&format!("system:serviceaccount:{ns}:{name}")) {
            return None;
        }
        Some(UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
        })
    }
}

/// Whether `token` has the shape of a JWT (so is worth verifying).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// The claims of a token for `namespace`/`name` (uid `uid`), optionally bound to a
/// secret (`(claim, name, uid)`), valid from `now` for `seconds`.
pub fn claims(
    namespace: &str,
    name: &str,
    uid: &str,
    audiences: &[String],
    bound: Option<(&str, &str, &str)>,
    now: i64,
    seconds: i64,
) -> Value {
    let mut k = json!({"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}});
    if let Some((claim, bound_name, bound_uid)) = bound {
        k[claim] = json!({"name": bound_name, "uid": bound_uid});
    }
    json!({
        "aud": audiences,
        "exp": now + seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": k,
        "nbf": now,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::resources::builtins;

    fn store_with_account() -> (Store, String) {
        let store = Store::open(None).unwrap();
        let def = |p: &str| builtins().iter().find(|d| d.plural == p).unwrap().clone();
        crate::verbs::create(
            &store,
            &def("namespaces"),
            "",
            json!({"metadata": {"name": "ns"}}),
            Default::default(),
            &mut Default::default(),
        )
        .unwrap();
        let sa = crate::verbs::create(
            &store,
            &def("serviceaccounts"),
            "ns",
            json!({"metadata": {"name": "robot"}}),
            Default::default(),
            &mut Default::default(),
        )
        .unwrap();
        (store, sa.uid().to_string())
    }

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    /// A token `signer` issues for the ServiceAccount `ns/robot` of `uid`, valid for 10 minutes.
    fn robot_token(signer: &Signer, uid: &str) -> String {
        signer
            .sign(&claims(
                "ns",
                "robot",
                uid,
                &[ISSUER.into()],
                None,
                now(),
                600,
            ))
            .unwrap()
    }

    #[test]
    fn tokens_carry_the_real_claims_and_verify() {
        let (store, uid) = store_with_account();
        let signer = Signer::load_or_generate(None).unwrap();
        let t = robot_token(&signer, &uid);
        let user = signer.authenticate(&store, &t, now()).unwrap();
        assert_eq!(user.name, "system:serviceaccount:ns:robot");
        assert_eq!(user.uid, uid);
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:ns".to_string())
        );
        let payload: Value =
            serde_json::from_slice(&unb64(t.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(
            payload["kubernetes.io"]["serviceaccount"]["uid"],
            json!(uid)
        );
        assert_eq!(payload["sub"], "system:serviceaccount:ns:robot");
        // Past its expiry (and the leeway), not before it.
        assert!(signer.authenticate(&store, &t, now() + 600 + 61).is_none());
        assert!(signer.authenticate(&store, &t, now() + 600 + 30).is_some());
    }

    #[test]
    fn forged_foreign_or_orphaned_tokens_fail() {
        let (store, uid) = store_with_account();
        let signer = Signer::load_or_generate(None).unwrap();
        let other = Signer::load_or_generate(None).unwrap();
        let good = claims("ns", "robot", &uid, &[ISSUER.into()], None, now(), 600);
        let foreign = other.sign(&good).unwrap();
        assert!(signer.authenticate(&store, &foreign, now()).is_none());
        // A payload swapped under a valid signature.
        let t = signer.sign(&good).unwrap();
        let mut parts: Vec<&str> = t.split('.').collect();
        let mut evil = good.clone();
        evil["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        let evil_payload = b64(&serde_json::to_vec(&evil).unwrap());
        parts[1] = &evil_payload;
        assert!(
            signer
                .authenticate(&store, &parts.join("."), now())
                .is_none()
        );
        let vault = signer
            .sign(&claims(
                "ns",
                "robot",
                &uid,
                &["vault".into()],
                None,
                now(),
                600,
            ))
            .unwrap();
        assert!(signer.authenticate(&store, &vault, now()).is_none());
        let stale_uid = signer
            .sign(&claims(
                "ns",
                "robot",
                "old-uid",
                &[ISSUER.into()],
                None,
                now(),
                600,
            ))
            .unwrap();
        assert!(signer.authenticate(&store, &stale_uid, now()).is_none());
        let bound = signer
            .sign(&claims(
                "ns",
                "robot",
                &uid,
                &[ISSUER.into()],
                Some(("secret", "gone", "x")),
                now(),
                600,
            ))
            .unwrap();
        assert!(signer.authenticate(&store, &bound, now()).is_none());
        assert!(signer.authenticate(&store, "a.b.c", now()).is_none());
        assert!(signer.authenticate(&store, "not-a-jwt", now()).is_none());
    }

    #[test]
    fn a_verified_signature_is_kept_but_a_revoked_account_fails_at_once() {
        let (store, uid) = store_with_account();
        let signer = Signer::load_or_generate(None).unwrap();
        let t = robot_token(&signer, &uid);
        assert!(signer.authenticate(&store, &t, now()).is_some());
        // The second time the claims come from what the first check kept, not a new verification.
        let first = signer.signed_claims(&t).expect("verified");
        let again = signer.signed_claims(&t).expect("verified");
        assert!(Arc::ptr_eq(&first, &again));
        // Whatever was verified, lifetime and the account are checked on every request.
        assert!(signer.authenticate(&store, &t, now() + 600 + 61).is_none());
        let def = builtins()
            .iter()
            .find(|d| d.plural == "serviceaccounts")
            .unwrap()
            .clone();
        crate::verbs::delete(&store, &def, "ns", "robot", &Default::default()).unwrap();
        assert!(signer.authenticate(&store, &t, now()).is_none());
    }

    #[test]
    fn the_key_is_kept_in_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sa.key");
        let (store, uid) = store_with_account();
        let first = Signer::load_or_generate(Some(&path)).unwrap();
        let t = robot_token(&first, &uid);
        let again = Signer::load_or_generate(Some(&path)).unwrap();
        assert_eq!(first.kid, again.kid);
        assert!(again.authenticate(&store, &t, now()).is_some());
    }
}
