//! The Service's schema and the table from a kind to its schema. Kinds with a pod template
//! (CronJobs, Deployments) are not decoded from protobuf: a client sends them as JSON
//! (`kubectl apply`, `kubectl create -f`), and a protobuf body of one is refused with 415.

use crate::proto::meta::{
    BINDING, CLUSTER_ROLE, CONDITION, CONFIGMAP, DELETE_OPTIONS, LEASE, NAMESPACE, OBJECT_META,
    ROLE, SECRET, SELF_SUBJECT_REVIEW, SELF_SUBJECT_RULES_REVIEW, SERVICEACCOUNT, SSAR,
    TOKEN_REQUEST,
};
use crate::proto::shape::{Schema, T};

const PORT_STATUS: Schema = &[
    (1, "name", T::Str),
    (2, "protocol", T::Str),
    (6, "appProtocol", T::Str),
    (3, "port", T::Int),
    (4, "targetPort", T::IntOrStr),
    (5, "nodePort", T::IntOmitEmpty),
];

const CLIENT_IP_CONFIG: Schema = &[(1, "timeoutSeconds", T::Int)];

const SESSION_AFFINITY_CONFIG: Schema = &[(1, "clientIP", T::Msg(CLIENT_IP_CONFIG))];

const SERVICE_SPEC: Schema = &[
    (1, "ports", T::RepMsg(PORT_STATUS)),
    (2, "selector", T::MapStr),
    (3, "clusterIP", T::Str),
    (18, "clusterIPs", T::RepStr),
    (4, "type", T::Str),
    (5, "externalIPs", T::RepStr),
    (7, "sessionAffinity", T::Str),
    (8, "loadBalancerIP", T::Str),
    (9, "loadBalancerSourceRanges", T::RepStr),
    (10, "externalName", T::Str),
    (11, "externalTrafficPolicy", T::Str),
    (12, "healthCheckNodePort", T::IntOmitEmpty),
    (13, "publishNotReadyAddresses", T::BoolOmitEmpty),
    (14, "sessionAffinityConfig", T::Msg(SESSION_AFFINITY_CONFIG)),
    (19, "ipFamilies", T::RepStr),
    (17, "ipFamilyPolicy", T::Str),
    (20, "allocateLoadBalancerNodePorts", T::Bool),
    (21, "loadBalancerClass", T::Str),
    (22, "internalTrafficPolicy", T::Str),
    (23, "trafficDistribution", T::Str),
];

const SERVICE_PORT: Schema = &[
    (1, "port", T::Int),
    (2, "protocol", T::Str),
    (3, "error", T::Str),
];

const LOAD_BALANCER_INGRESS: Schema = &[
    (1, "ip", T::Str),
    (2, "hostname", T::Str),
    (3, "ipMode", T::Str),
    (4, "ports", T::RepMsg(SERVICE_PORT)),
];

const LOAD_BALANCER_STATUS: Schema = &[(1, "ingress", T::RepMsg(LOAD_BALANCER_INGRESS))];

const SERVICE_STATUS: Schema = &[
    (1, "loadBalancer", T::Msg(LOAD_BALANCER_STATUS)),
    (2, "conditions", T::RepMsg(CONDITION)),
];

pub(super) const SERVICE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(SERVICE_SPEC)),
    (3, "status", T::Msg(SERVICE_STATUS)),
];

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
        "SelfSubjectRulesReview" => SELF_SUBJECT_RULES_REVIEW,
        "DeleteOptions" => DELETE_OPTIONS,
        "TokenRequest" => TOKEN_REQUEST,
        "Service" => SERVICE,
        _ => return None,
    })
}
