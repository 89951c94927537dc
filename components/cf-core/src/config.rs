//! Settings, read from the component's configuration values with documented defaults. The
//! mapping from a job type to its resource is configuration, so pointing the job machinery at
//! another CRD set (Korifi's `CFOrg`/`CFSpace`, say) needs no code.

use std::collections::BTreeMap;

use serde::Deserialize;

use lethe_guest::env::Env;
use lethe_guest::kube::Collection;

use crate::kind::ResourceKind;

pub mod korifi;

/// How to find a resource's namespace from its guid.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NamespaceRule {
    /// Always this namespace (orgs: the root namespace).
    Fixed(String),
    /// Search every namespace by name (spaces: their org's namespace).
    Any,
}

/// How to decide whether the caller may see a resource.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// The caller can `get` the resource itself.
    Get,
    /// The caller can `list` objects of this kind in the namespace the resource owns (orgs: the
    /// spaces in the org's namespace, which every org role may list).
    ListInOwnNamespace {
        /// apiVersion of the listed kind.
        api_version: String,
        /// The listed kind.
        kind: String,
    },
    /// The caller can `list` one of these kinds where each probe says (spaces: role bindings
    /// in the org's namespace, which org managers may list, or config maps in the space's own
    /// namespace, which its managers and developers may; an org user may do neither, and sees
    /// no space, as in Cloud Controller).
    ListAny(Vec<ListProbe>),
}

/// One `list` a [`Visibility::ListAny`] tries.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListProbe {
    /// apiVersion of the listed kind.
    pub api_version: String,
    /// The listed kind.
    pub kind: String,
    /// In the namespace the resource owns (named after it), else in the one it lives in.
    pub own_namespace: bool,
}

/// Whether `name` can be a job type: `[a-z][a-z_]*` (`org`, `managed_service_instance`).
pub fn valid_type_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// Whether `verb` can be a job's verb: `[a-z][a-z_]*` (`delete`, `apply_manifest`, Korifi's
/// `delete_unapped_routes`).
pub fn valid_verb(verb: &str) -> bool {
    valid_type_name(verb)
}

/// How a resource is found from the guid its job GUID carries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Find {
    /// It is named after the guid (orgs, spaces, Korifi's kinds).
    #[default]
    Name,
    /// It carries the guid as the value of this label (Korifi's role RoleBindings:
    /// `cloudfoundry.org/role-guid`).
    Label(String),
}

/// What a job of one verb derives its state from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobRule {
    /// A deletion: gone is `COMPLETE`; a deletionTimestamp younger than the timeout is
    /// `PROCESSING`, older is `FAILED` (the jobs module's table).
    Delete,
    /// A create or an update that the resource's controller carries out: `COMPLETE` once
    /// `metadata.generation` equals `status.observedGeneration` and the `Ready` condition is
    /// `True`; `FAILED` with the condition's message once, at that generation, `Ready` is
    /// `False` for one of `failed_reasons` (Korifi would wait forever); else `PROCESSING`, or
    /// `POLLING` when `polling` (the resource waits on a service broker).
    State {
        /// Whether the job waits as `POLLING` rather than `PROCESSING`.
        #[serde(default)]
        polling: bool,
        /// `Ready=False` reasons that no retry will mend.
        #[serde(default)]
        failed_reasons: Vec<String>,
    },
    /// Done when asked (Korifi applies a manifest before it answers): always `COMPLETE`.
    Complete,
    /// Korifi's `space.delete_unapped_routes`: `COMPLETE` once no object of this kind in the
    /// space's namespace, listed as the caller, lacks destinations.
    NoUnmapped {
        /// apiVersion of the listed kind (CFRoute's).
        api_version: String,
        /// The listed kind.
        kind: String,
        /// JSON pointer to an object's destinations: absent or an empty array is unmapped.
        destinations: String,
    },
}

/// When a DELETE is finished once the resource is deleted, with nothing to wait for: Cloud
/// Controller's `204` without a job, as for a user-provided service instance. Decided by a field
/// of the resource, or of the resource it names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AtOnce {
    /// Where the deciding field is: `None` for the resource itself, else the resource it names.
    #[serde(default)]
    pub via: Option<Named>,
    /// JSON pointer to the deciding field, e.g. `/spec/type`.
    pub pointer: String,
    /// The value that makes the DELETE finished at once, e.g. `user-provided`.
    pub value: String,
}

