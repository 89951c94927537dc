//! Builds the handler components for wasm32-wasip2, so that building or testing the host always
//! runs against components built from the same tree. They land in `target/wasm/wasm32-wasip2/wasm/`,
//! the paths `spin.toml` names.
//!
//! Components written in Python (a directory under `components/` with an `app.py`) are built
//! with componentize-py, against the world and with the guest SDK their `pyproject.toml` names
//! (`[tool.lethe] world`, `sdk`), when componentize-py is installed (`LETHE_COMPONENTIZE_PY` names it, else `componentize-py` on the
//! `PATH`); without it they are left out, with a warning, and the tests that serve them say why.
//!
//! Then it composes every handler whose lethe imports an adapter component supplies with that
//! adapter, into `…/wasm/foreign/`: a handler without `sql` with `wasi-adapter` (`kube`, `log`,
//! `config` over standard WASI), so it imports only standard WASI (`wasmtime serve`, jco, any WASI
//! 0.2 host); one with `sql` with `spin-adapter` (every `lethe:platform` interface, over WASI and
//! Spin's SQLite and variables), as Spin's component `dependencies` compose it at load time.

// A build script: a failure stops the build, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .join("../..")
        .canonicalize()
        .expect("workspace root");
    let components = root.join("components");
    println!("cargo:rerun-if-changed={}", components.display());
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-env-changed=LETHE_SKIP_COMPONENT_BUILD");
    println!("cargo:rerun-if-env-changed=LETHE_COMPONENTIZE_PY");
    println!("cargo:rerun-if-env-changed=PATH");

    let out_dir = root.join("target/wasm").join(TARGET).join("wasm");
    println!("cargo:rustc-env=LETHE_COMPONENTS_DIR={}", out_dir.display());
    println!("cargo:rustc-env=LETHE_REPO_ROOT={}", root.display());
    if std::env::var_os("LETHE_SKIP_COMPONENT_BUILD").is_some() {
        return;
    }

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    if !target_installed(&rustc) {
        panic!(
            "\n\nlethe's components are built for `{TARGET}`, which this Rust toolchain does not have.\n\
             Fix: rustup target add {TARGET}\n\n"
        );
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--profile",
            "wasm",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(root.join("target/wasm"));
    for crate_name in component_crates(&components) {
        cmd.args(["-p", &crate_name]);
    }
    // The outer build's settings are for the host; the components get their own.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("cannot run cargo to build the components");
    if !status.success() {
        panic!("building the wasm32-wasip2 components failed (see the cargo output above)");
    }
    for dir in python_components(&components) {
        if let Err(e) = build_python(&root, &dir, &out_dir) {
            panic!(
                "building the Python component {} failed: {e:#}",
                dir.display()
            );
        }
    }
    if let Err(e) = compose_for_foreign_hosts(&out_dir) {
        panic!("composing the components with the adapters failed: {e:#}");
    }
}

/// The adapter components and the `lethe:platform` capabilities each one exports, the one that
/// needs least of its host first: a handler is composed with the first that supplies all it
/// imports.
const ADAPTERS: [(&str, &[&str]); 2] = [
    ("wasi_adapter.wasm", &["kube", "log", "config"]),
    ("spin_adapter.wasm", &["kube", "log", "config", "sql"]),
];

/// Writes `foreign/<name>.wasm` for every handler whose lethe imports the adapters supply.
fn compose_for_foreign_hosts(out_dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut adapters = Vec::new();
    for (file, exports) in ADAPTERS {
        let path = out_dir.join(file);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        adapters.push((file, exports, bytes));
    }
    let foreign = out_dir.join("foreign");
    std::fs::create_dir_all(&foreign)?;
    for entry in std::fs::read_dir(out_dir)?.flatten() {
        let path = entry.path();
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !file_name.ends_with(".wasm") || ADAPTERS.iter().any(|(a, _)| *a == file_name) {
            continue;
        }
        let target = foreign.join(file_name);
        let handler = std::fs::read(&path)?;
        match compose(&adapters, &handler).with_context(|| format!("{}", path.display()))? {
            Some(composed) => std::fs::write(&target, composed)?,
            // Nothing to adapt, or a capability no adapter supplies: no foreign build, and none
            // left over from an earlier one.
            None => {
                let _ = std::fs::remove_file(&target);
            }
        }
    }
    Ok(())
}

