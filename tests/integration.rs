//! lethe's end-to-end suites, in one test binary: each module is a suite (`cargo test -p lethe
//! --test integration cf::` runs one). One binary links lethe and the support code once, and
//! runs the suites' tests side by side: most of them wait on a `lethe up`, a pass or a cluster
//! rather than compute, so they share the machine well.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod adversarial;
mod bad_input;
mod cf;
mod data_jobs;
mod foreign_host;
mod host;
mod hostile;
mod operate;
mod scaffold;
mod twins;
