//! Renders the reconciler template as `lethe new reconciler keeper --kind v1/ConfigMap` would,
//! into one crate root: its modules inlined (`include!` takes no inner attributes, so the
//! modules' own `//!` documentation is left out), its wasm edges and its generated tests left
//! out (the simulator is its test here).

use std::io;
use std::path::Path;

const TEMPLATE: &str = "../../host/lethe/templates/reconciler";

fn render(text: &str) -> String {
    [
        ("__NAME__", "keeper"),
        ("__KIND__", "ConfigMap"),
        ("__API_VERSION__", "v1"),
        ("__GROUP__", ""),
        ("__RESOURCE__", "configmaps"),
        ("__JOB_TYPE__", "configmap"),
        ("__SNAKE__", "keeper"),
    ]
    .iter()
    .fold(text.to_string(), |text, (from, to)| text.replace(from, to))
}

/// The template's file at `path`, read (and watched by Cargo).
fn read(path: &str) -> io::Result<String> {
    println!("cargo:rerun-if-changed={path}");
    std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

fn source(out: &Path, module: &str) -> io::Result<String> {
    let text = read(&format!("{TEMPLATE}/rust/src/{module}.rs"))?;
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with("//!")).collect();
    let mut body = render(&body.join("\n"));
    for inlined in ["api", "reconcile"] {
        let included = out.join(format!("{inlined}.rs"));
        body = body.replace(
            &format!("pub mod {inlined};"),
            &format!(
                "pub mod {inlined} {{ include!({:?}); }}",
                included.display()
            ),
        );
    }
    for edge in [
        "#[cfg(target_arch = \"wasm32\")]\nmod wasm;",
        "#[cfg(test)]\nmod tests;",
    ] {
        body = body.replace(edge, "");
    }
    Ok(body)
}

fn main() -> io::Result<()> {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    for module in ["lib", "api", "reconcile"] {
        std::fs::write(out.join(format!("{module}.rs")), source(&out, module)?)?;
    }
    let migrations = out.join("migrations");
    std::fs::create_dir_all(&migrations)?;
    let sql = read(&format!("{TEMPLATE}/migrations/0001_desired.sql"))?;
    std::fs::write(migrations.join("0001_desired.sql"), render(&sql))
}
