//! Background controllers: namespace deletion, CRD cleanup, and the garbage collector for
//! ownerReferences (Background, Foreground and Orphan propagation).

use crate::resources::{CRD_KEY, NS_KEY, ResourceDef, builtins, defs_from_crd};
use crate::status::Warnings;
use crate::store::{Change, FullKey, Inner, Obj, Store};
use crate::verbs::{self, CRD_CLEANUP, DeleteOpts};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The definition that stores objects under `key`.
pub fn def_for_key(inner: &Inner, key: &str) -> Option<Arc<ResourceDef>> {
    builtins()
        .iter()
        .chain(inner.custom.iter())
        .find(|d| d.key() == key && !d.virtual_create_only)
        .cloned()
}

fn owner_uids(o: &Obj) -> Vec<String> {
    o.value["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `o` has an ownerReference to `owner_uid` with blockOwnerDeletion set.
fn blocks(o: &Obj, owner_uid: &str) -> bool {
    o.value["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|a| {
            a.iter().any(|r| {
                r["uid"].as_str() == Some(owner_uid)
                    && r["blockOwnerDeletion"].as_bool() == Some(true)
            })
        })
}

struct Item {
    def: Arc<ResourceDef>,
    ns: String,
    name: String,
    obj: Arc<Obj>,
}

fn item(inner: &Inner, fk: &FullKey) -> Option<Item> {
    let obj = inner.get(&fk.0, &fk.1, &fk.2)?.clone();
    Some(Item {
        def: def_for_key(inner, &fk.0)?,
        ns: fk.1.clone(),
        name: fk.2.clone(),
        obj,
    })
}

fn background() -> DeleteOpts {
    DeleteOpts {
        propagation: Some("Background".into()),
        ..Default::default()
    }
}

fn delete_all(store: &Store, items: &[Item]) -> bool {
    let mut changed = false;
    for it in items.iter().filter(|i| !i.obj.deleting()) {
        if verbs::delete(
            store,
            &it.def,
            &it.ns,
            &it.name,
            &background(),
            &mut unheard(),
        )
        .is_ok()
        {
            changed = true;
        }
    }
    changed
}

/// Where a controller's own writes put their warnings: nowhere, since no client made them and
/// none is waiting for them (a real controller manager drops them too).
fn unheard() -> Warnings {
    Warnings::default()
}

/// What the controllers know of the server they run in.
#[derive(Debug, Clone, Default)]
pub struct ClusterInfo {
    /// The CA that signs the serving certificate (PEM); empty when serving plain HTTP, which
    /// is what a controller manager without a root CA would publish too.
    pub ca_pem: String,
    /// The port the server listens on, which the `kubernetes` Service forwards to.
    pub api_port: u16,
    /// What signs service-account tokens, for the token controller's legacy token Secrets.
    pub signer: Option<Arc<crate::sa_token::Signer>>,
}

pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

fn builtin(plural: &str) -> Option<&'static Arc<ResourceDef>> {
    builtins()
        .iter()
        .find(|d| d.group.is_empty() && d.plural == plural)
}

/// Creates namespace `ns`'s `default` ServiceAccount; false if it could not (it exists, or the
/// namespace is gone or terminating).
pub fn create_default_account(store: &Store, ns: &str) -> bool {
    let Some(sa) = builtin("serviceaccounts") else {
        return false;
    };
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns},
    });
    verbs::create(
        store,
        sa,
        ns,
        body,
        verbs::WriteOpts::default(),
        &mut unheard(),
    )
    .is_ok()
}

