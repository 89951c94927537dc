//! Builds the handler components for wasm32-wasip2, so that building or testing the host always
//! runs against components built from the same tree. They land in `target/wasm/wasm32-wasip2/wasm/`,
//! the paths `spin.toml` names.

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
