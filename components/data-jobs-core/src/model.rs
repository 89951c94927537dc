//! Names, validation, the deployment spec, its hash, and the CronJob that renders it.
//!
//! The spec hash is the SHA-256 of the canonical JSON of exactly the fields the CronJob carries
//! (image, schedule, enabled, resources). The same function hashes a live CronJob's fields, so a
//! hand edit is detected by comparing the live fingerprint with the desired hash.

use serde_json::{Map, Value as Json, json};
use sha2::{Digest as _, Sha256};

/// Label every CronJob lethe manages carries.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "lethe";
/// Label with the data job's uid.
pub const JOB_UID_LABEL: &str = "lethe.dev/data-job-uid";
/// Label with the team.
pub const TEAM_LABEL: &str = "lethe.dev/team";
/// Annotation with the spec hash the CronJob was written from.
pub const HASH_ANNOTATION: &str = "lethe.dev/spec-hash";
/// Annotation naming the job as `team/name`.
pub const JOB_ANNOTATION: &str = "lethe.dev/data-job";
/// The label selector of every managed CronJob.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=lethe";

/// A team name: 1-45 characters of `a-z`, `0-9` and `-`, starting and ending alphanumeric
/// (it is a label value and part of nothing else).
pub fn valid_team(name: &str) -> bool {
    dns_label(name, 45)
}

/// A job name: 1-45 characters of `a-z`, `0-9` and `-`, starting with a letter (it becomes part
/// of the CronJob's name).
pub fn valid_job_name(name: &str) -> bool {
    dns_label(name, 45) && name.as_bytes()[0].is_ascii_lowercase()
}

/// A DNS-1123 label of at most `max` characters.
fn dns_label(s: &str, max: usize) -> bool {
    s.len() <= max && lethe_kube_rules::validation::dns1123_label(s).is_empty()
}

/// A UUID in lower-case canonical form (8-4-4-4-12 hex digits).
pub fn valid_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

/// The CronJob's name: the job name (at most 43 characters) and 8 hex digits of the hash of
/// `team/job`, so two teams never collide, a re-created job reuses the name, and it fits the
/// 52 characters Kubernetes allows a CronJob.
pub fn cronjob_name(team: &str, job: &str) -> String {
    let digest = Sha256::digest(format!("{team}/{job}").as_bytes());
    let short: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let prefix = job
        .get(..job.len().min(43))
        .unwrap_or(job)
        .trim_end_matches('-');
    format!("{prefix}-{short}")
}

/// Whether `s` is a schedule a data job may have: five cron fields (minute hour day-of-month
/// month day-of-week) or an `@hourly`-style descriptor, as the cluster takes them for a CronJob
/// (no time zone in it), with no `@every` and no step beyond its field's range.
pub fn valid_schedule(s: &str) -> bool {
    schedule_error(s).is_none()
}

/// Why `s` is not a schedule a data job may have ([`valid_schedule`]), the cluster's reasons in
/// its words; `None` if it is one. Checked before a deployment is accepted, so a bad schedule is
/// the caller's 422, not a reconciler failure later.
pub fn schedule_error(s: &str) -> Option<String> {
    lethe_kube_rules::cron::cronjob_schedule_errors(s)
        .into_iter()
        .next()
        .or_else(|| lethe_kube_rules::cron::plain_schedule_error(s))
}

/// A container image reference: 1-255 characters, no whitespace, lower-case repository path of
/// `[a-z0-9._-/]` with an optional registry port, `:tag` and `@sha256:` digest.
pub fn valid_image(image: &str) -> bool {
    if image.is_empty() || image.len() > 255 {
        return false;
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let Some(hex) = d.strip_prefix("sha256:") else {
            return false;
        };
        if hex.len() != 64 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (path, tag) = match rest[last_slash..].split_once(':') {
        Some((_, t)) => (&rest[..rest.len() - t.len() - 1], Some(t)),
        None => (rest, None),
    };
    if let Some(t) = tag
        && (t.is_empty()
            || t.len() > 128
            || t.starts_with(['.', '-'])
            || !t
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')))
    {
        return false;
    }
    path.split('/').enumerate().all(|(i, comp)| {
        let comp = if i == 0 {
            // The registry may carry a port.
            match comp.split_once(':') {
                Some((host, port))
                    if !port.is_empty() && port.bytes().all(|c| c.is_ascii_digit()) =>
                {
                    host
                }
                Some(_) => return false,
                None => comp,
            }
        } else {
            comp
        };
        !comp.is_empty()
            && comp.as_bytes()[0].is_ascii_alphanumeric()
            && comp.as_bytes()[comp.len() - 1].is_ascii_alphanumeric()
            && comp.bytes().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
            })
    })
}