/// What every active namespace gets from the controller manager, and clients expect: the
/// service-account controller's `default` ServiceAccount and the root-CA publisher's
/// `kube-root-ca.crt` ConfigMap (recreated when deleted, put back when changed).
fn namespace_defaults(store: &Store, info: &ClusterInfo) -> bool {
    let (Some(sa), Some(cm)) = (builtin("serviceaccounts"), builtin("configmaps")) else {
        return false;
    };
    let wanted_data = serde_json::json!({"ca.crt": info.ca_pem});
    let ca_current = |o: &Obj| {
        o.value["data"] == wanted_data
            && o.value["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
                .as_str()
                .is_some_and(|d| !d.is_empty())
    };
    type Work = (Vec<String>, Vec<String>, Vec<(String, Arc<Obj>)>);
    let (missing_sa, missing_ca, stale_ca): Work = store.read(|inner| {
        let active: Vec<&String> = inner
            .entries(NS_KEY)
            .filter(|(_, o)| !o.deleting())
            .map(|((_, name), _)| name)
            .collect();
        let mut work: Work = Default::default();
        for ns in active {
            if inner.get(sa.key(), ns, "default").is_none() {
                work.0.push(ns.clone());
            }
            match inner.get(cm.key(), ns, ROOT_CA_CONFIGMAP) {
                None => work.1.push(ns.clone()),
                Some(o) if !ca_current(o) => work.2.push((ns.clone(), o.clone())),
                Some(_) => {}
            }
        }
        work
    });
    let mut changed = false;
    // A namespace that began terminating since the scan refuses these, as it should.
    for ns in missing_sa {
        changed |= create_default_account(store, &ns);
    }
    for ns in missing_ca {
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_CONFIGMAP,
                "namespace": ns,
                "annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION},
            },
            "data": wanted_data,
        });
        changed |= verbs::create(
            store,
            cm,
            &ns,
            body,
            verbs::WriteOpts::default(),
            &mut unheard(),
        )
        .is_ok();
    }
    for (ns, o) in stale_ca {
        let mut v = o.value.clone();
        v["data"] = wanted_data.clone();
        crate::util::set_in(
            &mut v,
            &["metadata", "annotations", DESCRIPTION_ANNOTATION],
            serde_json::json!(ROOT_CA_DESCRIPTION),
        );
        let res = verbs::update(
            store,
            cm,
            &ns,
            ROOT_CA_CONFIGMAP,
            v,
            verbs::Sub::Main,
            verbs::WriteOpts::default(),
            &mut unheard(),
        );
        changed |= res.is_ok();
    }
    changed
}

/// The API server's own `default/kubernetes` Service: created when missing, its ports put
/// back when they differ, as the real server's bootstrap controller does.
pub fn kubernetes_service(store: &Store, info: &ClusterInfo) -> bool {
    let Some(svc) = builtin("services") else {
        return false;
    };
    let wanted = crate::kinds::service::kubernetes_service(info.api_port);
    let current = store.get(svc.key(), "default", "kubernetes", false);
    let result = match current {
        Some(o) if o.deleting() => return false,
        Some(o) => {
            let ports_ok = o.value["spec"]["ports"] == wanted["spec"]["ports"];
            if ports_ok && o.value["spec"]["type"] == "ClusterIP" {
                return false;
            }
            let mut v = o.value.clone();
            v["spec"]["ports"] = wanted["spec"]["ports"].clone();
            v["spec"]["type"] = serde_json::json!("ClusterIP");
            verbs::update(
                store,
                svc,
                "default",
                "kubernetes",
                v,
                verbs::Sub::Main,
                verbs::WriteOpts::default(),
                &mut unheard(),
            )
            .map(|_| ())
        }
        None => {
            let default_active = store
                .get(NS_KEY, "", "default", false)
                .is_some_and(|n| !n.deleting());
            if !default_active {
                return false;
            }
            verbs::create(
                store,
                svc,
                "default",
                wanted,
                verbs::WriteOpts::default(),
                &mut unheard(),
            )
            .map(|_| ())
        }
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("kubernetes service: {e}");
            false
        }
    }
}