/// A resource that another names, in the same namespace: a binding's service instance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Named {
    /// apiVersion of the named resource.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// JSON pointer to its name in the naming resource, e.g. `/spec/service/name`.
    pub name_pointer: String,
}

/// The jobs of a type that names none: its deletions.
fn delete_jobs() -> BTreeMap<String, JobRule> {
    BTreeMap::from([("delete".to_string(), JobRule::Delete)])
}

fn yes() -> bool {
    true
}

/// A resource type whose jobs lethe answers, as job GUIDs name it (`org`, `space`, `app`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceType {
    /// apiVersion of the resource, e.g. `cf.lethe.dev/v1alpha1`.
    pub api_version: String,
    /// Its kind, e.g. `Org`.
    pub kind: String,
    /// Where it lives.
    pub namespace: NamespaceRule,
    /// Who may see it.
    pub visibility: Visibility,
    /// Seconds after the deletionTimestamp at which its deletion job turns FAILED.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Kinds that live in its own namespace and must be deleted (and finalized) before that
    /// namespace is deleted, as `(apiVersion, kind)`.
    #[serde(default)]
    pub children: Vec<(String, String)>,
    /// The CF title-case name used in messages, e.g. `Organization`.
    pub display: String,
    /// How it is found from its job's guid (by name unless told).
    #[serde(default)]
    pub find: Find,
    /// Each verb's rule, by the verb of the job GUID (`delete`, `create`, `apply_manifest`);
    /// `{"delete": "delete"}` unless told.
    #[serde(default = "delete_jobs")]
    pub jobs: BTreeMap<String, JobRule>,
    /// Whether lethe's reconciler finalizes it (lethe's own kinds). A kind another controller
    /// owns, such as Korifi's, is `false`: lethe only answers its jobs.
    #[serde(default = "yes")]
    pub reconcile: bool,
    /// When its DELETE is answered `204` without a job (never, unless told).
    #[serde(default)]
    pub at_once: Option<AtOnce>,
}

impl ResourceType {
    /// The namespace every resource of this type lives in, if it is one ([`NamespaceRule::Fixed`]);
    /// `None` for a type found in any namespace.
    pub fn fixed_namespace(&self) -> Option<&str> {
        match &self.namespace {
            NamespaceRule::Fixed(ns) => Some(ns),
            NamespaceRule::Any => None,
        }
    }

    /// Every resource of this type in `namespace` (`None`: in any), as a list or a change feed
    /// addresses them.
    pub fn collection(&self, namespace: Option<&str>) -> Collection {
        Collection::new(&self.api_version, &self.kind, namespace)
    }

    /// Its link in Cloud Controller's V3 API, named as Cloud Controller names it in a job's
    /// `links`: the display name in snake case, and its plural as the path
    /// (`("organization", "/v3/organizations/<guid>")`, `("space", "/v3/spaces/<guid>")`).
    pub fn link(&self, guid: &str) -> (String, String) {
        let name = self.link_name();
        let path = format!("/v3/{name}s/{guid}");
        (name, path)
    }

    /// Its name in Cloud Controller's links: the display name in snake case.
    fn link_name(&self) -> String {
        self.display.trim().to_lowercase().replace([' ', '-'], "_")
    }

    /// Its collection in Cloud Controller's V3 API (`apps` of `/v3/apps/<guid>`).
    pub fn api_collection(&self) -> String {
        format!("{}s", self.link_name())
    }

    /// The resource's plural, as its CRD names it: the kind in lower case with an `s` (`orgs`,
    /// `spaces`), which is how lethe's CRDs are named.
    pub fn plural(&self) -> String {
        format!("{}s", self.kind.to_lowercase())
    }
}