/// A Kubernetes quantity such as `500m`, `1`, `2.5`, `128Mi`, `1G`.
pub fn valid_quantity(q: &str) -> bool {
    let digits = q
        .bytes()
        .take_while(|c| c.is_ascii_digit() || *c == b'.')
        .count();
    let (number, suffix) = q.split_at(digits);
    !number.is_empty()
        && number.len() <= 12
        && number.matches('.').count() <= 1
        && !number.starts_with('.')
        && !number.ends_with('.')
        && ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"].contains(&suffix)
}

/// The resources of a deployment, in VDK's field names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resources {
    /// CPU request, e.g. `500m`.
    pub cpu_request: Option<String>,
    /// CPU limit.
    pub cpu_limit: Option<String>,
    /// Memory request, e.g. `256Mi`.
    pub memory_request: Option<String>,
    /// Memory limit.
    pub memory_limit: Option<String>,
}

impl Resources {
    /// Parses VDK's `{"cpu_request", "cpu_limit", "memory_request", "memory_limit"}` (all
    /// optional strings); `Err` names the bad field.
    pub fn from_vdk(v: &Json) -> Result<Resources, String> {
        Resources::default().updated_by_vdk(v)
    }

    /// These resources with VDK's fields in `v` applied one by one, as a deployment update merges
    /// them: a field that is absent keeps its value, `null` removes it.
    pub fn updated_by_vdk(&self, v: &Json) -> Result<Resources, String> {
        let Some(obj) = v.as_object() else {
            return Err("resources must be an object".into());
        };
        let mut r = self.clone();
        for (key, val) in obj {
            let slot = match key.as_str() {
                "cpu_request" => &mut r.cpu_request,
                "cpu_limit" => &mut r.cpu_limit,
                "memory_request" => &mut r.memory_request,
                "memory_limit" => &mut r.memory_limit,
                other => return Err(format!("unknown resources field `{other}`")),
            };
            match val {
                Json::Null => *slot = None,
                Json::String(q) if valid_quantity(q) => *slot = Some(q.clone()),
                _ => {
                    return Err(format!(
                        "resources.{key} must be a quantity such as 500m or 1Gi"
                    ));
                }
            }
        }
        Ok(r)
    }

    /// VDK's JSON form.
    pub fn to_vdk(&self) -> Json {
        let mut m = Map::new();
        for (k, v) in [
            ("cpu_request", &self.cpu_request),
            ("cpu_limit", &self.cpu_limit),
            ("memory_request", &self.memory_request),
            ("memory_limit", &self.memory_limit),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        Json::Object(m)
    }

    /// The container's `resources` as Kubernetes writes them, empty maps omitted.
    pub fn to_kubernetes(&self) -> Json {
        let mut out = Map::new();
        for (section, cpu, mem) in [
            ("requests", &self.cpu_request, &self.memory_request),
            ("limits", &self.cpu_limit, &self.memory_limit),
        ] {
            let mut m = Map::new();
            if let Some(c) = cpu {
                m.insert("cpu".into(), json!(c));
            }
            if let Some(x) = mem {
                m.insert("memory".into(), json!(x));
            }
            if !m.is_empty() {
                out.insert(section.into(), Json::Object(m));
            }
        }
        Json::Object(out)
    }
}

/// What a deployment asks Kubernetes for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Container image.
    pub image: String,
    /// Cron schedule (five fields).
    pub schedule: String,
    /// `false` suspends the CronJob.
    pub enabled: bool,
    /// Container resources.
    pub resources: Resources,
}

impl Spec {
    /// The spec hash (hex SHA-256 of the canonical JSON of the CronJob's fields).
    pub fn hash(&self) -> String {
        fingerprint(
            &self.image,
            &self.schedule,
            self.enabled,
            &self.resources.to_kubernetes(),
        )
    }
}

