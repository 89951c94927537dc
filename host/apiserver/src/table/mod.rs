//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which
//! `kubectl get` asks for: the columns the real server prints for each kind, and the CRD's
//! `additionalPrinterColumns` for custom resources.

mod cells;
mod columns;
mod event;
mod render;

pub use render::{Include, render, wanted};

#[cfg(test)]
mod tests;
