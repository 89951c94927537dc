//! Decoding of the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`) for the
//! kinds that kubectl's typed clients send (`kubectl create namespace|configmap|secret|role…`,
//! `kubectl create service…`, `kubectl auth can-i`). Bodies are turned into the equivalent JSON.
//! Kinds with a pod template are not decoded: their schema would be most of this module, and
//! kubectl sends them as JSON in every flow lethe documents.
//!
//! Field numbers follow k8s.io/api's and k8s.io/apimachinery's `generated.proto`. Field numbers a
//! schema does not list are skipped, so a newer client's additions are dropped, not misread.

mod decode;
mod kinds;
mod meta;
mod shape;

pub use decode::decode;

#[cfg(test)]
mod tests;
