//! Authentication (static token file) and RBAC authorization.

use crate::status::ApiError;
use crate::store::{Inner, Store};
use crate::util::meta_str;
use parking_lot::RwLock;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// The identity a bearer token authenticates as, as `user.Info` carries it in kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name RBAC subjects of kind `User` match, e.g. `admin`.
    pub name: String,
    /// The user's UID, from the third column of the token file.
    pub uid: String,
    /// The groups RBAC subjects of kind `Group` match; always includes `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// Whether the user is in `system:masters`, which bypasses RBAC entirely.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// The token table, in kube-apiserver `--token-auth-file` CSV format.
pub struct Tokens {
    map: RwLock<HashMap<String, Arc<UserInfo>>>,
    file: Option<PathBuf>,
}

/// Splits one CSV line, honouring double quotes.
fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Parses one `token,user,uid,"group1,group2"` line of a token file into the token and its
/// user, adding `system:authenticated` to the groups.
/// None for blank lines, `#` comments and lines lacking a token, user name or UID.
pub fn parse_token_line(line: &str) -> Option<(String, UserInfo)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let f = split_csv(line);
    if f.len() < 3 || f[0].is_empty() || f[1].is_empty() {
        return None;
    }
    let mut groups: Vec<String> = f
        .get(3)
        .map(|g| {
            g.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Some((
        f[0].clone(),
        UserInfo {
            name: f[1].clone(),
            uid: f[2].clone(),
            groups,
        },
    ))
}

/// Quotes a CSV field when it needs it.
fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\"").replace(['\n', '\r'], " "))
    } else {
        f.to_string()
    }
}

/// The token-file line, newline included, that [`parse_token_line`] reads back as the same
/// token and user; fields are quoted as CSV needs and line breaks become spaces.
pub fn format_token_line(token: &str, user: &str, uid: &str, groups: &[&str]) -> String {
    format!(
        "{},{},{},\"{}\"\n",
        csv_field(token),
        csv_field(user),
        csv_field(uid),
        groups
            .join(",")
            .replace('"', "\"\"")
            .replace(['\n', '\r'], " ")
    )
}

impl Tokens {
    /// A table holding the tokens of the token-file text `content`; lines that do not parse are
    /// skipped. Tokens added later are appended to `file`, when there is one.
    pub fn new(file: Option<PathBuf>, content: &str) -> Tokens {
        let map = content
            .lines()
            .filter_map(parse_token_line)
            .map(|(t, u)| (t, Arc::new(u)))
            .collect();
        Tokens {
            map: RwLock::new(map),
            file,
        }
    }

    /// The user `token` authenticates as, or None for an unknown token.
    pub fn lookup(&self, token: &str) -> Option<Arc<UserInfo>> {
        self.map.read().get(token).cloned()
    }

    /// Makes `token` authenticate as `user`, replacing any earlier user of that token, and
    /// appends it to the token file if there is one. A failed write is only logged: the token
    /// still works until the server restarts.
    pub fn add(&self, token: &str, user: &str, uid: &str, groups: &[&str]) {
        let line = format_token_line(token, user, uid, groups);
        if let Some((t, u)) = parse_token_line(&line) {
            self.map.write().insert(t, Arc::new(u));
        }
        if let Some(path) = &self.file {
            let res = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = res {
                tracing::warn!("could not persist token to {}: {e}", path.display());
            }
        }
    }
}

/// What a request asks to do, for authorization.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    /// The authorization verb, e.g. `get`, `list`, `watch`, `create`, `deletecollection`, or for
    /// a non-resource request the lowercased HTTP method.
    pub verb: String,
    /// A resource request (else a non-resource path).
    pub resource_request: bool,
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource's plural name, e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status`; empty for the resource itself.
    pub subresource: String,
    /// The object's name; empty for collection requests such as list or create.
    pub name: String,
    /// The namespace; empty for cluster-scoped resources and all-namespace requests.
    pub namespace: String,
    /// The request path a non-resource rule's `nonResourceURLs` are matched against.
    pub path: String,
}