/// All settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace holding the orgs.
    pub root_namespace: String,
    /// The external base URL for links, when configured; else taken from the request.
    pub external_url: Option<String>,
    /// Deletable types by job-GUID name.
    pub types: Vec<(String, ResourceType)>,
    /// Default deletion timeout in seconds.
    pub deletion_timeout_seconds: u64,
    /// How long a DELETE waits for the deletionTimestamp to be visible.
    pub delete_confirm_ms: u64,
    /// How long a job poll re-reads a resource that exists but is not being deleted.
    pub job_reread_ms: u64,
    /// How often the reconciler lists everything again although it follows the changes
    /// (`full_resync_seconds`, default 600): the safety net for a change it missed.
    pub full_resync_ms: u64,
    /// How long one pass may go on visiting (`pass_budget_ms`, default 10 000, half the
    /// component's `timeout_ms`): what is left is deferred to the next pass, which is then full.
    /// A pass is so never cut off by its time limit midway, with every call after the cut failing
    /// and its object put into backoff for it.
    pub pass_budget_ms: u64,
}

/// The API group version of lethe's org and space resources.
pub const CF_API_VERSION: &str = "cf.lethe.dev/v1alpha1";

impl Settings {
    /// Reads the settings from `env`'s configuration, with defaults for anything unset.
    /// `Err` names a value that is set but malformed.
    pub fn from_env(env: &dyn Env) -> Result<Settings, String> {
        let root_namespace = env
            .config("cf_root_namespace")
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "cf".to_string());
        let number = |key: &str, default: u64| -> Result<u64, String> {
            match env.config(key).filter(|v| !v.is_empty()) {
                Some(v) => v
                    .trim()
                    .parse()
                    .map_err(|_| format!("configuration `{key}` must be a number, got `{v}`")),
                None => Ok(default),
            }
        };
        let types = match env.config("job_types").filter(|v| !v.trim().is_empty()) {
            Some(preset) if preset.trim() == "korifi" => korifi::job_types(&root_namespace),
            Some(json) => {
                let map: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&json)
                        .map_err(|e| format!("configuration `job_types` is not valid JSON: {e}"))?;
                map.into_iter()
                    .map(|(name, v)| {
                        let t: ResourceType = serde_json::from_value(v)
                            .map_err(|e| format!("configuration `job_types.{name}`: {e}"))?;
                        if !valid_type_name(&name) {
                            return Err(format!(
                                "configuration `job_types.{name}`: a job type is lower-case letters and underscores"
                            ));
                        }
                        if let Some(verb) = t.jobs.keys().find(|v| !valid_verb(v)) {
                            return Err(format!(
                                "configuration `job_types.{name}.jobs.{verb}`: a verb is lower-case letters and underscores"
                            ));
                        }
                        Ok((name, t))
                    })
                    .collect::<Result<Vec<_>, String>>()?
            }
            None => default_types(&root_namespace),
        };
        let pass_budget_ms = number("pass_budget_ms", 10_000)?;
        if pass_budget_ms == 0 {
            // Every full pass would stop before its first object, and the next start over.
            return Err("configuration `pass_budget_ms` must be more than 0".into());
        }
        Ok(Settings {
            external_url: env
                .config("external_url")
                .filter(|v| !v.is_empty())
                .map(|v| v.trim_end_matches('/').to_string()),
            types,
            deletion_timeout_seconds: number("deletion_timeout_seconds", 120)?,
            delete_confirm_ms: number("delete_confirm_ms", 5000)?,
            job_reread_ms: number("job_reread_ms", 2000)?,
            full_resync_ms: number("full_resync_seconds", 600)?.saturating_mul(1000),
            pass_budget_ms,
            root_namespace,
        })
    }

    /// The resource type named `name` in job GUIDs.
    pub fn resource_type(&self, name: &str) -> Option<&ResourceType> {
        self.types.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The types lethe's reconciler finalizes ([`ResourceType::reconcile`]), in order.
    pub fn reconciled(&self) -> impl Iterator<Item = &(String, ResourceType)> {
        self.types.iter().filter(|(_, t)| t.reconcile)
    }

    /// The type named `name`, if lethe's reconciler finalizes it.
    pub fn reconciled_type(&self, name: &str) -> Option<&ResourceType> {
        self.resource_type(name).filter(|t| t.reconcile)
    }

    /// The resource type of `kind` (the job type of its name).
    pub fn kind(&self, kind: ResourceKind) -> Option<&ResourceType> {
        self.resource_type(kind.name())
    }

    /// The timeout of `t`'s deletion jobs, in milliseconds.
    pub fn timeout_ms(&self, t: &ResourceType) -> i64 {
        let secs = t.timeout_seconds.unwrap_or(self.deletion_timeout_seconds);
        i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }
}

