use super::*;

#[test]
fn names_are_checked() {
    for good in ["a", "hello", "team-jobs2", &"a".repeat(40)] {
        assert!(check_name(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "Hello",
        "1st",
        "a_b",
        "a--b",
        "a-",
        "-a",
        "a/b",
        "../x",
        &"a".repeat(41),
    ] {
        assert!(check_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn kinds_are_parsed() {
    let kind: Kind = "apps/v1/Deployment".parse().expect("kind");
    assert_eq!(
        (kind.api_version.as_str(), kind.kind.as_str()),
        ("apps/v1", "Deployment")
    );
    let core: Kind = "v1/ConfigMap".parse().expect("core kind");
    assert_eq!(core.api_version, "v1");
    for bad in [
        "ConfigMap",
        "v1/configMap",
        "apps/Deployment",
        "/v1/A",
        "a/b/c/D",
        "v1/Config-Map",
    ] {
        assert!(bad.parse::<Kind>().is_err(), "{bad}");
    }
}

#[test]
fn the_job_status_template_needs_a_kind_and_grants_no_sql() {
    let app = tempfile::tempdir().expect("tempdir");
    let mut new = new_in(app.path(), Lang::Rust);
    new.template = Template::JobStatus;
    assert!(new.write().is_err(), "no --kind");
    new.kind = Some("v1/ConfigMap".parse().expect("kind"));
    let made = new.write().expect("lethe new job-status");
    let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
    let grants = &manifest.components["hello"].grants;
    assert!(!grants.allows(crate::manifest::Capability::Sql));
    assert!(grants.migrations.is_none());
    let lib = std::fs::read_to_string(made.dir.join("src/lib.rs")).expect("lib.rs");
    assert!(
        lib.contains("\"configmap\"") && lib.contains("\"ConfigMap\""),
        "{lib}"
    );
}

#[test]
fn a_kind_names_its_group_and_resource_as_rbac_does() {
    for (kind, group, resource) in [
        ("v1/ConfigMap", "", "configmaps"),
        ("apps/v1/Deployment", "apps", "deployments"),
        (
            "networking.k8s.io/v1/Ingress",
            "networking.k8s.io",
            "ingresses",
        ),
        (
            "networking.k8s.io/v1/NetworkPolicy",
            "networking.k8s.io",
            "networkpolicies",
        ),
        ("example.com/v1/Gateway", "example.com", "gateways"),
    ] {
        let kind: Kind = kind.parse().expect("kind");
        assert_eq!((kind.group(), kind.resource().as_str()), (group, resource));
    }
}

#[test]
fn the_reconciler_template_brings_its_rbac_and_the_identity_that_uses_it() {
    let app = tempfile::tempdir().expect("tempdir");
    let mut new = new_in(app.path(), Lang::Rust);
    new.template = Template::Reconciler;
    new.name = "keeper".into();
    assert!(new.write().is_err(), "no --kind");
    new.kind = Some(
        "rbac.authorization.k8s.io/v1/RoleBinding"
            .parse()
            .expect("kind"),
    );
    assert!(
        new.write().is_err(),
        "RBAC's kinds would escalate through lethe"
    );
    new.kind = Some("apps/v1/Deployment".parse().expect("kind"));
    let made = new.write().expect("lethe new reconciler");
    let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
    assert_eq!(
        manifest.settings.service_account.as_deref(),
        Some("lethe-system/lethe")
    );
    let applied: Vec<String> = manifest
        .kubernetes_manifests()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        applied[0].ends_with("lethe-identity.json")
            && applied[1].ends_with("components/keeper/kubernetes/rbac.json"),
        "{applied:?}"
    );
    // The reconciler acts as an account of its own, which its file binds; lethe's own account
    // may only impersonate it.
    assert_eq!(
        manifest.component_account("keeper"),
        Some(("lethe-system".to_string(), "lethe-keeper".to_string()))
    );
    let component = &manifest.components["keeper"];
    assert!(component.grants.allows(crate::manifest::Capability::Sql));
    assert_eq!(component.grants.kube_identities.len(), 2);
    let rbac: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(made.dir.join("kubernetes/rbac.json")).expect("rbac.json"),
    )
    .expect("rbac.json is JSON");
    let items = rbac["items"].as_array().expect("items");
    let of_kind = |kind: &'static str| items.iter().filter(move |i| i["kind"] == kind);
    let rule = &of_kind("ClusterRole").next().expect("a ClusterRole")["rules"][0];
    assert_eq!(
        (&rule["apiGroups"][0], &rule["resources"][0]),
        (
            &serde_json::json!("apps"),
            &serde_json::json!("deployments")
        )
    );
    for binding in of_kind("ClusterRoleBinding").chain(of_kind("RoleBinding")) {
        let subject = &binding["subjects"][0];
        let impersonation = binding["roleRef"]["name"] == "lethe-impersonate-keeper";
        assert_eq!(
            subject["name"],
            if impersonation {
                "lethe"
            } else {
                "lethe-keeper"
            },
            "{binding}"
        );
    }
    let impersonation = of_kind("Role")
        .find(|r| r["metadata"]["name"] == "lethe-impersonate-keeper")
        .expect("the impersonation Role");
    assert_eq!(
        impersonation["rules"][0]["resourceNames"],
        serde_json::json!(["lethe-keeper"])
    );
    let lib = std::fs::read_to_string(made.dir.join("src/lib.rs")).expect("lib.rs");
    assert!(
        lib.contains("\"deployments\"") && lib.contains("\"apps/v1\""),
        "{lib}"
    );

    // A second reconciler joins the list the first one started.
    new.name = "second".into();
    new.write().expect("a second reconciler");
    let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
    assert_eq!(manifest.kubernetes_manifests().len(), 3);
    assert_eq!(
        manifest.settings.kubernetes_manifests.len(),
        1,
        "the application's own"
    );
}

#[test]
fn a_member_joins_the_workspace_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("Cargo.toml");
    std::fs::write(
            &path,
            "[workspace]\nmembers = [\n    \"a\",\n    \"b\"\n]\n\n[workspace.dependencies]\nx = \"1\"\n",
        )
        .expect("write");
    join_workspace(&path, "components/c").expect("join");
    let text = std::fs::read_to_string(&path).expect("read");
    let parsed: toml::Table = text.parse().expect("still TOML");
    let members: Vec<&str> = parsed["workspace"]["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    assert_eq!(members, ["a", "b", "components/c"]);
    assert!(text.contains("x = \"1\""), "the rest is kept:\n{text}");
}

fn new_in(app: &Path, lang: Lang) -> NewComponent {
    NewComponent {
        template: Template::Http,
        name: "hello".into(),
        lang,
        kind: None,
        app_dir: app.to_path_buf(),
        lethe_root: PathBuf::from(crate::REPO_ROOT),
    }
}

#[test]
fn a_new_application_gets_a_manifest_lethe_accepts() {
    for lang in [Lang::Rust, Lang::Python] {
        let app = tempfile::tempdir().expect("tempdir");
        let made = new_in(app.path(), lang).write().expect("lethe new");
        assert!(!made.in_workspace);
        let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
        let component = &manifest.components["hello"];
        assert!(
            component.grants.kube_identities.len() == 1,
            "the caller only: {:?}",
            component.grants.kube_identities
        );
        assert_eq!(
            component.database.as_deref(),
            Some("hello"),
            "a database label of its own"
        );
        let text = std::fs::read_to_string(&made.manifest).expect("manifest");
        assert!(text.contains("route = \"/hello/...\""), "{text}");
        let spin: toml::Table = std::fs::read_to_string(app.path().join(SPIN_RUNTIME_CONFIG))
            .expect("Spin's runtime config")
            .parse()
            .expect("TOML");
        assert_eq!(
            spin["sqlite_database"]["hello"]["path"].as_str(),
            Some(".spin/lethe-hello.db"),
            "on Spin the label is the file `lethe migrate` prepares"
        );
        for placeholder in ["__NAME__", "__SNAKE__", "__SDK__", "__DEPENDENCIES__"] {
            let found = walk(&made.dir)
                .into_iter()
                .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(placeholder)));
            assert_eq!(found, None, "{placeholder} left in a file");
        }
    }
}

#[test]
fn an_application_outside_the_checkout_carries_the_spin_adapter_in_its_own_build_output() {
    let app = tempfile::tempdir().expect("tempdir");
    let made = new_in(app.path(), Lang::Rust).write().expect("lethe new");
    let text = std::fs::read_to_string(&made.manifest).expect("manifest");
    assert!(
        text.contains(r#""lethe:platform@0.1.0" = { path = "target/lethe/spin_adapter.wasm" }"#),
        "{text}"
    );
    assert!(
        !text.contains(crate::REPO_ROOT),
        "the manifest names lethe's checkout:\n{text}"
    );
    let adapter = app.path().join("target/lethe/spin_adapter.wasm");
    assert_eq!(
        std::fs::read(&adapter).expect("the adapter is written"),
        crate::component_build::SPIN_ADAPTER
    );
    // `lethe build` writes it again where the manifest expects it (a fresh clone has no target/).
    let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
    assert_eq!(
        manifest.components["hello"].platform_adapter.as_deref(),
        Some(adapter.as_path())
    );
    std::fs::remove_file(&adapter).expect("remove");
    let moved = tempfile::tempdir().expect("tempdir");
    let manifest_text = std::fs::read_to_string(&made.manifest).expect("manifest");
    std::fs::write(moved.path().join("spin.toml"), manifest_text).expect("write");
    let manifest = crate::manifest::load(&moved.path().join("spin.toml")).expect("loads");
    let mut components = manifest.components.clone();
    // Only the adapter step: the crate's own build is cargo's, tested by tests/scaffold.rs.
    if let Some(c) = components.get_mut("hello") {
        c.build = Some(crate::manifest::Build {
            commands: vec!["true".into()],
            workdir: moved.path().to_path_buf(),
            watch: vec![],
        });
    }
    let manifest = crate::manifest::Manifest {
        components,
        ..manifest
    };
    crate::component_build::build_all(&manifest, None).expect("lethe build");
    assert_eq!(
        std::fs::read(moved.path().join("target/lethe/spin_adapter.wasm")).expect("rewritten"),
        crate::component_build::SPIN_ADAPTER
    );
}

#[test]
fn a_taken_name_or_directory_is_refused_and_nothing_is_written() {
    let app = tempfile::tempdir().expect("tempdir");
    new_in(app.path(), Lang::Rust).write().expect("first");
    let manifest = std::fs::read_to_string(app.path().join("spin.toml")).expect("manifest");
    let again = new_in(app.path(), Lang::Python).write();
    assert!(again.is_err());
    assert_eq!(
        std::fs::read_to_string(app.path().join("spin.toml")).expect("manifest"),
        manifest
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