/// Hashes the fields a CronJob carries; `resources` in Kubernetes form.
pub fn fingerprint(image: &str, schedule: &str, enabled: bool, resources: &Json) -> String {
    let resources = normalize_resources(resources);
    // serde_json's maps are sorted, so this text is canonical.
    let canonical = json!({
        "enabled": enabled,
        "image": image,
        "resources": resources,
        "schedule": schedule,
    })
    .to_string();
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn normalize_resources(r: &Json) -> Json {
    let mut out = Map::new();
    if let Some(obj) = r.as_object() {
        for (k, v) in obj {
            if matches!(k.as_str(), "requests" | "limits")
                && let Some(m) = v.as_object()
                && !m.is_empty()
            {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Json::Object(out)
}

/// The fingerprint of a live CronJob: what [`Spec::hash`] gives for the spec it runs.
/// `None` when the object does not have the shape lethe writes, including a hand edit of one of
/// the fields every deployment gets the same (overlap policy, retries, restart policy), so that
/// such an edit is reverted like any other.
pub fn live_fingerprint(cronjob: &Json) -> Option<String> {
    let spec = &cronjob["spec"];
    let schedule = spec["schedule"].as_str()?;
    let enabled = !spec["suspend"].as_bool().unwrap_or(false);
    let job = &spec["jobTemplate"]["spec"];
    let pod = &job["template"]["spec"];
    if spec["concurrencyPolicy"] != CONCURRENCY_POLICY
        || job["backoffLimit"] != BACKOFF_LIMIT
        || pod["restartPolicy"] != RESTART_POLICY
    {
        return None;
    }
    let containers = pod["containers"].as_array()?;
    if containers.len() != 1 || containers[0]["name"] != CONTAINER_NAME {
        return None;
    }
    let c = &containers[0];
    Some(fingerprint(
        c["image"].as_str()?,
        schedule,
        enabled,
        &c["resources"],
    ))
}

/// The fields every deployment's CronJob gets the same: no overlapping runs, three retries of a
/// failed run, containers restarted in place, and one container of this name.
const CONCURRENCY_POLICY: &str = "Forbid";
const BACKOFF_LIMIT: i64 = 3;
const RESTART_POLICY: &str = "OnFailure";
const CONTAINER_NAME: &str = "data-job";

/// Everything the CronJob of one deployment is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct CronJobParams<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Team.
    pub team: &'a str,
    /// Job name.
    pub job_name: &'a str,
    /// The data job's uid.
    pub job_uid: &'a str,
    /// The spec.
    pub spec: &'a Spec,
    /// Its hash.
    pub hash: &'a str,
    /// The resourceVersion to guard a replace with.
    pub resource_version: Option<&'a str>,
}

/// The CronJob JSON for a deployment: labels managed-by, job uid and team; annotations spec hash
/// and `team/job`; one container named `data-job`; `suspend` when disabled; no overlapping runs.
pub fn render_cronjob(p: &CronJobParams<'_>) -> Json {
    let labels = json!({
        MANAGED_BY_LABEL: MANAGED_BY,
        JOB_UID_LABEL: p.job_uid,
        TEAM_LABEL: p.team,
    });
    let mut metadata = json!({
        "name": cronjob_name(p.team, p.job_name),
        "namespace": p.namespace,
        "labels": labels,
        "annotations": {
            HASH_ANNOTATION: p.hash,
            JOB_ANNOTATION: format!("{}/{}", p.team, p.job_name),
        },
    });
    if let Some(rv) = p.resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    let mut container = json!({
        "name": CONTAINER_NAME,
        "image": p.spec.image,
    });
    let resources = p.spec.resources.to_kubernetes();
    if resources.as_object().is_some_and(|m| !m.is_empty()) {
        container["resources"] = resources;
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {
            "schedule": p.spec.schedule,
            "suspend": !p.spec.enabled,
            "concurrencyPolicy": CONCURRENCY_POLICY,
            "jobTemplate": {
                "metadata": { "labels": labels },
                "spec": {
                    "backoffLimit": BACKOFF_LIMIT,
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": {
                            "restartPolicy": RESTART_POLICY,
                            "containers": [container],
                        },
                    },
                },
            },
        },
    })
}
