//! Loading a component's SQL migrations: files named `NNNN_description.sql` in the directory its
//! grants name, applied in numeric order before anything is served.

use std::path::Path;

use anyhow::{Context as _, bail};

/// Most migrations one component may have.
pub const MAX_PER_COMPONENT: i64 = 10_000;

/// Reads the migrations of `component` from `dir`. Components share one migrations table, so
/// each component gets its own range of versions (derived from its id, stable across runs) and
/// each migration is named `<component>/<file stem>`.
pub fn load(component: &str, dir: &Path) -> anyhow::Result<Vec<lethe_sql::Migration>> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read migrations directory {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("sql") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .with_context(|| format!("migration file name is not UTF-8: {}", path.display()))?;
        let (number, _) = stem
            .split_once('_')
            .with_context(|| format!("migration `{stem}` must be named NNNN_description.sql"))?;
        let number: i64 = number
            .parse()
            .with_context(|| format!("migration `{stem}` must start with a number"))?;
        let sql = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !(0..MAX_PER_COMPONENT).contains(&number) {
            bail!(
                "migration `{stem}`: numbers run from 0 to {}",
                MAX_PER_COMPONENT - 1
            );
        }
        found.push((number, format!("{component}/{stem}"), sql));
    }
    found.sort_by_key(|(n, _, _)| *n);
    for pair in found.windows(2) {
        if pair[0].0 == pair[1].0 {
            bail!(
                "migrations `{}` and `{}` share the number {}",
                pair[0].1,
                pair[1].1,
                pair[0].0
            );
        }
    }
    let base = component_range(component);
    Ok(found
        .into_iter()
        .map(|(number, name, sql)| lethe_sql::Migration {
            version: base + number,
            name,
            sql,
        })
        .collect())
}

/// The first version of `component`'s range: FNV-1a of its id, times [`MAX_PER_COMPONENT`].
fn component_range(component: &str) -> i64 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in component.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    i64::from(hash & 0x7fff_ffff) * MAX_PER_COMPONENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_in_numeric_order_with_component_prefix() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("0010_b.sql"), "SELECT 2").expect("write");
        std::fs::write(dir.path().join("0002_a.sql"), "SELECT 1").expect("write");
        std::fs::write(dir.path().join("README.md"), "ignored").expect("write");
        let m = load("smoke", dir.path()).expect("load");
        let names: Vec<_> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["smoke/0002_a", "smoke/0010_b"]);
        assert_eq!(
            m[1].version - m[0].version,
            8,
            "numbers keep their order and distance"
        );
        let other = load("other", dir.path()).expect("load");
        assert_ne!(
            other[0].version, m[0].version,
            "components get distinct version ranges"
        );
    }

    #[test]
    fn rejects_duplicate_numbers_and_bad_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("0001_a.sql"), "").expect("write");
        std::fs::write(dir.path().join("0001_b.sql"), "").expect("write");
        assert!(load("x", dir.path()).is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("first.sql"), "").expect("write");
        assert!(load("x", dir.path()).is_err());
    }
}
