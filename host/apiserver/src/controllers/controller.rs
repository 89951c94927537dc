//! What a controller is, and what the controllers know of the server they run in.

use crate::store::Store;
use std::sync::Arc;

/// What the controllers know of the server they run in.
#[derive(Debug, Clone, Default)]
pub struct ClusterInfo {
    /// The CA that signs the serving certificate (PEM); empty when serving plain HTTP, which
    /// is what a controller manager without a root CA would publish too.
    pub ca_pem: String,
    /// What signs service-account tokens, for the token controller's legacy token Secrets.
    pub signer: Option<Arc<crate::sa_token::Signer>>,
}

/// One of the cluster's background controllers.
pub trait Controller: Send + Sync {
    /// The controller's name, for logs and traces.
    fn name(&self) -> &'static str;
    /// Reads the store once and acts on what it finds; true when it changed anything, so that a
    /// driver knows to step again.
    fn step(&self, store: &Store) -> bool;
}
