//! Schemas of the workload kinds (pods, services, jobs, cron jobs) and the table from a kind to
//! its schema.

use crate::proto::meta::{
    BINDING, CLUSTER_ROLE, CONDITION, CONFIGMAP, DELETE_OPTIONS, LABEL_SELECTOR, LEASE, NAMESPACE,
    OBJECT_META, ROLE, SECRET, SELF_SUBJECT_REVIEW, SELF_SUBJECT_RULES_REVIEW, SERVICEACCOUNT,
    SSAR, TOKEN_REQUEST,
};
use crate::proto::pod::{OBJECT_REFERENCE, POD_SPEC, POD_TEMPLATE_SPEC};
use crate::proto::shape::{Schema, T};

const POD_STATUS: Schema = &[
    (1, "phase", T::Str),
    (3, "message", T::Str),
    (4, "reason", T::Str),
    (11, "nominatedNodeName", T::Str),
    (5, "hostIP", T::Str),
    (6, "podIP", T::Str),
    (7, "startTime", T::Time),
    (9, "qosClass", T::Str),
];

// Clients never set most of a Pod's status (the kubelet does), so only its summary is decoded.
pub(super) const POD: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(POD_SPEC)),
    (3, "status", T::Msg(POD_STATUS)),
];

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

const POD_FAILURE_POLICY_ON_EXIT_CODES: Schema = &[
    (1, "containerName", T::Str),
    (2, "operator", T::Str),
    (3, "values", T::RepInt),
];

const POD_FAILURE_POLICY_ON_POD_CONDITIONS: Schema = &[(1, "type", T::Str), (2, "status", T::Str)];

const POD_FAILURE_POLICY_RULE: Schema = &[
    (1, "action", T::Str),
    (2, "onExitCodes", T::Msg(POD_FAILURE_POLICY_ON_EXIT_CODES)),
    (
        3,
        "onPodConditions",
        T::RepMsg(POD_FAILURE_POLICY_ON_POD_CONDITIONS),
    ),
];

const POD_FAILURE_POLICY: Schema = &[(1, "rules", T::RepMsg(POD_FAILURE_POLICY_RULE))];

const SUCCESS_POLICY_RULE: Schema = &[
    (1, "succeededIndexes", T::Str),
    (2, "succeededCount", T::Int),
];

const SUCCESS_POLICY: Schema = &[(1, "rules", T::RepMsg(SUCCESS_POLICY_RULE))];

// batch/v1.
pub(super) const JOB_SPEC: Schema = &[
    (1, "parallelism", T::Int),
    (2, "completions", T::Int),
    (3, "activeDeadlineSeconds", T::Int),
    (11, "podFailurePolicy", T::Msg(POD_FAILURE_POLICY)),
    (16, "successPolicy", T::Msg(SUCCESS_POLICY)),
    (7, "backoffLimit", T::Int),
    (12, "backoffLimitPerIndex", T::Int),
    (13, "maxFailedIndexes", T::Int),
    (4, "selector", T::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", T::Bool),
    (6, "template", T::Msg(POD_TEMPLATE_SPEC)),
    (8, "ttlSecondsAfterFinished", T::Int),
    (9, "completionMode", T::Str),
    (10, "suspend", T::Bool),
    (14, "podReplacementPolicy", T::Str),
    (15, "managedBy", T::Str),
];

const JOB_CONDITION: Schema = &[
    (1, "type", T::Str),
    (2, "status", T::Str),
    (3, "lastProbeTime", T::Time),
    (4, "lastTransitionTime", T::Time),
    (5, "reason", T::Str),
    (6, "message", T::Str),
];

const UNCOUNTED_TERMINATED_PODS: Schema = &[(1, "succeeded", T::RepStr), (2, "failed", T::RepStr)];

const JOB_STATUS: Schema = &[
    (1, "conditions", T::RepMsg(JOB_CONDITION)),
    (2, "startTime", T::Time),
    (3, "completionTime", T::Time),
    (4, "active", T::IntOmitEmpty),
    (5, "succeeded", T::IntOmitEmpty),
    (6, "failed", T::IntOmitEmpty),
    (11, "terminating", T::Int),
    (7, "completedIndexes", T::Str),
    (10, "failedIndexes", T::Str),
    (
        8,
        "uncountedTerminatedPods",
        T::Msg(UNCOUNTED_TERMINATED_PODS),
    ),
    (9, "ready", T::Int),
];

pub(super) const JOB: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(JOB_SPEC)),
    (3, "status", T::Msg(JOB_STATUS)),
];

const JOB_TEMPLATE_SPEC: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(JOB_SPEC)),
];

const SPEC: Schema = &[
    (1, "schedule", T::Str),
    (8, "timeZone", T::Str),
    (2, "startingDeadlineSeconds", T::Int),
    (3, "concurrencyPolicy", T::Str),
    (4, "suspend", T::Bool),
    (5, "jobTemplate", T::Msg(JOB_TEMPLATE_SPEC)),
    (6, "successfulJobsHistoryLimit", T::Int),
    (7, "failedJobsHistoryLimit", T::Int),
];

const CRONJOB_STATUS: Schema = &[
    (1, "active", T::RepMsg(OBJECT_REFERENCE)),
    (4, "lastScheduleTime", T::Time),
    (5, "lastSuccessfulTime", T::Time),
];

pub(super) const CRONJOB: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(SPEC)),
    (3, "status", T::Msg(CRONJOB_STATUS)),
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
        "Pod" => POD,
        "Service" => SERVICE,
        "Job" => JOB,
        "CronJob" => CRONJOB,
        _ => return None,
    })
}
