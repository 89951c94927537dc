//! placeholder crate root, filled in below