/// One pass over everything pending. Returns true when it changed something.
pub fn pass(store: &Store, info: &ClusterInfo) -> bool {
    let mut changed = aggregate(store);
    changed |= namespace_defaults(store, info);
    changed |= kubernetes_service(store, info);
    changed |= legacy_token_secrets(store, info);
    let (deleting, owned): (Vec<Item>, Vec<Item>) = store.read(|inner| {
        (
            inner
                .deleting
                .iter()
                .filter_map(|fk| item(inner, fk))
                .collect(),
            inner
                .owned
                .iter()
                .filter_map(|fk| item(inner, fk))
                .collect(),
        )
    });
    for it in &deleting {
        let fins = it.obj.finalizers();
        if it.def.key() == NS_KEY {
            let ns = it.name.clone();
            let contents: Vec<Item> = store.read(|inner| {
                let mut out = vec![];
                for key in inner.objects.keys() {
                    let Some(def) = def_for_key(inner, key) else {
                        continue;
                    };
                    if !def.namespaced {
                        continue;
                    }
                    for o in inner.in_namespace(key, &ns) {
                        out.push(Item {
                            def: def.clone(),
                            ns: ns.clone(),
                            name: o.meta_str("name").to_string(),
                            obj: o.clone(),
                        });
                    }
                }
                out
            });
            changed |= namespace_conditions(store, &it.def, &ns, &contents);
            if contents.is_empty() {
                changed |= verbs::finalize_namespace(store, &it.def, &ns);
            } else {
                changed |= delete_all(store, &contents);
            }
            continue;
        }
        if it.def.key() == CRD_KEY && fins.iter().any(|f| f == CRD_CLEANUP) {
            let Some(cr_def) = defs_from_crd(&it.obj.value).into_iter().next() else {
                changed |= verbs::remove_finalizer(store, &it.def, "", &it.name, CRD_CLEANUP);
                continue;
            };
            let crs: Vec<Item> = store.read(|inner| {
                inner
                    .entries(cr_def.key())
                    .map(|((ns, name), o)| Item {
                        def: cr_def.clone(),
                        ns: ns.clone(),
                        name: name.clone(),
                        obj: o.clone(),
                    })
                    .collect()
            });
            if crs.is_empty() {
                changed |= verbs::remove_finalizer(store, &it.def, "", &it.name, CRD_CLEANUP);
            } else {
                changed |= crd_terminating(store, &it.def, &it.name);
                changed |= delete_all(store, &crs);
            }
            continue;
        }
        let uid = it.obj.uid().to_string();
        let dependents: Vec<&Item> = owned
            .iter()
            .filter(|d| owner_uids(&d.obj).contains(&uid))
            .collect();
        if fins.iter().any(|f| f == "orphan") {
            for d in &dependents {
                changed |= strip_owner(store, d, &uid);
            }
            changed |= verbs::remove_finalizer(store, &it.def, &it.ns, &it.name, "orphan");
        } else if fins.iter().any(|f| f == "foregroundDeletion") {
            for d in dependents.iter().filter(|d| !d.obj.deleting()) {
                let opts = DeleteOpts {
                    propagation: Some("Foreground".into()),
                    ..Default::default()
                };
                if verbs::delete(store, &d.def, &d.ns, &d.name, &opts, &mut unheard()).is_ok() {
                    changed = true;
                }
            }
            // Only dependents with blockOwnerDeletion hold the owner back.
            let blocking = dependents.iter().any(|d| blocks(&d.obj, &uid));
            if !blocking {
                changed |=
                    verbs::remove_finalizer(store, &it.def, &it.ns, &it.name, "foregroundDeletion");
            }
        }
    }
    // Garbage collection: dependents whose owners are all gone (read afresh: the steps above
    // may have orphaned some).
    drop(owned);
    let orphans: Vec<Item> = store.read(|inner| {
        inner
            .owned
            .iter()
            .filter_map(|fk| item(inner, fk))
            .filter(|d| {
                let owners = owner_uids(&d.obj);
                !owners.is_empty() && owners.iter().all(|u| !inner.uids.contains_key(u))
            })
            .collect()
    });
    changed |= delete_all(store, &orphans);
    changed
}