impl Attributes {
    /// The resource as RBAC rules name it: `pods`, or `pods/status` for a subresource.
    pub fn resource_with_sub(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// The reason text of a 403 for `user`.
    pub fn forbidden_reason(&self, user: &str) -> String {
        if !self.resource_request {
            return format!(
                "User \"{user}\" cannot {} path \"{}\"",
                self.verb, self.path
            );
        }
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", self.namespace)
        };
        format!(
            "User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            self.verb,
            self.resource_with_sub(),
            self.group
        )
    }
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(want)))
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let verbs = &rule["verbs"];
    if !(has(verbs, "*") || has(verbs, &a.verb)) {
        return false;
    }
    if !a.resource_request {
        return rule["nonResourceURLs"].as_array().is_some_and(|urls| {
            urls.iter().filter_map(Value::as_str).any(|u| {
                u == "*"
                    || u == a.path
                    || (u.ends_with('*') && a.path.starts_with(&u[..u.len() - 1]))
            })
        });
    }
    let groups = &rule["apiGroups"];
    if !(has(groups, "*") || has(groups, &a.group)) {
        return false;
    }
    let combined = a.resource_with_sub();
    let resources = &rule["resources"];
    let res_ok = has(resources, "*")
        || has(resources, &combined)
        || (!a.subresource.is_empty() && has(resources, &format!("*/{}", a.subresource)));
    if !res_ok {
        return false;
    }
    match rule["resourceNames"].as_array() {
        Some(names) if !names.is_empty() => {
            !a.name.is_empty() && names.iter().any(|n| n.as_str() == Some(a.name.as_str()))
        }
        _ => true,
    }
}

/// Whether binding subject `s` names `user`; a service account without a namespace is one of
/// the binding's own namespace (`binding_ns`), as `appliesToUser` reads it.
fn subject_matches(s: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = s["name"].as_str().unwrap_or_default();
    match s["kind"].as_str().unwrap_or_default() {
        "User" => name == user.name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn role_rules<'a>(inner: &'a Inner, role_ref: &Value, binding_ns: &str) -> Option<&'a Value> {
    let name = role_ref["name"].as_str()?;
    match role_ref["kind"].as_str()? {
        "ClusterRole" => inner
            .get("rbac.authorization.k8s.io/clusterroles", "", name)
            .map(|o| &o.value["rules"]),
        "Role" => inner
            .get("rbac.authorization.k8s.io/roles", binding_ns, name)
            .map(|o| &o.value["rules"]),
        _ => None,
    }
}

/// A binding that grants a request: the binding, the namespace of a RoleBinding (empty for a
/// ClusterRoleBinding), and the first of its subjects that is the user.
struct Grant<'a> {
    binding: &'a Value,
    ns: &'a str,
    subject: &'a Value,
}

impl Grant<'_> {
    /// How RBAC describes the grant in an allowed review's reason.
    fn reason(&self) -> String {
        let name = meta_str(self.binding, "name");
        let (kind, name) = if self.ns.is_empty() {
            ("ClusterRoleBinding", name.to_string())
        } else {
            ("RoleBinding", format!("{name}/{}", self.ns))
        };
        let role_ref = &self.binding["roleRef"];
        let subject_kind = self.subject["kind"].as_str().unwrap_or_default();
        let mut subject_name = self.subject["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if subject_kind == "ServiceAccount" {
            let sa_ns = self.subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(self.ns);
            subject_name = format!("{subject_name}/{sa_ns}");
        }
        format!(
            "RBAC: allowed by {kind} {name:?} of {} {:?} to {subject_kind} {subject_name:?}",
            role_ref["kind"].as_str().unwrap_or_default(),
            role_ref["name"].as_str().unwrap_or_default(),
        )
    }
}

