//! The compiled-component cache: wasmtime's compiled artifact of a component, keyed by the
//! component's bytes (SHA-256) and the engine's compatibility hash, in one directory per user
//! (`$XDG_CACHE_HOME/lethe/components`, else `~/.cache/lethe/components`), so that every data dir,
//! every `lethe up` and every test of that user compiles a component once, as Spin's and
//! wasmtime's own caches do.
//!
//! Several `lethe` processes may use it at once:
//! - an entry is written to a file of its own and renamed into place, so a reader sees a whole
//!   artifact or none;
//! - a process about to compile an entry holds that entry's lock file (an advisory `flock`), so
//!   that a second process starting the same application waits for the first one's artifact
//!   rather than compiling it again on the same cores;
//! - an entry removed under a reader (eviction, `lethe cache clear`) is only a miss: a mapped
//!   file stays readable after its unlink, and a file gone before it was opened is compiled again.
//!
//! The cache is bounded: after each write, the entries least recently used (by their modification
//! time, which every hit refreshes) are removed until the total fits the limit.
//!
//! Loading an artifact runs machine code from the file, so the cache trusts its directory only
//! when the current user owns it and no one else may write to it; otherwise lethe warns and
//! compiles without it (it fails closed to the slow path, never to foreign code).

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context as _;
use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The default bound on the cache's size: many applications' worth of artifacts (lethe's own
/// five components take about 9 MB; a Python component about 36 MB), each for every engine
/// configuration that compiled it.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The file name ending of an artifact.
const ARTIFACT: &str = "cwasm";
/// The file name ending of an artifact's lock.
const LOCK: &str = "lock";
/// The part of a name that marks a file being written.
const PARTIAL: &str = ".partial-";

/// A compiled-component cache directory, checked and ready to use.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded from the cache.
    Cached,
    /// Compiled now (and written to the cache, if it could be).
    Compiled,
}

/// How much the cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Compiled artifacts.
    pub entries: u64,
    /// Their total size in bytes.
    pub bytes: u64,
}

impl ComponentCache {
    /// The user's default cache directory: `$XDG_CACHE_HOME/lethe/components`, else
    /// `$HOME/.cache/lethe/components`; `None` when neither variable is set to an absolute path
    /// (the XDG base directory specification ignores relative ones).
    pub fn default_dir() -> Option<PathBuf> {
        let absolute = |var: &str| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        absolute("XDG_CACHE_HOME")
            .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
            .map(|base| base.join("lethe").join("components"))
    }

    /// Opens (creating, private to the current user) the cache in `dir`, bounded to `max_bytes`.
    /// `Err` when the directory cannot be made or may not be trusted (see the module docs).
    pub fn open(dir: &Path, max_bytes: u64) -> anyhow::Result<ComponentCache> {
        create_private_dir(dir)
            .with_context(|| format!("cannot create the component cache {}", dir.display()))?;
        check_private(dir)?;
        Ok(ComponentCache {
            dir: dir.to_path_buf(),
            max_bytes,
        })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `bytes` compiled for `engine`: the cached artifact when there is one, else compiled now
    /// (while holding the entry's lock, so that another process compiling the same entry is
    /// waited for) and written to the cache. A cache that cannot be read or written only costs
    /// the compile: it is logged, never an error. A component the engine refuses is an error.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> anyhow::Result<(Component, Origin)> {
        let path = self.entry_path(engine, bytes);
        if let Some(component) = self.load(engine, &path) {
            return Ok((component, Origin::Cached));
        }
        let lock = match lock_entry(&path) {
            Ok(lock) => Some(lock),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot lock a component cache entry: {e}");
                None
            }
        };
        // Another process may have written it while this one waited for the lock.
        if lock.is_some()
            && let Some(component) = self.load(engine, &path)
        {
            return Ok((component, Origin::Cached));
        }
        let component = Component::new(engine, bytes)?;
        match write_entry(&component, &path) {
            Ok(()) => {
                drop(lock);
                if let Err(e) = self.evict() {
                    tracing::warn!(dir = %self.dir.display(), "cannot trim the component cache: {e}");
                }
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot cache a compiled component: {e:#}")
            }
        }
        Ok((component, Origin::Compiled))
    }

    /// The artifacts the cache holds now.
    pub fn usage(&self) -> io::Result<Usage> {
        let mut usage = Usage::default();
        for entry in self.artifacts()? {
            usage.entries += 1;
            usage.bytes += entry.bytes;
        }
        Ok(usage)
    }

