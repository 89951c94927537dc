use super::*;

const GOOD: &str = r#"
spin_manifest_version = 2

[application]
name = "demo"

[application.tool.lethe]
timeout_ms = 1000

[variables]
greeting = { default = "hi" }
token = { required = true, secret = true }

[[trigger.http]]
route = "/smoke/..."
component = "smoke"

[[trigger.cron]]
cron_expression = "*/5 * * * * *"
component = "smoke"

[component.smoke]
source = "smoke.wasm"
variables = { greeting = "{{ greeting }}!" }

[component.smoke.tool.lethe]
capabilities = ["sql", "log", "config"]
migrations = "migrations"
"#;

#[test]
fn parses_triggers_components_grants_and_settings() {
    let m = parse(GOOD, Path::new("/app")).expect("valid manifest");
    assert_eq!(m.name, "demo");
    assert_eq!(m.settings.timeout_ms, 1000);
    assert_eq!(m.settings.memory_limit_mb, 64);
    assert_eq!(m.http_triggers[0].route.as_str(), "/smoke/...");
    assert_eq!(m.cron_triggers[0].cron_expression, "*/5 * * * * *");
    let smoke = &m.components["smoke"];
    assert_eq!(smoke.source, Path::new("/app/smoke.wasm"));
    assert!(smoke.grants.allows(Capability::Sql));
    assert!(!smoke.grants.allows(Capability::Kube));
    assert_eq!(
        smoke.grants.migrations.as_deref(),
        Some(Path::new("/app/migrations"))
    );
    assert!(m.variables["token"].required);
}

#[test]
fn the_host_error_format_is_plain_unless_the_application_chooses_cf() {
    let m = parse(GOOD, Path::new("/app")).expect("valid manifest");
    assert_eq!(m.settings.error_format, ErrorFormat::Plain);
    let cf = GOOD.replace(
        "timeout_ms = 1000",
        "timeout_ms = 1000\nerror_format = \"cf\"",
    );
    let m = parse(&cf, Path::new("/app")).expect("valid manifest");
    assert_eq!(m.settings.error_format, ErrorFormat::Cf);
    let bad = GOOD.replace(
        "timeout_ms = 1000",
        "timeout_ms = 1000\nerror_format = \"xml\"",
    );
    let err = format!(
        "{:#}",
        parse(&bad, Path::new("/")).expect_err("unknown format")
    );
    assert!(err.contains("xml"), "{err}");
}

#[test]
fn ignores_the_spin_adapter_dependency_and_the_grants_made_for_it() {
    let spin = GOOD.replace(
            "[component.smoke.tool.lethe]",
            "[component.smoke.dependencies]\n\"lethe:platform@0.1.0\" = { path = \"spin_adapter.wasm\" }\n\n[component.smoke.tool.lethe]",
        );
    let with_grants = spin.replace(
            "variables = { greeting = \"{{ greeting }}!\" }",
            "variables = { greeting = \"{{ greeting }}!\" }\nsqlite_databases = [\"default\"]\nallowed_outbound_hosts = [\"{{ greeting }}\"]\ndependencies_inherit_configuration = true",
        );
    let m = parse(&with_grants, Path::new("/app")).expect("the one manifest for Spin and lethe");
    assert!(m.components["smoke"].grants.allows(Capability::Sql));
    // Without the dependency those grants would be the component's own: refused.
    let own = with_grants.replace("\"lethe:platform@0.1.0\"", "\"acme:cache@1.0.0\"");
    let err = parse(&own, Path::new("/")).expect_err("a dependency lethe cannot supply");
    assert!(format!("{err:#}").contains("acme:cache@1.0.0"), "{err:#}");
    let no_dependency = GOOD.replace(
        "variables = { greeting = \"{{ greeting }}!\" }",
        "variables = { greeting = \"{{ greeting }}!\" }\nallowed_outbound_hosts = [\"{{ greeting }}\"]",
    );
    assert!(parse(&no_dependency, Path::new("/")).is_err());
}

/// A component's `sql` calls reach the one database label `sqlite_databases` lists (as Spin's
/// grant does), else `default`; the label the Spin adapter opens must be the same.
#[test]
fn a_component_reaches_the_one_database_label_it_lists() {
    let with = |lines: &str| {
        GOOD.replace(
            "variables = { greeting = \"{{ greeting }}!\" }",
            &format!("variables = {{ greeting = \"{{{{ greeting }}}}!\" }}\n{lines}"),
        )
    };
    let m = parse(GOOD, Path::new("/app")).expect("no label");
    assert_eq!(m.components["smoke"].database.as_deref(), Some("default"));
    let m = parse(&with("sqlite_databases = [\"notes\"]"), Path::new("/app")).expect("a label");
    assert_eq!(m.components["smoke"].database.as_deref(), Some("notes"));
    assert_eq!(
        m.database_labels(),
        BTreeMap::from([("notes".to_owned(), vec!["smoke".to_owned()])])
    );
    let adapted = with("sqlite_databases = [\"notes\"]").replace(
        "variables = { greeting = \"{{ greeting }}!\" }",
        "variables = { greeting = \"{{ greeting }}!\", sqlite_database = \"notes\" }",
    );
    assert!(parse(&adapted, Path::new("/app")).is_ok());
    for (bad, says) in [
        (
            "sqlite_databases = [\"a\", \"b\"]",
            "one database per component",
        ),
        ("sqlite_databases = [\"Data_Jobs\"]", "lowercase"),
        ("sqlite_databases = [\"../x\"]", "lowercase"),
    ] {
        let err = parse(&with(bad), Path::new("/app")).expect_err(bad);
        assert!(format!("{err:#}").contains(says), "{bad}: {err:#}");
    }
    let disagreeing = adapted.replace("sqlite_database = \"notes\"", "sqlite_database = \"other\"");
    let err = parse(&disagreeing, Path::new("/app")).expect_err("the adapter would open another");
    assert!(format!("{err:#}").contains("sqlite_database"), "{err:#}");
    let without_sql = with("sqlite_databases = [\"notes\"]").replace("\"sql\", ", "");
    let err = parse(&without_sql, Path::new("/app")).expect_err("a label without sql");
    assert!(format!("{err:#}").contains("`sql` capability"), "{err:#}");
    let m = parse(
        &GOOD
            .replace("\"sql\", ", "")
            .replace("migrations = \"migrations\"\n", ""),
        Path::new("/app"),
    )
    .expect("no sql");
    assert_eq!(m.components["smoke"].database, None);
}