/// Whether `binding` (in namespace `ns` for a RoleBinding, empty for a ClusterRoleBinding)
/// grants `a` to `user`.
fn binding_grant<'a>(
    inner: &Inner,
    binding: &'a Value,
    ns: &'a str,
    user: &UserInfo,
    a: &Attributes,
) -> Option<Grant<'a>> {
    let subject = binding["subjects"]
        .as_array()?
        .iter()
        .find(|s| subject_matches(s, user, ns))?;
    role_rules(inner, &binding["roleRef"], ns)
        .and_then(Value::as_array)
        .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, a)))
        .then_some(Grant {
            binding,
            ns,
            subject,
        })
}

/// The binding that grants `a` to `user`, cluster bindings first as RBAC visits them.
fn find_grant<'a>(inner: &'a Inner, user: &UserInfo, a: &'a Attributes) -> Option<Grant<'a>> {
    if let Some(grant) = inner
        .entries("rbac.authorization.k8s.io/clusterrolebindings")
        .find_map(|(_, b)| binding_grant(inner, &b.value, "", user, a))
    {
        return Some(grant);
    }
    if !a.resource_request || a.namespace.is_empty() {
        return None;
    }
    inner
        .in_namespace("rbac.authorization.k8s.io/rolebindings", &a.namespace)
        .find_map(|b| binding_grant(inner, &b.value, &a.namespace, user, a))
}

/// RBAC: may `user` do `a`?
pub fn authorize(store: &Store, user: &UserInfo, a: &Attributes) -> bool {
    user.is_master() || store.read(|inner| authorize_in(inner, user, a))
}

/// [`authorize`], answering a denial with the real server's 403: the resource and object of
/// `a`, and why RBAC refused.
pub fn require(store: &Store, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
    if authorize(store, user, a) {
        return Ok(());
    }
    let why = a.forbidden_reason(&user.name);
    Err(ApiError::forbidden(&a.group, &a.resource, &a.name, &why))
}

/// [`authorize`] against store contents already in hand (a write that checks its result).
pub fn authorize_in(inner: &Inner, user: &UserInfo, a: &Attributes) -> bool {
    user.is_master() || find_grant(inner, user, a).is_some()
}

/// Why `user` may do `a`, as an access review's reason: empty for `system:masters` (the
/// privileged-group authorizer gives none), else the RBAC grant. `None` when they may not.
pub fn allowed_by(inner: &Inner, user: &UserInfo, a: &Attributes) -> Option<String> {
    if user.is_master() {
        return Some(String::new());
    }
    find_grant(inner, user, a).map(|grant| grant.reason())
}

/// RBAC's escalation prevention, for a write of the RBAC object `obj` (of `plural`, in `ns`) by
/// `user`: a role may only hold permissions its writer holds (unless they may `escalate`
/// roles), and a binding may only grant the permissions of a role its writer holds (unless they
/// may `bind` that role). `system:masters` is exempt. The refusal lists the missing rules as the
/// real server does. Checked against store contents in hand, so that a patch is checked on
/// its result in the transaction that writes it.
pub fn escalation_check(
    inner: &Inner,
    user: &UserInfo,
    plural: &str,
    ns: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    if user.is_master() {
        return Ok(());
    }
    let name = meta_str(obj, "name");
    let may = |verb: &str, resource: &str, name: &str| {
        authorize_in(
            inner,
            user,
            &Attributes {
                verb: verb.into(),
                resource_request: true,
                group: RBAC_GROUP.into(),
                resource: resource.into(),
                name: name.into(),
                namespace: ns.into(),
                ..Default::default()
            },
        )
    };
    let rules = match plural {
        "roles" | "clusterroles" => {
            if may("escalate", plural, name) {
                return Ok(());
            }
            obj["rules"].clone()
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = &obj["roleRef"];
            let role_resource = match role_ref["kind"].as_str() {
                Some("Role") => "roles",
                _ => "clusterroles",
            };
            if may(
                "bind",
                role_resource,
                role_ref["name"].as_str().unwrap_or_default(),
            ) {
                return Ok(());
            }
            role_rules(inner, role_ref, ns).cloned().unwrap_or_default()
        }
        _ => return Ok(()),
    };
    let missing = missing_rules(inner, user, ns, &rules);
    if missing.is_empty() {
        return Ok(());
    }
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    Err(ApiError::forbidden(
        RBAC_GROUP,
        plural,
        name,
        &format!(
            "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            groups.join(" "),
            missing.join("\n")
        ),
    ))
}