/// Sets the terminating namespace's conditions as the namespace controller does, so that
/// `kubectl describe namespace` tells what is holding it.
fn namespace_conditions(store: &Store, def: &ResourceDef, ns: &str, contents: &[Item]) -> bool {
    use std::collections::BTreeMap;
    let mut per_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for it in contents {
        let r = if it.def.group.is_empty() {
            format!("{}.", it.def.plural)
        } else {
            format!("{}.{}", it.def.plural, it.def.group)
        };
        *per_resource.entry(r).or_default() += 1;
        for f in it.obj.finalizers() {
            *per_finalizer.entry(f).or_default() += 1;
        }
    }
    let cond = |t: &str,
                remaining: bool,
                reason_true: &str,
                msg_true: String,
                reason_false: &str,
                msg_false: &str| {
        if remaining {
            serde_json::json!({"type": t, "status": "True", "reason": reason_true, "message": msg_true})
        } else {
            serde_json::json!({"type": t, "status": "False", "reason": reason_false, "message": msg_false})
        }
    };
    let resources = per_resource
        .iter()
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect::<Vec<_>>()
        .join(", ");
    let finalizers = per_finalizer
        .iter()
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect::<Vec<_>>()
        .join(", ");
    let ok = |t: &str, reason: &str, msg: &str| serde_json::json!({"type": t, "status": "False", "reason": reason, "message": msg});
    let wanted = vec![
        ok(
            "NamespaceDeletionDiscoveryFailure",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        ok(
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        ok(
            "NamespaceDeletionContentFailure",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        cond(
            "NamespaceContentRemaining",
            !per_resource.is_empty(),
            "SomeResourcesRemain",
            format!("Some resources are remaining: {resources}"),
            "ContentRemoved",
            "All content successfully removed",
        ),
        cond(
            "NamespaceFinalizersRemaining",
            !per_finalizer.is_empty(),
            "SomeFinalizersRemain",
            format!("Some content in the namespace has finalizers remaining: {finalizers}"),
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
        ),
    ];
    let res = store.mutate(def.key(), "", ns, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let strip = |c: &Value| {
            let mut c = c.clone();
            if let Some(m) = c.as_object_mut() {
                m.remove("lastTransitionTime");
            }
            c
        };
        let current: Vec<Value> = cur.value["status"]["conditions"]
            .as_array()
            .map(|a| a.iter().map(strip).collect())
            .unwrap_or_default();
        if current == wanted {
            return Ok((Change::Keep, false));
        }
        let now = crate::util::now();
        let conditions: Vec<Value> = wanted
            .iter()
            .map(|w| {
                let mut c = w.clone();
                c["lastTransitionTime"] = Value::String(now.clone());
                c
            })
            .collect();
        let mut v = cur.value.clone();
        crate::util::set_in(&mut v, &["status", "conditions"], Value::Array(conditions));
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}

const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// The token controller's work on Secrets of type `kubernetes.io/service-account-token`: one
/// naming an existing ServiceAccount and holding no token yet gets `token` (a token of that
/// account, without expiry, valid while the Secret and the account exist), `ca.crt`,
/// `namespace` and the account's uid. One whose account does not exist yet is left until it
/// does. `true` when anything changed.
fn legacy_token_secrets(store: &Store, info: &ClusterInfo) -> bool {
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

/// Marks a CRD whose instances are being deleted as the CRD finalizer does: condition
/// `Terminating` (reason `InstanceDeletionInProgress`). `true` when it changed.
fn crd_terminating(store: &Store, def: &ResourceDef, name: &str) -> bool {
    let res = store.mutate(def.key(), "", name, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let mut conditions: Vec<Value> = cur.value["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c["type"] == "Terminating" && c["status"] == "True")
        {
            return Ok((Change::Keep, false));
        }
        conditions.retain(|c| c["type"] != "Terminating");
        conditions.push(serde_json::json!({
            "type": "Terminating",
            "status": "True",
            "lastTransitionTime": crate::util::now(),
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
        }));
        let mut v = cur.value.clone();
        crate::util::set_in(&mut v, &["status", "conditions"], Value::Array(conditions));
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}

/// Removes the ownerReference to `owner_uid` from a dependent.
fn strip_owner(store: &Store, d: &Item, owner_uid: &str) -> bool {
    let ns_key = if d.def.namespaced { d.ns.as_str() } else { "" };
    let res = store.mutate(d.def.key(), ns_key, &d.name, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let mut v = cur.value.clone();
        let refs: Vec<Value> = v["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["uid"].as_str() != Some(owner_uid))
            .collect();
        if let Some(m) = v["metadata"].as_object_mut() {
            if refs.is_empty() {
                m.remove("ownerReferences");
            } else {
                m.insert("ownerReferences".into(), Value::Array(refs));
            }
        }
        if v == cur.value {
            return Ok((Change::Keep, false));
        }
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}

/// The ClusterRole aggregation controller: a role with an `aggregationRule` gets the union of
/// the rules of the cluster roles its selectors match. Returns true when it changed something.
pub fn aggregate(store: &Store) -> bool {
    const KEY: &str = "rbac.authorization.k8s.io/clusterroles";
    let roles: Vec<Arc<Obj>> =
        store.read(|inner| inner.entries(KEY).map(|(_, o)| o.clone()).collect());
    let Some(def) = store.read(|inner| def_for_key(inner, KEY)) else {
        return false;
    };
    let mut changed = false;
    for r in &roles {
        let Some(selectors) = r.value["aggregationRule"]["clusterRoleSelectors"].as_array() else {
            continue;
        };
        let name = r.meta_str("name").to_string();
        let mut rules: Vec<Value> = vec![];
        for other in roles.iter().filter(|o| o.meta_str("name") != name) {
            let labels = &other.value["metadata"]["labels"];
            if !selectors
                .iter()
                .any(|s| crate::selector::label_selector_matches(s, labels))
            {
                continue;
            }
            for rule in other.value["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
        if r.value["rules"].as_array() == Some(&rules) {
            continue;
        }
        let res = store.mutate(def.key(), "", &name, |cur, _| {
            let Some(cur) = cur else {
                return Ok((Change::Keep, false));
            };
            let mut v = cur.value.clone();
            v["rules"] = Value::Array(rules);
            Ok((Change::Put(v), true))
        });
        changed |= matches!(res, Ok((_, true)));
    }
    changed
}

/// Runs the controllers until the task is aborted.
pub async fn run(store: Arc<Store>, info: ClusterInfo) {
    loop {
        tokio::select! {
            _ = store.notify.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        // Let a burst of writes settle before scanning.
        tokio::time::sleep(Duration::from_millis(10)).await;
        for _ in 0..20 {
            if !pass(&store, &info) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_cluster_has_its_kubernetes_service_and_each_namespace_its_defaults() {
        let store = Store::open(None).unwrap();
        // Plain HTTP: no CA to publish, so the bundle is empty, as a controller manager
        // without a root CA would publish it.
        let info = ClusterInfo {
            ca_pem: String::new(),
            api_port: 6443,
            signer: None,
        };
        crate::bootstrap(&store, &info).unwrap();
        let svc = store
            .get("/services", "default", "kubernetes", false)
            .unwrap();
        assert_eq!(svc.value["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(svc.value["spec"]["ports"][0]["targetPort"], 6443);
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let cm = store
                .get("/configmaps", ns, ROOT_CA_CONFIGMAP, false)
                .unwrap_or_else(|| panic!("no root CA in {ns}"));
            assert_eq!(cm.value["data"], serde_json::json!({"ca.crt": ""}));
            assert!(
                store
                    .get("/serviceaccounts", ns, "default", false)
                    .is_some()
            );
        }
        // A restart on another port points the Service there, keeping its address.
        let moved = ClusterInfo {
            ca_pem: "PEM".into(),
            api_port: 7000,
            signer: None,
        };
        while pass(&store, &moved) {}
        let svc = store
            .get("/services", "default", "kubernetes", false)
            .unwrap();
        assert_eq!(svc.value["spec"]["ports"][0]["targetPort"], 7000);
        assert_eq!(svc.value["spec"]["clusterIP"], "10.96.0.1");
        let cm = store
            .get("/configmaps", "default", ROOT_CA_CONFIGMAP, false)
            .unwrap();
        assert_eq!(cm.value["data"]["ca.crt"], "PEM");
    }
}
