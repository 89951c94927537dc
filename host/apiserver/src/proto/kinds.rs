//! The table from a kind to its protobuf schema. Only the kinds that the documented kubectl flows
//! create are decoded; a client sends the others (CronJobs, Deployments, Services) as JSON
//! (`kubectl apply`, `kubectl create -f`), and a protobuf body of one is refused with 415.

use crate::proto::meta::{
    BINDING, CLUSTER_ROLE, CONFIGMAP, DELETE_OPTIONS, LEASE, NAMESPACE, ROLE, SECRET,
    SELF_SUBJECT_REVIEW, SERVICEACCOUNT, SSAR, TOKEN_REQUEST,
};
use crate::proto::shape::Schema;

pub(super) fn schema_for(kind: &str) -> Option<Schema> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIGMAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICEACCOUNT,
        "SelfSubjectAccessReview" => SSAR,
        "Role" => ROLE,
        "ClusterRole" => CLUSTER_ROLE,
        "RoleBinding" | "ClusterRoleBinding" => BINDING,
        "Lease" => LEASE,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        "DeleteOptions" => DELETE_OPTIONS,
        "TokenRequest" => TOKEN_REQUEST,
        _ => return None,
    })
}
