//! The ClusterRole aggregation controller.

use crate::controllers::controller::Controller;
use crate::controllers::shared::def_for_key;
use crate::store::{Change, Obj, Store};
use serde_json::Value;
use std::sync::Arc;

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

/// Keeps every aggregated ClusterRole's rules the union of the roles its selectors match.
pub struct ClusterRoleAggregation;

impl Controller for ClusterRoleAggregation {
    fn name(&self) -> &'static str {
        "clusterrole-aggregation"
    }

    fn step(&self, store: &Store) -> bool {
        aggregate(store)
    }
}
