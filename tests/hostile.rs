//! A plugin made hostile (`components/hostile`), served beside lethe's own components and granted
//! what a reconciler is granted (`privileged`, `sql`) with its own account and rights (ConfigMaps
//! in its namespace `hostile`), tries to reach what belongs to the other components: cf's
//! namespaces, Orgs and name claims, its Lease, data-jobs' CronJobs and Lease. The API server
//! refuses every attempt, because the plugin acts as its own ServiceAccount; nothing changes;
//! lethe's log names the component. Its own kind stays its own to use.
//!
//! Its SQL reaches its own database label alone: data-jobs' and cf's tables, by plain and
//! qualified names, `ATTACH`, the catalogs and `SET ROLE`, are out of its reach on SQLite and
//! PostgreSQL, the database itself refusing.
//!
//! Runs on the embedded cluster, and through `KUBECONFIG` on a real one (the component's RBAC is
//! applied like every `kubernetes_manifests` file).

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use support::cf::{call, create_org};
use support::{Lethe, request};

/// The repository's `spin.toml`, its paths made absolute, with the hostile plugin added.
fn manifest() -> String {
    let shipped = support::shipped_manifest();
    let root = support::repo_root();
    let root = root.display();
    format!(
        r#"{shipped}
[[trigger.http]]
route = "/hostile/..."
component = "hostile"

[component.hostile]
source = "{wasm}"
sqlite_databases = ["hostile"]

[component.hostile.tool.lethe]
capabilities = ["kube", "sql", "log", "config"]
kube_identities = ["caller", "privileged"]
kubernetes_manifests = ["{root}/components/hostile/kubernetes/rbac.json"]
"#,
        wasm = support::component("hostile").display(),
    )
}

