//! Schemas of object metadata (with label selectors and conditions) and of the small kinds:
//! namespaces, config maps, secrets, service accounts, access reviews, RBAC, leases, token
//! requests and delete options.

use crate::proto::shape::{Schema, T};

pub(super) const OWNER_REF: Schema = &[
    (5, "apiVersion", T::Str),
    (1, "kind", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
    (6, "controller", T::Bool),
    (7, "blockOwnerDeletion", T::Bool),
];

pub(super) const OBJECT_META: Schema = &[
    (1, "name", T::Str),
    (2, "generateName", T::Str),
    (3, "namespace", T::Str),
    (5, "uid", T::Str),
    (6, "resourceVersion", T::Str),
    (7, "generation", T::IntOmitEmpty),
    (8, "creationTimestamp", T::Time),
    (9, "deletionTimestamp", T::Time),
    (10, "deletionGracePeriodSeconds", T::Int),
    (11, "labels", T::MapStr),
    (12, "annotations", T::MapStr),
    (13, "ownerReferences", T::RepMsg(OWNER_REF)),
    (14, "finalizers", T::RepStr),
];

const NAMESPACE_SPEC: Schema = &[(1, "finalizers", T::RepStr)];

const NAMESPACE_STATUS: Schema = &[(1, "phase", T::Str)];

pub(super) const NAMESPACE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(NAMESPACE_SPEC)),
    (3, "status", T::Msg(NAMESPACE_STATUS)),
];

pub(super) const CONFIGMAP: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapStr),
    (3, "binaryData", T::MapBytes),
    (4, "immutable", T::Bool),
];

pub(super) const SECRET: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapBytes),
    (3, "type", T::Str),
    (4, "stringData", T::MapStr),
    (5, "immutable", T::Bool),
];

pub(super) const SERVICEACCOUNT: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (4, "automountServiceAccountToken", T::Bool),
];

pub(super) const RESOURCE_ATTRS: Schema = &[
    (1, "namespace", T::Str),
    (2, "verb", T::Str),
    (3, "group", T::Str),
    (4, "version", T::Str),
    (5, "resource", T::Str),
    (6, "subresource", T::Str),
    (7, "name", T::Str),
];

pub(super) const NON_RESOURCE_ATTRS: Schema = &[(1, "path", T::Str), (2, "verb", T::Str)];

const SPEC: Schema = &[
    (1, "resourceAttributes", T::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRS)),
];

pub(super) const SSAR: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(SPEC)),
];

pub(super) const POLICY_RULE: Schema = &[
    (1, "verbs", T::RepStr),
    (2, "apiGroups", T::RepStr),
    (3, "resources", T::RepStr),
    (4, "resourceNames", T::RepStr),
    (5, "nonResourceURLs", T::RepStr),
];

pub(super) const ROLE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "rules", T::RepMsg(POLICY_RULE)),
];

const AGGREGATION_RULE: Schema = &[(1, "clusterRoleSelectors", T::RepMsg(LABEL_SELECTOR))];

pub(super) const CLUSTER_ROLE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "rules", T::RepMsg(POLICY_RULE)),
    (3, "aggregationRule", T::Msg(AGGREGATION_RULE)),
];

pub(super) const SUBJECT: Schema = &[
    (1, "kind", T::Str),
    (2, "apiGroup", T::Str),
    (3, "name", T::Str),
    (4, "namespace", T::Str),
];

pub(super) const ROLE_REF: Schema = &[
    (1, "apiGroup", T::Str),
    (2, "kind", T::Str),
    (3, "name", T::Str),
];

pub(super) const BINDING: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "subjects", T::RepMsg(SUBJECT)),
    (3, "roleRef", T::Msg(ROLE_REF)),
];

const LEASE_SPEC: Schema = &[
    (1, "holderIdentity", T::Str),
    (2, "leaseDurationSeconds", T::Int),
    (3, "acquireTime", T::MicroTime),
    (4, "renewTime", T::MicroTime),
    (5, "leaseTransitions", T::Int),
    (6, "strategy", T::Str),
    (7, "preferredHolder", T::Str),
];

pub(super) const LEASE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(LEASE_SPEC)),
];

pub(super) const SELF_SUBJECT_REVIEW: Schema = &[(1, "metadata", T::Msg(OBJECT_META))];

const BOUND_OBJECT_REF: Schema = &[
    (1, "kind", T::Str),
    (2, "apiVersion", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
];

const TOKEN_REQUEST_SPEC: Schema = &[
    (1, "audiences", T::RepStr),
    (4, "expirationSeconds", T::Int),
    (3, "boundObjectRef", T::Msg(BOUND_OBJECT_REF)),
];

/// `kubectl create token`'s body (authentication/v1 TokenRequest).
pub(super) const TOKEN_REQUEST: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(TOKEN_REQUEST_SPEC)),
];

const PRECONDITIONS: Schema = &[(1, "uid", T::Str), (2, "resourceVersion", T::Str)];

pub(super) const DELETE_OPTIONS: Schema = &[
    (1, "gracePeriodSeconds", T::Int),
    (2, "preconditions", T::Msg(PRECONDITIONS)),
    (3, "orphanDependents", T::Bool),
    (4, "propagationPolicy", T::Str),
    (5, "dryRun", T::RepStr),
];

const LABEL_SELECTOR_REQUIREMENT: Schema = &[
    (1, "key", T::Str),
    (2, "operator", T::Str),
    (3, "values", T::RepStr),
];

const LABEL_SELECTOR: Schema = &[
    (1, "matchLabels", T::MapStr),
    (2, "matchExpressions", T::RepMsg(LABEL_SELECTOR_REQUIREMENT)),
];
