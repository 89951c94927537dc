//! The reconciler template of `lethe new reconciler`, rendered by `build.rs` as a team would get
//! it (`keeper`, kind `v1/ConfigMap`): what the simulator's keeper world plays against.

include!(concat!(env!("OUT_DIR"), "/lib.rs"));

/// The rendered migrations' directory.
pub const MIGRATIONS: &str = concat!(env!("OUT_DIR"), "/migrations");
