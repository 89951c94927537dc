//! The template files, compiled into the binary, and the texts `lethe new` writes beside them.

/// One template file: its path below the component directory and its text.
pub(super) type File = (&'static str, &'static str);

pub(super) const HTTP_MIGRATION: File = (
    "migrations/0001_items.sql",
    include_str!("../../templates/http/migrations/0001_items.sql"),
);

pub(super) const HTTP_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/http/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/http/rust/src/lib.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../../templates/http/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../../templates/http/rust/src/tests.rs"),
    ),
    HTTP_MIGRATION,
];

pub(super) const JOB_STATUS_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/job-status/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/job-status/rust/src/lib.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../../templates/job-status/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../../templates/job-status/rust/src/tests.rs"),
    ),
];

pub(super) const RECONCILER_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/reconciler/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/reconciler/rust/src/lib.rs"),
    ),
    (
        "src/api.rs",
        include_str!("../../templates/reconciler/rust/src/api.rs"),
    ),
    (
        "src/reconcile.rs",
        include_str!("../../templates/reconciler/rust/src/reconcile.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../../templates/reconciler/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../../templates/reconciler/rust/src/tests.rs"),
    ),
    (
        "migrations/0001_desired.sql",
        include_str!("../../templates/reconciler/migrations/0001_desired.sql"),
    ),
    (
        "kubernetes/rbac.json",
        include_str!("../../templates/reconciler/kubernetes/rbac.json"),
    ),
];

pub(super) const HTTP_PYTHON: &[File] = &[
    (
        "pyproject.toml",
        include_str!("../../templates/http/python/pyproject.toml"),
    ),
    ("app.py", include_str!("../../templates/http/python/app.py")),
    (
        "logic.py",
        include_str!("../../templates/http/python/logic.py"),
    ),
    (
        "test_logic.py",
        include_str!("../../templates/http/python/test_logic.py"),
    ),
    HTTP_MIGRATION,
];

/// The namespace and ServiceAccount of lethe's own identity, for an application that has none.
pub(super) const IDENTITY: File = (
    "lethe-identity.json",
    include_str!("../../templates/reconciler/identity.json"),
);

/// The lock file of lethe's own workspace: a crate outside it starts from the exact versions the
/// SDK was tested with (cargo drops the entries it does not need on the first build).
pub(super) const WORKSPACE_LOCK: &str = include_str!("../../../../Cargo.lock");

/// The application variables that let a component's Kubernetes calls work on Spin too (through
/// lethe's Spin adapter); `spin.toml`s that `lethe new` writes declare them.
pub(super) const SPIN_KUBE_VARIABLES: &str = r#"# Only for `spin up` (lethe reaches the cluster itself and ignores them): the Kubernetes API the
# Spin adapter calls, and the bearer token of lethe's privileged identity.
kube_url = { default = "http://127.0.0.1:6480" }
kube_token = { default = "", secret = true }
"#;
