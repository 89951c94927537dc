//! `lethe build`: runs the manifest's `[component.<id>.build]` commands, as `spin build` does,
//! so that a component made by `lethe new`, in any language, is built the same way here and on
//! Spin; and writes the Spin adapter this lethe carries wherever a component's `lethe:platform`
//! dependency expects it in the application's own build output ([`SPIN_ADAPTER_IN_APP`]), so an
//! application outside lethe's checkout names it by a path relative to its manifest.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::manifest::{Build, Manifest};

/// Where an application made by `lethe new` outside lethe's checkout keeps the Spin adapter,
/// relative to its manifest: its build output, beside the Python components' `.wasm`.
pub const SPIN_ADAPTER_IN_APP: &str = "target/lethe/spin_adapter.wasm";

/// The Spin adapter component (`components/spin-adapter`, every `lethe:platform` capability
/// over Spin's own), as this lethe was built with it.
pub const SPIN_ADAPTER: &[u8] =
    include_bytes!(concat!(env!("LETHE_COMPONENTS_DIR"), "/spin_adapter.wasm"));

/// Writes [`SPIN_ADAPTER`] to `path` (making its directory), unless it holds those bytes already.
pub fn write_spin_adapter(path: &Path) -> anyhow::Result<()> {
    if std::fs::read(path).is_ok_and(|bytes| bytes == SPIN_ADAPTER) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, SPIN_ADAPTER).with_context(|| format!("writing {}", path.display()))
}

/// Runs the build of every component of `manifest` that has one (or of `only`), in the
/// manifest's order, stopping at the first that fails, and writes the Spin adapter where a
/// built component's dependency expects it in the application's build output. Returns the ids
/// built.
pub fn build_all(manifest: &Manifest, only: Option<&str>) -> anyhow::Result<Vec<String>> {
    if let Some(id) = only
        && !manifest.components.contains_key(id)
    {
        bail!("the manifest has no component `{id}`");
    }
    let mut built = Vec::new();
    for (id, component) in &manifest.components {
        if only.is_some_and(|o| o != id) {
            continue;
        }
        let Some(build) = &component.build else {
            if only.is_some() {
                bail!("component `{id}` has no [component.{id}.build]");
            }
            continue;
        };
        run(id, build)?;
        if let Some(adapter) = &component.platform_adapter
            && *adapter == manifest.base_dir.join(SPIN_ADAPTER_IN_APP)
        {
            write_spin_adapter(adapter)?;
        }
        built.push(id.clone());
    }
    Ok(built)
}

/// Runs one component's build commands in its working directory.
pub fn run(id: &str, build: &Build) -> anyhow::Result<()> {
    for command in &build.commands {
        eprintln!(
            "building `{id}`: {command} (in {})",
            build.workdir.display()
        );
        let status = shell(command)
            .current_dir(&build.workdir)
            .status()
            .with_context(|| format!("cannot run the build of `{id}`"))?;
        if !status.success() {
            bail!("the build of `{id}` failed ({status}): {command}");
        }
    }
    Ok(())
}

/// `command` run by the platform's shell, as Spin runs build commands.
fn shell(command: &str) -> Command {
    if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/C", command]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", command]);
        c
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn manifest(dir: &Path, builds: &str) -> Manifest {
        let text = format!(
            "spin_manifest_version = 2\n[application]\nname = \"t\"\n\
             [component.a]\nsource = \"a.wasm\"\n{builds}"
        );
        crate::manifest::parse(&text, dir).expect("manifest")
    }

    #[test]
    fn commands_run_in_order_in_their_workdir() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("sub");
        let m = manifest(
            dir.path(),
            "[component.a.build]\ncommand = [\"echo one > out\", \"echo two >> out\"]\nworkdir = \"sub\"\n",
        );
        assert_eq!(build_all(&m, None).expect("build"), ["a"]);
        let out = std::fs::read_to_string(dir.path().join("sub/out")).expect("written in sub");
        assert_eq!(out, "one\ntwo\n");
    }

    #[test]
    fn a_failing_command_stops_the_build_and_names_the_component() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = manifest(
            dir.path(),
            "[component.a.build]\ncommand = [\"exit 3\", \"echo never > out\"]\n",
        );
        let e = build_all(&m, None).expect_err("fails");
        assert!(format!("{e:#}").contains("`a`"), "{e:#}");
        assert!(!dir.path().join("out").exists());
    }

    #[test]
    fn only_a_named_component_is_built_and_an_unknown_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = manifest(dir.path(), "");
        assert_eq!(
            build_all(&m, None).expect("nothing to build"),
            Vec::<String>::new()
        );
        assert!(build_all(&m, Some("a")).is_err(), "a has no build");
        assert!(build_all(&m, Some("b")).is_err(), "no component b");
    }

    #[test]
    fn a_build_table_without_a_command_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "spin_manifest_version = 2\n[application]\nname = \"t\"\n\
                    [component.a]\nsource = \"a.wasm\"\n[component.a.build]\nworkdir = \"x\"\n";
        assert!(crate::manifest::parse(text, dir.path()).is_err());
    }
}