    /// Removes every artifact, lock and partial write; returns what the artifacts were.
    pub fn clear(&self) -> io::Result<Usage> {
        let usage = self.usage()?;
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if is_ours(&path) {
                remove_if_present(&path)?;
            }
        }
        Ok(usage)
    }

    fn entry_path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        use std::hash::{Hash as _, Hasher as _};
        // `DefaultHasher::new` has fixed keys, so the name is the same in every process of one
        // lethe build; another wasmtime has another compatibility hash anyway.
        let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
        engine
            .precompile_compatibility_hash()
            .hash(&mut engine_hash);
        let digest = Sha256::digest(bytes);
        self.dir.join(format!(
            "{}-{:016x}.{ARTIFACT}",
            hex::encode(digest),
            engine_hash.finish()
        ))
    }

    /// The artifact at `path`, if there is a usable one; a hit counts as a use for eviction.
    fn load(&self, engine: &Engine, path: &Path) -> Option<Component> {
        // SAFETY: the file was written by `Component::serialize` for an engine with this
        // compatibility hash (its name carries it; wasmtime checks it again in the header), into a
        // directory that `check_private` found writable by the current user alone.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => {
                // The last use, for eviction; a failure only makes the entry look older.
                let _ = File::options()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Some(component)
            }
            Err(e) => {
                if path.exists() {
                    tracing::warn!(path = %path.display(), "ignoring an unusable compiled component: {e:#}");
                }
                None
            }
        }
    }

    /// Removes the least recently used artifacts (and their locks) until the rest fit the bound.
    fn evict(&self) -> io::Result<()> {
        let mut artifacts = self.artifacts()?;
        let mut total: u64 = artifacts.iter().map(|a| a.bytes).sum();
        if total <= self.max_bytes {
            return Ok(());
        }
        artifacts.sort_by_key(|a| a.used);
        for artifact in artifacts {
            if total <= self.max_bytes {
                break;
            }
            remove_if_present(&artifact.path)?;
            remove_if_present(&artifact.path.with_extension(LOCK))?;
            total = total.saturating_sub(artifact.bytes);
            tracing::info!(path = %artifact.path.display(), "removed from the component cache (over its size limit)");
        }
        Ok(())
    }

    fn artifacts(&self) -> io::Result<Vec<Artifact>> {
        let mut artifacts = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == ARTIFACT) {
                // An entry removed since the listing is simply not counted.
                if let Ok(meta) = entry.metadata() {
                    artifacts.push(Artifact {
                        path,
                        bytes: meta.len(),
                        used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    });
                }
            }
        }
        Ok(artifacts)
    }
}

struct Artifact {
    path: PathBuf,
    bytes: u64,
    used: SystemTime,
}

/// Whether `path` is a file the cache makes: an artifact, a lock or a partial write.
fn is_ours(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(&format!(".{ARTIFACT}"))
        || name.ends_with(&format!(".{LOCK}"))
        || name.contains(PARTIAL)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Takes the exclusive lock of the entry at `path`, waiting for a process that holds it.
fn lock_entry(path: &Path) -> io::Result<File> {
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension(LOCK))?;
    lock.lock()?;
    Ok(lock)
}