/// Orgs in the root namespace, spaces anywhere (their org's namespace).
pub fn default_types(root_namespace: &str) -> Vec<(String, ResourceType)> {
    vec![
        (
            "org".to_string(),
            ResourceType {
                api_version: CF_API_VERSION.into(),
                kind: "Org".into(),
                namespace: NamespaceRule::Fixed(root_namespace.to_string()),
                visibility: Visibility::ListInOwnNamespace {
                    api_version: CF_API_VERSION.into(),
                    kind: "Space".into(),
                },
                timeout_seconds: None,
                children: vec![(CF_API_VERSION.into(), "Space".into())],
                display: "Organization".into(),
                find: Find::Name,
                jobs: delete_jobs(),
                reconcile: true,
                at_once: None,
            },
        ),
        (
            "space".to_string(),
            ResourceType {
                api_version: CF_API_VERSION.into(),
                kind: "Space".into(),
                namespace: NamespaceRule::Any,
                visibility: Visibility::ListAny(vec![
                    ListProbe {
                        api_version: "rbac.authorization.k8s.io/v1".into(),
                        kind: "RoleBinding".into(),
                        own_namespace: false,
                    },
                    ListProbe {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        own_namespace: true,
                    },
                ]),
                timeout_seconds: None,
                children: Vec::new(),
                display: "Space".into(),
                find: Find::Name,
                jobs: delete_jobs(),
                reconcile: true,
                at_once: None,
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Values(Vec<(&'static str, &'static str)>);

    impl Env for Values {
        fn now_ms(&self) -> i64 {
            0
        }
        fn sleep_ms(&self, _ms: u64) {}
        fn config(&self, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
        fn log(&self, _level: lethe_guest::env::Level, _message: &str) {}
        fn random_bytes(&self, n: usize) -> Vec<u8> {
            vec![0; n]
        }
    }

    /// The Korifi mapping shown in the README.
    const KORIFI: &str = r#"{"org":   {"api_version": "korifi.cloudfoundry.org/v1alpha1", "kind": "CFOrg",
           "namespace": {"fixed": "cf"}, "display": "Organization", "timeout_seconds": 120,
           "visibility": {"list_in_own_namespace": {"api_version": "korifi.cloudfoundry.org/v1alpha1", "kind": "CFSpace"}},
           "children": [["korifi.cloudfoundry.org/v1alpha1", "CFSpace"]]},
 "space": {"api_version": "korifi.cloudfoundry.org/v1alpha1", "kind": "CFSpace",
           "namespace": "any", "display": "Space", "visibility": "get"}}"#;

    #[test]
    fn job_types_can_point_at_korifi_crds() {
        let s = Settings::from_env(&Values(vec![
            ("job_types", KORIFI),
            ("deletion_timeout_seconds", "30"),
        ]))
        .expect("valid");
        let org = s.resource_type("org").expect("org");
        assert_eq!(org.kind, "CFOrg");
        assert_eq!(org.namespace, NamespaceRule::Fixed("cf".into()));
        assert_eq!(s.timeout_ms(org), 120_000);
        let space = s.resource_type("space").expect("space");
        assert_eq!(space.visibility, Visibility::Get);
        assert_eq!(s.timeout_ms(space), 30_000);
    }

    #[test]
    fn malformed_settings_are_errors_not_defaults() {
        assert!(Settings::from_env(&Values(vec![("job_types", "{")])).is_err());
        assert!(Settings::from_env(&Values(vec![("deletion_timeout_seconds", "soon")])).is_err());
        let defaults = Settings::from_env(&Values(vec![])).expect("defaults");
        assert_eq!(defaults.deletion_timeout_seconds, 120);
        assert_eq!(defaults.root_namespace, "cf");
    }
}
