//! Decoding of the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`) for the
//! kinds that kubectl's typed clients send (`kubectl create namespace|configmap|secret|role…`,
//! `kubectl create job|cronjob|service…`, `kubectl auth can-i`). Bodies are turned into the
//! equivalent JSON.
//!
//! Field numbers follow k8s.io/api's and k8s.io/apimachinery's `generated.proto`. Field numbers a
//! schema does not list are skipped, so a newer client's additions are dropped, not misread.

mod decode;
mod kinds;
mod meta;
mod pod;
mod shape;

pub use decode::decode;

#[cfg(test)]
mod tests;