/// Writes `component`'s artifact to `path` through a file of this process's own, renamed into
/// place, so that no reader ever sees half of it.
fn write_entry(component: &Component, path: &Path) -> anyhow::Result<()> {
    let partial = path.with_extension(format!(
        "{ARTIFACT}{PARTIAL}{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let written =
        fs::write(&partial, component.serialize()?).and_then(|()| fs::rename(&partial, path));
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    Ok(written?)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

/// `Err` unless `dir` is owned by the current user and writable by no one else.
#[cfg(unix)]
fn check_private(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = fs::metadata(dir)
        .with_context(|| format!("cannot read the component cache {}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        anyhow::bail!(
            "the component cache {} belongs to user {}, not to this user ({me}): its artifacts \
             are machine code lethe would run, so it is not used",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        anyhow::bail!(
            "the component cache {} may be written by others (mode {:o}): its artifacts are \
             machine code lethe would run, so it is not used (chmod go-w it)",
            dir.display(),
            meta.mode() & 0o777
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_dir: &Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        super::super::build_engine(16, 1, false).expect("engine")
    }

    fn misbehave() -> Vec<u8> {
        std::fs::read(Path::new(crate::COMPONENTS_DIR).join("misbehave.wasm")).expect("misbehave")
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_component_is_compiled_once_and_then_loaded_by_any_process_of_the_user() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, bytes) = (engine(), misbehave());
        let first = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        let (_, origin) = first.load_or_compile(&engine, &bytes).expect("compiles");
        assert_eq!(origin, Origin::Compiled);
        // Another opening of the same directory (another data dir, another process) loads it.
        let second = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        let (_, origin) = second.load_or_compile(&engine, &bytes).expect("loads");
        assert_eq!(origin, Origin::Cached);
        let usage = second.usage().expect("usage");
        assert_eq!(usage.entries, 1);
        assert!(usage.bytes > 0);
        // An artifact and its lock; no partial write is left behind.
        let names = files(dir.path());
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().all(|n| !n.contains(PARTIAL)), "{names:?}");
    }

    #[test]
    fn other_bytes_or_another_engine_configuration_is_another_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        let (engine, bytes) = (engine(), misbehave());
        let concurrent = super::super::build_engine(16, 1, true).expect("engine");
        let a = cache.entry_path(&engine, &bytes);
        assert_ne!(a, cache.entry_path(&concurrent, &bytes));
        let mut edited = bytes.clone();
        edited.push(0);
        assert_ne!(a, cache.entry_path(&engine, &edited));
        // The same configuration built again is the same entry.
        let again = super::super::build_engine(16, 1, false).expect("engine");
        assert_eq!(a, cache.entry_path(&again, &bytes));
    }

    #[test]
    fn a_corrupt_entry_is_compiled_again_and_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        let (engine, bytes) = (engine(), misbehave());
        let path = cache.entry_path(&engine, &bytes);
        fs::write(&path, b"not an artifact").expect("write");
        let (_, origin) = cache.load_or_compile(&engine, &bytes).expect("compiles");
        assert_eq!(origin, Origin::Compiled);
        let (_, origin) = cache.load_or_compile(&engine, &bytes).expect("loads");
        assert_eq!(origin, Origin::Cached);
    }

    #[test]
    fn over_its_bound_the_least_recently_used_entries_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, bytes) = (engine(), misbehave());
        let mut other = bytes.clone();
        // A custom section at the end: the same component, other bytes.
        other.extend_from_slice(&[0, 4, 3, b'a', b'b', b'c']);
        let unbounded = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        unbounded
            .load_or_compile(&engine, &bytes)
            .expect("compiles");
        let one = unbounded.usage().expect("usage").bytes;
        let old = SystemTime::now() - std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(unbounded.entry_path(&engine, &bytes))
            .and_then(|f| f.set_modified(old))
            .expect("age it");
        // Room for one artifact and a half: writing the second evicts the first, the older.
        let bounded = ComponentCache::open(dir.path(), one + one / 2).expect("cache");
        let (_, origin) = bounded.load_or_compile(&engine, &other).expect("compiles");
        assert_eq!(origin, Origin::Compiled);
        assert_eq!(bounded.usage().expect("usage").entries, 1);
        assert!(
            !bounded.entry_path(&engine, &bytes).exists(),
            "the older one went"
        );
        assert!(
            bounded.entry_path(&engine, &other).exists(),
            "the newer one stayed"
        );
    }

    #[test]
    fn clear_removes_every_entry_and_reports_what_it_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
        cache
            .load_or_compile(&engine(), &misbehave())
            .expect("compiles");
        fs::write(dir.path().join("keep.txt"), b"not the cache's").expect("write");
        let held = cache.clear().expect("clear");
        assert_eq!(held.entries, 1);
        assert_eq!(cache.usage().expect("usage"), Usage::default());
        assert_eq!(files(dir.path()), vec!["keep.txt".to_string()]);
    }

    #[test]
    fn processes_compiling_the_same_component_at_once_each_get_it_and_leave_one_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, bytes) = (engine(), misbehave());
        let origins: Vec<Origin> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let cache =
                            ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).expect("cache");
                        cache.load_or_compile(&engine, &bytes).expect("compiles").1
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        // The lock lets one compile; the others wait for it and load its artifact.
        assert_eq!(
            origins.iter().filter(|o| **o == Origin::Compiled).count(),
            1,
            "{origins:?}"
        );
        assert_eq!(files(dir.path()).len(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_others_may_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = ComponentCache::open(dir.path(), DEFAULT_MAX_BYTES).unwrap_err();
        assert!(
            e.to_string()
                .contains("may be written by others (mode 777)"),
            "{e}"
        );
        // A directory it makes is the user's alone.
        let made = dir.path().join("a/b");
        ComponentCache::open(&made, DEFAULT_MAX_BYTES).expect("cache");
        let mode = fs::metadata(&made).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
