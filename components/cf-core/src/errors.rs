//! CF V3 errors as values: what a handler answers with when it cannot do what was asked (shared
//! with the other components through `lethe_guest::cf`).

pub use lethe_guest::cf::{HttpError, JOB_NOT_FOUND};