/// Asks the plugin to make one privileged Kubernetes call; the outcome it got and its detail.
fn attempt(lethe: &Lethe, ask: Json) -> (String, String) {
    let answer = request(
        "POST",
        &format!("{}/hostile/kube", lethe.url),
        Some(&ask.to_string()),
        &[],
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = answer.json();
    (
        body["outcome"].as_str().unwrap_or_default().to_string(),
        body["detail"].as_str().unwrap_or_default().to_string(),
    )
}

/// Of every object in `objects`, read as the administrator: its uid, and the value of the label
/// the plugin's patches try to add (empty when absent). lethe's own reconcilers go on writing
/// these objects (conditions, finalizers, Lease renewals), so their resourceVersions move; what
/// the plugin would change is the object itself (a delete, a new uid) or that label.
fn identities(lethe: &Lethe, objects: &[(&str, &str, &str)]) -> Vec<String> {
    objects
        .iter()
        .map(|(kind, namespace, name)| {
            let mut args = vec![
                "get",
                kind,
                name,
                "-o",
                "jsonpath={.metadata.uid} {.metadata.labels.owned-by}",
            ];
            if !namespace.is_empty() {
                args.extend(["-n", namespace]);
            }
            lethe.kubectl_ok(&args)
        })
        .collect()
}

/// Waits (bounded) until kubectl finds `kind` objects in `namespace` (those `selector` picks,
/// when given); their names.
fn wait_for(
    lethe: &Lethe,
    kind: &str,
    namespace: &str,
    selector: Option<&str>,
    within: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let mut args = vec!["get", kind, "-n", namespace, "-o", "name"];
        if let Some(selector) = selector {
            args.extend(["-l", selector]);
        }
        let (_, out, _) = lethe.kubectl(&args);
        let names: Vec<String> = out
            .lines()
            .filter_map(|l| l.rsplit('/').next())
            .map(str::to_string)
            .collect();
        if !names.is_empty() {
            return names;
        }
        assert!(Instant::now() < deadline, "no {kind} in {namespace}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_hostile_plugin_acting_as_its_own_account_reaches_nothing_of_the_other_components() {
    let lethe = Lethe::up_app_manifest(&manifest(), &[], &[]);
    let admin = lethe.admin_token();
    // What the other components own: an org (its namespace, its name claim, cf's Lease) and a
    // deployed data job (its CronJob, data-jobs' Lease).
    let org = create_org(&lethe, "guarded");
    let auth = format!("Bearer {admin}");
    let team = support::cf::unique("guarded-team");
    let created = request(
        "POST",
        &format!("{}/data-jobs/for-team/{team}/jobs", lethe.url),
        Some(r#"{"job_name": "ingest", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}}"#),
        &[("authorization", &auth)],
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let job_uid = created.json()["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let deployed = request(
        "POST",
        &format!(
            "{}/data-jobs/for-team/{team}/jobs/ingest/deployments",
            lethe.url
        ),
        Some(r#"{"job_version": "v1"}"#),
        &[("authorization", &auth)],
    );
    assert_eq!(deployed.status, 202, "{}", deployed.body);
    let within = Duration::from_secs(60);
    // On a real cluster, earlier tests' objects may be there too (and swept): this job's own.
    let own = format!("lethe.dev/data-job-uid={job_uid}");
    let cronjob = wait_for(&lethe, "cronjobs", "data-jobs", Some(&own), within)[0].clone();
    wait_for(&lethe, "leases", "data-jobs", None, within);
    wait_for(&lethe, "leases", "cf", None, within);
    // This org's own name claim (the one whose holder is the org).
    let deadline = Instant::now() + within;
    let claim = loop {
        let listed: Json = serde_json::from_str(&lethe.kubectl_ok(&[
            "get",
            "configmaps",
            "-n",
            "cf",
            "-l",
            "cf.lethe.dev/name-claim",
            "-o",
            "json",
        ]))
        .expect("JSON");
        let own = listed["items"].as_array().and_then(|items| {
            items.iter().find(|c| {
                c["metadata"]["annotations"]["cf.lethe.dev/claimed-by"].as_str() == Some(&org)
            })
        });
        if let Some(own) = own {
            break own["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        assert!(Instant::now() < deadline, "no name claim held by {org}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let org_namespace = org.clone();
    let guarded = [
        ("namespace", "", org_namespace.as_str()),
        ("orgs.cf.lethe.dev", "cf", org.as_str()),
        ("configmap", "cf", claim.as_str()),
        ("lease", "cf", "cf-reconciler"),
        ("cronjob", "data-jobs", cronjob.as_str()),
        ("lease", "data-jobs", "data-jobs-sync"),
    ];
    let before = identities(&lethe, &guarded);

    // Its own kind, in its own namespace, is its to use.
    let (outcome, detail) = attempt(
        &lethe,
        json!({"verb": "create", "body": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": support::cf::unique("mine"), "namespace": "hostile"}}}),
    );
    assert_eq!(outcome, "ok", "{detail}");

    // Everything else: listed, read, patched and deleted, each refused by the API server.
    let patch = json!({"metadata": {"labels": {"owned-by": "hostile"}}});
    let mut attempts = vec![
        json!({"verb": "list", "api_version": "v1", "kind": "Namespace"}),
        json!({"verb": "list", "api_version": "v1", "kind": "ConfigMap", "namespace": "cf"}),
        json!({"verb": "list", "api_version": "cf.lethe.dev/v1alpha1", "kind": "Org", "namespace": "cf"}),
        json!({"verb": "list", "api_version": "batch/v1", "kind": "CronJob", "namespace": "data-jobs"}),
        json!({"verb": "list", "api_version": "coordination.k8s.io/v1", "kind": "Lease", "namespace": "data-jobs"}),
    ];
    for (api_version, kind, namespace, name) in [
        ("v1", "Namespace", "", org_namespace.as_str()),
        ("cf.lethe.dev/v1alpha1", "Org", "cf", org.as_str()),
        ("v1", "ConfigMap", "cf", claim.as_str()),
        ("coordination.k8s.io/v1", "Lease", "cf", "cf-reconciler"),
        ("batch/v1", "CronJob", "data-jobs", cronjob.as_str()),
        (
            "coordination.k8s.io/v1",
            "Lease",
            "data-jobs",
            "data-jobs-sync",
        ),
    ] {
        for verb in ["get", "patch", "delete"] {
            attempts.push(
                json!({"verb": verb, "api_version": api_version, "kind": kind,
                "namespace": namespace, "name": name, "body": patch}),
            );
        }
    }
    // Making objects where the others keep theirs: a claim on a name, a CronJob, a namespace.
    attempts.push(
        json!({"verb": "create", "body": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "claim-squat", "namespace": "cf"}}}),
    );
    attempts.push(
        json!({"verb": "create", "body": {"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": support::cf::unique("hostile-made")}}}),
    );
    for ask in &attempts {
        // The SDK answers a refused privileged call as the component's own missing right (a 503
        // to its callers, SECURITY.md A8), never as the caller's 403.
        let (outcome, detail) = attempt(&lethe, ask.clone());
        assert_eq!(outcome, "unavailable", "{ask}: {detail}");
        assert!(detail.contains("missing a permission"), "{ask}: {detail}");
    }

    // The API server refused each one to the plugin's own account, as lethe's log tells, naming
    // the component; and nothing changed.
    let log = lethe.log();
    assert!(
        log.contains(
            "component `hostile` acts as system:serviceaccount:lethe-system:lethe-hostile"
        ),
        "{log}"
    );
    for (verb, resource) in [
        ("list", "namespaces"),
        ("get", "namespaces"),
        ("patch", "namespaces"),
        ("delete", "namespaces"),
        ("create", "namespaces"),
        ("list", "configmaps"),
        ("get", "configmaps"),
        ("patch", "configmaps"),
        ("delete", "configmaps"),
        ("create", "configmaps"),
        ("list", "orgs"),
        ("get", "orgs"),
        ("patch", "orgs"),
        ("delete", "orgs"),
        ("list", "cronjobs"),
        ("get", "cronjobs"),
        ("patch", "cronjobs"),
        ("delete", "cronjobs"),
        ("list", "leases"),
        ("get", "leases"),
        ("patch", "leases"),
        ("delete", "leases"),
    ] {
        let refusal = format!(
            "User \"system:serviceaccount:lethe-system:lethe-hostile\" cannot {verb} resource \"{resource}\""
        );
        assert!(
            log.lines().any(|l| l.contains("hostile")
                && l.contains("was refused a privileged call")
                && l.contains(&refusal)),
            "no refusal of {verb} {resource} naming the plugin's account:\n{log}"
        );
    }
    assert_eq!(
        identities(&lethe, &guarded),
        before,
        "a guarded object changed"
    );
    // An operator's /readyz names the plugin's missing rights; the pod's probe (deploy/) leaves
    // them out, so the plugin cannot take the other components out of their Service.
    let readyz = support::get(&format!("{}/readyz?verbose", lethe.admin_url));
    assert_eq!(readyz.status, 503, "{}", readyz.body);
    assert!(
        readyz
            .body
            .contains("[-]permissions failed: component `hostile`"),
        "{}",
        readyz.body
    );
    let probe = support::get(&format!("{}/readyz?exclude=permissions", lethe.admin_url));
    assert_eq!(probe.status, 200, "{}", probe.body);
    assert!(
        probe.body.contains("[+]permissions excluded: ok"),
        "{}",
        probe.body
    );

    // On the embedded cluster, its audit trail shows who wrote what: each component's Lease, and
    // every object it made, as the component's own account, lethe's account only ever the one
    // impersonating; lethe's account stored nothing as itself (it only asks reviews); the
    // plugin's writes to others' objects were all refused.
    if support::external_kubeconfig().is_none() {
        let audit: Json =
            serde_json::from_str(&lethe.kubectl_ok(&["get", "--raw", "/lethe/audit"]))
                .expect("the audit trail is JSON");
        let writes = audit.as_array().expect("a list");
        let host = "system:serviceaccount:lethe-system:lethe";
        let account = |component: &str| format!("{host}-{component}");
        let made_by = |path_part: &str, user: &str| {
            writes.iter().any(|w| {
                w["path"].as_str().is_some_and(|p| p.contains(path_part))
                    && w["user"] == user
                    && w["impersonatedBy"] == host
                    && w["code"].as_i64().is_some_and(|c| (200..300).contains(&c))
            })
        };
        for (path_part, component) in [
            ("/namespaces/data-jobs/leases", "data-jobs"),
            ("/namespaces/data-jobs/cronjobs", "data-jobs"),
            ("/namespaces/cf/leases", "cf-reconciler"),
            ("/namespaces/cf/configmaps", "cf-api"),
            ("/namespaces/hostile/configmaps", "hostile"),
        ] {
            assert!(
                made_by(path_part, &account(component)),
                "no write to {path_part} as {}: {audit}",
                account(component)
            );
        }
        for write in writes {
            let ok = write["code"]
                .as_i64()
                .is_some_and(|c| (200..300).contains(&c));
            let path = write["path"].as_str().unwrap_or_default();
            // Reviews (TokenReview, SubjectAccessReview) are asked, not stored: the host's own.
            assert!(
                !(ok && write["user"] == host && !path.ends_with("reviews")),
                "lethe's own account wrote as itself: {write}"
            );
            if write["user"] == account("hostile").as_str() {
                assert!(
                    !ok || path.contains("/namespaces/hostile/"),
                    "the plugin wrote outside its own namespace: {write}"
                );
            }
        }
    }
    // The other components still work: the org is still served to its admin.
    let r = call(
        &lethe,
        "GET",
        &format!("/v3/organizations/{org}"),
        Some(&admin),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Asks the plugin to run one SQL statement; the outcome it got and what came back.
fn statement(lethe: &Lethe, sql: &str) -> (String, Json) {
    let answer = request(
        "POST",
        &format!("{}/hostile/sql", lethe.url),
        Some(&json!({ "statement": sql }).to_string()),
        &[],
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = answer.json();
    let outcome = body["outcome"].as_str().unwrap_or_default().to_string();
    let detail = if outcome == "ok" {
        body["value"].clone()
    } else {
        body["detail"].clone()
    };
    (outcome, detail)
}

#[test]
fn a_hostile_plugin_reaches_no_other_components_data() {
    let mut backends = vec![None];
    if let Some(url) = support::postgres_url_or_skip("hostile_sql") {
        backends.push(Some(support::fresh_postgres_database(
            &url,
            "lethe_hostile",
        )));
    }
    for database_url in backends {
        let env: Vec<(&str, &str)> = database_url
            .iter()
            .map(|u| ("LETHE_VAR_DATABASE_URL", u.as_str()))
            .collect();
        let lethe = Lethe::up_app_manifest(&manifest(), &[], &env);
        let on = database_url.as_deref().unwrap_or("SQLite");
        // data-jobs' rows: a job of a team.
        let auth = format!("Bearer {}", lethe.admin_token());
        let team = support::cf::unique("secret-team");
        let jobs = format!("{}/data-jobs/for-team/{team}/jobs", lethe.url);
        let created = request(
            "POST",
            &jobs,
            Some(
                r#"{"job_name": "ingest", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}}"#,
            ),
            &[("authorization", &auth)],
        );
        assert_eq!(created.status, 201, "{on}: {}", created.body);

        let data_dir = lethe.data_dir.path().join("data");
        let mut attempts = vec![
            "SELECT * FROM data_job".to_owned(),
            "SELECT * FROM reconcile_backoff".to_owned(),
            "SELECT * FROM cf_reconcile_state".to_owned(),
            "DELETE FROM data_job".to_owned(),
            "UPDATE data_job SET team = 'hostile'".to_owned(),
            "DROP TABLE data_job".to_owned(),
        ];
        let catalog = match &database_url {
            None => {
                let other = data_dir.join("lethe-data-jobs.db");
                attempts.extend([
                    format!("ATTACH DATABASE '{}' AS dj", other.display()),
                    format!("ATTACH DATABASE 'file:{}?mode=ro' AS dj", other.display()),
                    format!("VACUUM INTO '{}'", data_dir.join("stolen.db").display()),
                ]);
                "SELECT name FROM sqlite_master"
            }
            Some(url) => {
                let db = url.rsplit('/').next().unwrap_or_default();
                let db = db.split('?').next().unwrap_or(db);
                attempts.extend([
                    format!("SELECT * FROM {db}_data_jobs.public.data_job"),
                    format!("SET ROLE {db}_data_jobs"),
                    format!("SET ROLE {db}_cf"),
                    "SET ROLE lethe".to_owned(),
                    "SET SESSION AUTHORIZATION lethe".to_owned(),
                    "SELECT * FROM lethe_label_roles".to_owned(),
                    "CREATE EXTENSION dblink".to_owned(),
                ]);
                "SELECT relname::text FROM pg_catalog.pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
            }
        };
        for sql in &attempts {
            let (outcome, detail) = statement(&lethe, sql);
            assert_ne!(outcome, "ok", "{on}: {sql} went through: {detail}");
        }
        assert!(!data_dir.join("stolen.db").exists());
        // What its catalog shows is its own database: none of the others' tables.
        let (outcome, tables) = statement(&lethe, catalog);
        assert_eq!(outcome, "ok", "{on}: {tables}");
        let tables = tables.to_string();
        for theirs in [
            "data_job",
            "reconcile_backoff",
            "cf_reconcile",
            "smoke_note",
        ] {
            assert!(!tables.contains(theirs), "{on}: {theirs} in {tables}");
        }
        if database_url.is_some() {
            let (outcome, who) = statement(&lethe, "SELECT current_user::text");
            assert_eq!(outcome, "ok", "{on}: {who}");
            assert!(
                who.to_string().contains("_hostile\\\")"),
                "{on}: its own role: {who}"
            );
        }
        // Its own database is its to use.
        assert_eq!(
            statement(&lethe, "CREATE TABLE mine (v TEXT)").0,
            "ok",
            "{on}: its own table"
        );

        // Nothing of data-jobs' changed, and lethe's log names the component refused.
        let listed = request("GET", &jobs, None, &[("authorization", &auth)]);
        assert_eq!(listed.status, 200, "{on}: {}", listed.body);
        assert!(listed.body.contains("ingest"), "{on}: {}", listed.body);
        let log = lethe.log();
        assert!(
            log.lines()
                .any(|l| l.contains("component `hostile`") && l.contains("its database refused")),
            "{on}: no refusal naming the plugin:\n{log}"
        );
    }
}