/// The API group of Roles, ClusterRoles and their bindings.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The rules of `rules` that `user` does not hold in `ns`, broken down per API group, resource
/// and resource name (their verbs together), sorted, in `PolicyRule.CompactString` form.
fn missing_rules(inner: &Inner, user: &UserInfo, ns: &str, rules: &Value) -> Vec<String> {
    let list = |r: &Value, k: &str| crate::util::string_list(&r[k]);
    let quoted = |xs: &[String]| {
        let parts: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
        format!("[{}]", parts.join(" "))
    };
    let mut missing = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let verbs = list(rule, "verbs");
        // The verbs of the rule that `user` may not use on what `attributes` names.
        let lacking = |attributes: &dyn Fn(&str) -> Attributes| -> Vec<String> {
            verbs
                .iter()
                .filter(|v| !authorize_in(inner, user, &attributes(v)))
                .cloned()
                .collect()
        };
        let urls = list(rule, "nonResourceURLs");
        for url in &urls {
            let lacking = lacking(&|verb| Attributes {
                verb: verb.into(),
                path: url.clone(),
                ..Default::default()
            });
            if !lacking.is_empty() {
                let verbs = quoted(&lacking);
                missing.push(format!("{{NonResourceURLs:[{url:?}], Verbs:{verbs}}}"));
            }
        }
        let names = list(rule, "resourceNames");
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.into_iter().map(Some).collect()
        };
        for group in list(rule, "apiGroups") {
            for resource in list(rule, "resources") {
                let (base, sub) = match resource.split_once('/') {
                    Some((b, s)) => (b.to_string(), s.to_string()),
                    None => (resource.clone(), String::new()),
                };
                for name in &names {
                    let lacking = lacking(&|verb| Attributes {
                        verb: verb.into(),
                        resource_request: true,
                        group: group.clone(),
                        resource: base.clone(),
                        subresource: sub.clone(),
                        name: name.clone().unwrap_or_default(),
                        namespace: ns.into(),
                        path: String::new(),
                    });
                    if lacking.is_empty() {
                        continue;
                    }
                    let mut line = format!("{{APIGroups:[{group:?}], Resources:[{resource:?}]");
                    if let Some(n) = name {
                        line.push_str(&format!(", ResourceNames:[{n:?}]"));
                    }
                    line.push_str(&format!(", Verbs:{}}}", quoted(&lacking)));
                    missing.push(line);
                }
            }
        }
    }
    missing.sort();
    missing
}

#[cfg(test)]
mod tests {

    use super::*;
    use serde_json::json;

    #[test]
    fn token_lines_parse_with_quoted_groups() {
        let (t, u) = parse_token_line("abc,alice,u1,\"dev,ops\"").unwrap();
        assert_eq!(t, "abc");
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, vec!["dev", "ops", "system:authenticated"]);
        assert!(parse_token_line("# comment").is_none());
    }

    #[test]
    fn token_lines_round_trip_awkward_names() {
        let line = format_token_line("t,1", "o\"neil, jr", "u1", &["a", "b"]);
        let (t, u) = parse_token_line(&line).unwrap();
        assert_eq!(t, "t,1");
        assert_eq!(u.name, "o\"neil, jr");
        assert_eq!(u.groups, vec!["a", "b", "system:authenticated"]);
    }

    #[test]
    fn rules_match_subresources_and_names() {
        let a = Attributes {
            verb: "get".into(),
            resource_request: true,
            group: "batch".into(),
            resource: "cronjobs".into(),
            subresource: "status".into(),
            name: "x".into(),
            namespace: "ns".into(),
            path: String::new(),
        };
        assert!(rule_allows(
            &json!({"apiGroups": ["batch"], "resources": ["cronjobs/status"], "verbs": ["get"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get"]}),
            &a
        ));
        assert!(rule_allows(
            &json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "resourceNames": ["x"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "resourceNames": ["y"]}),
            &a
        ));
    }
}