#[test]
fn rejects_unknown_keys_like_spin() {
    let bad = GOOD.replace(
        "[application.tool.lethe]",
        "[application.tool.lethe]\nbogus = 1",
    );
    assert!(parse(&bad, Path::new("/")).is_err());
    let bad = GOOD.replace("name = \"demo\"", "name = \"demo\"\ngrants = []");
    assert!(parse(&bad, Path::new("/")).is_err());
}

#[test]
fn rejects_unknown_trigger_component_and_bad_cron() {
    let bad = GOOD.replace(
        "component = \"smoke\"\n\n[[trigger.cron]]",
        "component = \"nope\"\n\n[[trigger.cron]]",
    );
    let err = format!(
        "{:#}",
        parse(&bad, Path::new("/")).expect_err("unknown component")
    );
    assert!(err.contains("unknown component `nope`"), "{err}");
    let bad = GOOD.replace("*/5 * * * * *", "* * * * *");
    assert!(
        parse(&bad, Path::new("/")).is_err(),
        "5-field cron must be rejected"
    );
}

#[test]
fn rejects_undeclared_variable_reference() {
    let bad = GOOD.replace("{{ greeting }}!", "{{ missing }}");
    let err = format!("{:#}", parse(&bad, Path::new("/")).expect_err("undeclared"));
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn rejects_identity_grant_without_kube() {
    let bad = GOOD.replace(
        "migrations = \"migrations\"",
        "kube_identities = [\"privileged\"]",
    );
    assert!(parse(&bad, Path::new("/")).is_err());
}

#[test]
fn the_kube_rate_limit_defaults_to_client_go_and_rejects_what_cannot_limit() {
    let m = parse(GOOD, Path::new("/")).expect("good");
    let smoke = &m.components["smoke"].grants;
    assert_eq!(
        smoke.kube_rate_limit(),
        lethe_kube::RateLimitOptions::default()
    );
    let set = GOOD.replace(
        "migrations = \"migrations\"",
        "kube_qps = 0.5\nkube_burst = 3",
    );
    let m = parse(&set, Path::new("/")).expect("set");
    assert_eq!(
        m.components["smoke"].grants.kube_rate_limit(),
        lethe_kube::RateLimitOptions { qps: 0.5, burst: 3 }
    );
    for bad in ["kube_qps = 0", "kube_qps = -2", "kube_burst = 0"] {
        let bad = GOOD.replace("migrations = \"migrations\"", bad);
        let err = format!("{:#}", parse(&bad, Path::new("/")).expect_err(&bad));
        assert!(
            err.contains("[component.smoke.tool.lethe]") && err.contains("kube_"),
            "{err}"
        );
    }
}

#[test]
fn expands_templates() {
    let v = expand_template("a{{ x }}b{{y}}", |n| Some(n.to_uppercase())).expect("expand");
    assert_eq!(v, "aXbY");
    assert!(expand_template("{{ x", |_| Some(String::new())).is_err());
    assert!(expand_template("{{ x }}", |_| None).is_err());
}

/// Objects applied only while a variable has a value name one of the component's variables, and
/// resolve against the manifest's directory.
#[test]
fn manifests_for_a_preset_name_one_of_the_components_variables() {
    let when = "\n[[component.smoke.tool.lethe.kubernetes_manifests_when]]\nvariable = \"greeting\"\nequals = \"korifi\"\nfiles = [\"k/rbac.yaml\"]\n";
    let m = parse(&format!("{GOOD}{when}"), Path::new("/app")).expect("valid");
    let grants = &m.components["smoke"].grants;
    assert_eq!(
        grants.kubernetes_manifests_when,
        [ManifestsWhen {
            variable: "greeting".into(),
            equals: "korifi".into(),
            files: vec![PathBuf::from("/app/k/rbac.yaml")],
        }]
    );
    let unknown = when.replace("\"greeting\"", "\"job_types\"");
    let err = parse(&format!("{GOOD}{unknown}"), Path::new("/app")).expect_err("no such variable");
    assert!(format!("{err:#}").contains("job_types"), "{err:#}");
}