/// `handler` with its `lethe:platform` imports satisfied by the first adapter that exports them
/// all, or `None` when it imports no lethe capability or one no adapter supplies. `types` holds
/// only types, which a host need not supply.
fn compose(
    adapters: &[(&str, &[&str], Vec<u8>)],
    handler: &[u8],
) -> anyhow::Result<Option<Vec<u8>>> {
    use wac_graph::{CompositionGraph, EncodeOptions, types::Package};
    let mut graph = CompositionGraph::new();
    let socket = Package::from_bytes("lethe:handler", None, handler.to_vec(), graph.types_mut())?;
    let capabilities: Vec<String> = graph.types()[socket.ty()]
        .imports
        .keys()
        .filter_map(|name| name.strip_prefix("lethe:platform/"))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .filter(|name| name != "types")
        .collect();
    let adapter = adapters
        .iter()
        .find(|(_, exports, _)| capabilities.iter().all(|c| exports.contains(&c.as_str())));
    let (Some((file, _, bytes)), false) = (adapter, capabilities.is_empty()) else {
        return Ok(None);
    };
    let socket = graph.register_package(socket)?;
    let name = format!("lethe:{}", file.trim_end_matches(".wasm").replace('_', "-"));
    let plug = Package::from_bytes(&name, None, bytes.clone(), graph.types_mut())?;
    let plug = graph.register_package(plug)?;
    wac_graph::plug(&mut graph, vec![plug], socket)?;
    Ok(Some(graph.encode(EncodeOptions::default())?))
}

/// Every directory under `components/` that holds a Python component (an `app.py`).
fn python_components(components: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(components)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.join("app.py").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The componentize-py to build Python components with, if there is one.
fn componentize_py() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("LETHE_COMPONENTIZE_PY") {
        return Some(PathBuf::from(named));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("componentize-py"))
        .find(|candidate| candidate.is_file())
}

/// Builds the Python component in `dir` into `<out_dir>/<name>.wasm` (`-` as `_`, as cargo names
/// wasm files), against the world its `pyproject.toml` names, unless it is newer than every source
/// it is built from.
fn build_python(root: &Path, dir: &Path, out_dir: &Path) -> anyhow::Result<()> {
    use anyhow::{Context as _, bail};
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("component directory name")?;
    let output = out_dir.join(format!("{}.wasm", name.replace('-', "_")));
    let Some(tool) = componentize_py() else {
        println!(
            "cargo:warning=componentize-py is not installed, so the Python component `{name}` is not built (pip install componentize-py==0.25.1)"
        );
        let _ = std::fs::remove_file(&output);
        return Ok(());
    };
    let project: toml::Table = std::fs::read_to_string(dir.join("pyproject.toml"))
        .context("reading pyproject.toml")?
        .parse()
        .context("parsing pyproject.toml")?;
    let setting = |key: &str| {
        project
            .get("tool")
            .and_then(|t| t.get("lethe"))
            .and_then(|t| t.get(key))
            .and_then(|v| v.as_str())
            .with_context(|| format!("pyproject.toml has no [tool.lethe] {key}"))
    };
    let world = setting("world")?;
    let sdk = dir.join(setting("sdk")?);
    let sources = [
        dir.to_path_buf(),
        sdk.clone(),
        root.join("wit"),
        tool.clone(),
    ];
    if newer_than_all(&output, &sources) {
        return Ok(());
    }
    std::fs::create_dir_all(out_dir)?;
    let status = Command::new(&tool)
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", world, "--quiet"])
        .args(["componentize", "app", "-p"])
        .arg(dir)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(&output)
        .status()
        .with_context(|| format!("cannot run {}", tool.display()))?;
    if !status.success() {
        bail!("{} exited with {status}", tool.display());
    }
    Ok(())
}

/// Whether `output` exists and was written after every file under `sources` last changed.
fn newer_than_all(output: &Path, sources: &[PathBuf]) -> bool {
    fn latest(path: &Path) -> Option<std::time::SystemTime> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_dir() {
            return meta.modified().ok();
        }
        std::fs::read_dir(path)
            .ok()?
            .flatten()
            .filter(|e| e.file_name() != "__pycache__")
            .filter_map(|e| latest(&e.path()))
            .max()
    }
    let Some(built) = std::fs::metadata(output).and_then(|m| m.modified()).ok() else {
        return false;
    };
    sources
        .iter()
        .all(|s| latest(s).is_some_and(|changed| changed < built))
}

/// Whether the standard library for the wasm target is installed in rustc's sysroot.
fn target_installed(rustc: &str) -> bool {
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib")
        .is_dir()
}

/// Every crate under `components/` that builds a component (a `cdylib`).
fn component_crates(components: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(entries) = std::fs::read_dir(components) else {
        return names;
    };
    for entry in entries.flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if !text.contains("cdylib") {
            continue;
        }
        if let Some(name) = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("name = \"")
                .and_then(|r| r.strip_suffix('"'))
        }) {
            names.push(name.to_string());
        }
    }
    names.sort();
    names
}
