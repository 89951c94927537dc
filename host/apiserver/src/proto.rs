//! Decoding of the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`) for the
//! kinds that kubectl's typed clients send (`kubectl create namespace|configmap|secret|role…`,
//! `kubectl create job|cronjob|service…`, `kubectl auth can-i`). Bodies are turned into the
//! equivalent JSON.
//!
//! Field numbers follow k8s.io/api's and k8s.io/apimachinery's `generated.proto`. Field numbers a
//! schema does not list are skipped, so a newer client's additions are dropped, not misread.

use base64::Engine;
use serde_json::{Map, Value, json};

#[derive(Clone, Copy)]
enum T {
    Str,
    /// A pointer field, or one without `omitempty`: its presence on the wire is the value.
    Int,
    /// A plain `omitempty` field: gogo-protobuf writes it even when zero, Go's JSON encoder
    /// leaves it out, so zero means "absent".
    IntOmitEmpty,
    Bool,
    BoolOmitEmpty,
    Time,
    MicroTime,
    /// `resource.Quantity`: a message whose field 1 is the quantity's string form.
    Quantity,
    /// `intstr.IntOrString`: a JSON number or string, as its `type` says.
    IntOrStr,
    Msg(&'static [(u32, &'static str, T)]),
    /// A Go struct embedded with `json:",inline"`: its fields belong to the enclosing object.
    Inline(&'static [(u32, &'static str, T)]),
    MapStr,
    MapBytes,
    MapQuantity,
    RepStr,
    RepInt,
    RepMsg(&'static [(u32, &'static str, T)]),
}

type Schema = &'static [(u32, &'static str, T)];

const OWNER_REF: Schema = &[
    (5, "apiVersion", T::Str),
    (1, "kind", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
    (6, "controller", T::Bool),
    (7, "blockOwnerDeletion", T::Bool),
];
const OBJECT_META: Schema = &[
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
const NAMESPACE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(&[(1, "finalizers", T::RepStr)])),
    (3, "status", T::Msg(&[(1, "phase", T::Str)])),
];
const CONFIGMAP: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapStr),
    (3, "binaryData", T::MapBytes),
    (4, "immutable", T::Bool),
];
const SECRET: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapBytes),
    (3, "type", T::Str),
    (4, "stringData", T::MapStr),
    (5, "immutable", T::Bool),
];
const SERVICEACCOUNT: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (4, "automountServiceAccountToken", T::Bool),
];
const RESOURCE_ATTRS: Schema = &[
    (1, "namespace", T::Str),
    (2, "verb", T::Str),
    (3, "group", T::Str),
    (4, "version", T::Str),
    (5, "resource", T::Str),
    (6, "subresource", T::Str),
    (7, "name", T::Str),
];
const NON_RESOURCE_ATTRS: Schema = &[(1, "path", T::Str), (2, "verb", T::Str)];
const SSAR: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "resourceAttributes", T::Msg(RESOURCE_ATTRS)),
            (2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRS)),
        ]),
    ),
];
const SAR: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "resourceAttributes", T::Msg(RESOURCE_ATTRS)),
            (2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRS)),
            (3, "user", T::Str),
            (4, "groups", T::RepStr),
            (6, "uid", T::Str),
        ]),
    ),
];
const POLICY_RULE: Schema = &[
    (1, "verbs", T::RepStr),
    (2, "apiGroups", T::RepStr),
    (3, "resources", T::RepStr),
    (4, "resourceNames", T::RepStr),
    (5, "nonResourceURLs", T::RepStr),
];
const ROLE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "rules", T::RepMsg(POLICY_RULE)),
];
const CLUSTER_ROLE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "rules", T::RepMsg(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        T::Msg(&[(1, "clusterRoleSelectors", T::RepMsg(LABEL_SELECTOR))]),
    ),
];
const SUBJECT: Schema = &[
    (1, "kind", T::Str),
    (2, "apiGroup", T::Str),
    (3, "name", T::Str),
    (4, "namespace", T::Str),
];
const ROLE_REF: Schema = &[
    (1, "apiGroup", T::Str),
    (2, "kind", T::Str),
    (3, "name", T::Str),
];
const BINDING: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "subjects", T::RepMsg(SUBJECT)),
    (3, "roleRef", T::Msg(ROLE_REF)),
];
const LEASE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "holderIdentity", T::Str),
            (2, "leaseDurationSeconds", T::Int),
            (3, "acquireTime", T::MicroTime),
            (4, "renewTime", T::MicroTime),
            (5, "leaseTransitions", T::Int),
            (6, "strategy", T::Str),
            (7, "preferredHolder", T::Str),
        ]),
    ),
];
const SELF_SUBJECT_REVIEW: Schema = &[(1, "metadata", T::Msg(OBJECT_META))];
/// `kubectl create token`'s body (authentication/v1 TokenRequest).
const TOKEN_REQUEST: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "audiences", T::RepStr),
            (4, "expirationSeconds", T::Int),
            (
                3,
                "boundObjectRef",
                T::Msg(&[
                    (1, "kind", T::Str),
                    (2, "apiVersion", T::Str),
                    (3, "name", T::Str),
                    (4, "uid", T::Str),
                ]),
            ),
        ]),
    ),
];
const SELF_SUBJECT_RULES_REVIEW: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(&[(1, "namespace", T::Str)])),
];
const DELETE_OPTIONS: Schema = &[
    (1, "gracePeriodSeconds", T::Int),
    (
        2,
        "preconditions",
        T::Msg(&[(1, "uid", T::Str), (2, "resourceVersion", T::Str)]),
    ),
    (3, "orphanDependents", T::Bool),
    (4, "propagationPolicy", T::Str),
    (5, "dryRun", T::RepStr),
];

// meta/v1 and core/v1 building blocks of the workload kinds.
const LABEL_SELECTOR: Schema = &[
    (1, "matchLabels", T::MapStr),
    (
        2,
        "matchExpressions",
        T::RepMsg(&[
            (1, "key", T::Str),
            (2, "operator", T::Str),
            (3, "values", T::RepStr),
        ]),
    ),
];
const CONDITION: Schema = &[
    (1, "type", T::Str),
    (2, "status", T::Str),
    (3, "observedGeneration", T::IntOmitEmpty),
    (4, "lastTransitionTime", T::Time),
    (5, "reason", T::Str),
    (6, "message", T::Str),
];
const OBJECT_REFERENCE: Schema = &[
    (1, "kind", T::Str),
    (2, "namespace", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
    (5, "apiVersion", T::Str),
    (6, "resourceVersion", T::Str),
    (7, "fieldPath", T::Str),
];
const LOCAL_OBJECT_REF: Schema = &[(1, "name", T::Str)];
const KEY_TO_PATH: Schema = &[(1, "key", T::Str), (2, "path", T::Str), (3, "mode", T::Int)];
const OBJECT_FIELD_SELECTOR: Schema = &[(1, "apiVersion", T::Str), (2, "fieldPath", T::Str)];
const RESOURCE_FIELD_SELECTOR: Schema = &[
    (1, "containerName", T::Str),
    (2, "resource", T::Str),
    (3, "divisor", T::Quantity),
];
// ConfigMapKeySelector and SecretKeySelector have the same shape.
const KEY_SELECTOR: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "key", T::Str),
    (3, "optional", T::Bool),
];
const ENV_VAR: Schema = &[
    (1, "name", T::Str),
    (2, "value", T::Str),
    (
        3,
        "valueFrom",
        T::Msg(&[
            (1, "fieldRef", T::Msg(OBJECT_FIELD_SELECTOR)),
            (2, "resourceFieldRef", T::Msg(RESOURCE_FIELD_SELECTOR)),
            (3, "configMapKeyRef", T::Msg(KEY_SELECTOR)),
            (4, "secretKeyRef", T::Msg(KEY_SELECTOR)),
            (
                5,
                "fileKeyRef",
                T::Msg(&[
                    (1, "volumeName", T::Str),
                    (2, "path", T::Str),
                    (3, "key", T::Str),
                    (4, "optional", T::Bool),
                ]),
            ),
        ]),
    ),
];
// ConfigMapEnvSource and SecretEnvSource have the same shape.
const ENV_SOURCE: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "optional", T::Bool),
];
const ENV_FROM_SOURCE: Schema = &[
    (1, "prefix", T::Str),
    (2, "configMapRef", T::Msg(ENV_SOURCE)),
    (3, "secretRef", T::Msg(ENV_SOURCE)),
];
const CONTAINER_PORT: Schema = &[
    (1, "name", T::Str),
    (2, "hostPort", T::IntOmitEmpty),
    (3, "containerPort", T::Int),
    (4, "protocol", T::Str),
    (5, "hostIP", T::Str),
];
const RESOURCE_REQUIREMENTS: Schema = &[
    (1, "limits", T::MapQuantity),
    (2, "requests", T::MapQuantity),
    (
        3,
        "claims",
        T::RepMsg(&[(1, "name", T::Str), (2, "request", T::Str)]),
    ),
];
const VOLUME_MOUNT: Schema = &[
    (1, "name", T::Str),
    (2, "readOnly", T::BoolOmitEmpty),
    (7, "recursiveReadOnly", T::Str),
    (3, "mountPath", T::Str),
    (4, "subPath", T::Str),
    (5, "mountPropagation", T::Str),
    (6, "subPathExpr", T::Str),
];
const EXEC_ACTION: Schema = &[(1, "command", T::RepStr)];
const HTTP_GET_ACTION: Schema = &[
    (1, "path", T::Str),
    (2, "port", T::IntOrStr),
    (3, "host", T::Str),
    (4, "scheme", T::Str),
    (
        5,
        "httpHeaders",
        T::RepMsg(&[(1, "name", T::Str), (2, "value", T::Str)]),
    ),
];
const TCP_SOCKET_ACTION: Schema = &[(1, "port", T::IntOrStr), (2, "host", T::Str)];
const PROBE: Schema = &[
    (
        1,
        "",
        T::Inline(&[
            (1, "exec", T::Msg(EXEC_ACTION)),
            (2, "httpGet", T::Msg(HTTP_GET_ACTION)),
            (3, "tcpSocket", T::Msg(TCP_SOCKET_ACTION)),
            (
                4,
                "grpc",
                T::Msg(&[(1, "port", T::Int), (2, "service", T::Str)]),
            ),
        ]),
    ),
    (2, "initialDelaySeconds", T::IntOmitEmpty),
    (3, "timeoutSeconds", T::IntOmitEmpty),
    (4, "periodSeconds", T::IntOmitEmpty),
    (5, "successThreshold", T::IntOmitEmpty),
    (6, "failureThreshold", T::IntOmitEmpty),
    (7, "terminationGracePeriodSeconds", T::Int),
];
const LIFECYCLE_HANDLER: Schema = &[
    (1, "exec", T::Msg(EXEC_ACTION)),
    (2, "httpGet", T::Msg(HTTP_GET_ACTION)),
    (3, "tcpSocket", T::Msg(TCP_SOCKET_ACTION)),
    (4, "sleep", T::Msg(&[(1, "seconds", T::Int)])),
];
const SE_LINUX_OPTIONS: Schema = &[
    (1, "user", T::Str),
    (2, "role", T::Str),
    (3, "type", T::Str),
    (4, "level", T::Str),
];
const WINDOWS_OPTIONS: Schema = &[
    (1, "gmsaCredentialSpecName", T::Str),
    (2, "gmsaCredentialSpec", T::Str),
    (3, "runAsUserName", T::Str),
    (4, "hostProcess", T::Bool),
];
// SeccompProfile and AppArmorProfile have the same shape.
const PROFILE: Schema = &[(1, "type", T::Str), (2, "localhostProfile", T::Str)];
const SECURITY_CONTEXT: Schema = &[
    (
        1,
        "capabilities",
        T::Msg(&[(1, "add", T::RepStr), (2, "drop", T::RepStr)]),
    ),
    (2, "privileged", T::Bool),
    (3, "seLinuxOptions", T::Msg(SE_LINUX_OPTIONS)),
    (10, "windowsOptions", T::Msg(WINDOWS_OPTIONS)),
    (4, "runAsUser", T::Int),
    (8, "runAsGroup", T::Int),
    (5, "runAsNonRoot", T::Bool),
    (6, "readOnlyRootFilesystem", T::Bool),
    (7, "allowPrivilegeEscalation", T::Bool),
    (9, "procMount", T::Str),
    (11, "seccompProfile", T::Msg(PROFILE)),
    (12, "appArmorProfile", T::Msg(PROFILE)),
    (
        13,
        "ulimits",
        T::RepMsg(&[
            (1, "name", T::Str),
            (2, "hard", T::Int),
            (3, "soft", T::Int),
        ]),
    ),
];
const CONTAINER: Schema = &[
    (1, "name", T::Str),
    (2, "image", T::Str),
    (3, "command", T::RepStr),
    (4, "args", T::RepStr),
    (5, "workingDir", T::Str),
    (6, "ports", T::RepMsg(CONTAINER_PORT)),
    (19, "envFrom", T::RepMsg(ENV_FROM_SOURCE)),
    (7, "env", T::RepMsg(ENV_VAR)),
    (8, "resources", T::Msg(RESOURCE_REQUIREMENTS)),
    (
        23,
        "resizePolicy",
        T::RepMsg(&[(1, "resourceName", T::Str), (2, "restartPolicy", T::Str)]),
    ),
    (24, "restartPolicy", T::Str),
    (
        25,
        "restartPolicyRules",
        T::RepMsg(&[
            (1, "action", T::Str),
            (
                2,
                "exitCodes",
                T::Msg(&[(1, "operator", T::Str), (2, "values", T::RepInt)]),
            ),
        ]),
    ),
    (9, "volumeMounts", T::RepMsg(VOLUME_MOUNT)),
    (
        21,
        "volumeDevices",
        T::RepMsg(&[(1, "name", T::Str), (2, "devicePath", T::Str)]),
    ),
    (10, "livenessProbe", T::Msg(PROBE)),
    (11, "readinessProbe", T::Msg(PROBE)),
    (22, "startupProbe", T::Msg(PROBE)),
    (
        12,
        "lifecycle",
        T::Msg(&[
            (1, "postStart", T::Msg(LIFECYCLE_HANDLER)),
            (2, "preStop", T::Msg(LIFECYCLE_HANDLER)),
            (3, "stopSignal", T::Str),
        ]),
    ),
    (13, "terminationMessagePath", T::Str),
    (20, "terminationMessagePolicy", T::Str),
    (14, "imagePullPolicy", T::Str),
    (15, "securityContext", T::Msg(SECURITY_CONTEXT)),
    (16, "stdin", T::BoolOmitEmpty),
    (17, "stdinOnce", T::BoolOmitEmpty),
    (18, "tty", T::BoolOmitEmpty),
];
const EPHEMERAL_CONTAINER: Schema = &[
    (1, "", T::Inline(CONTAINER)),
    (2, "targetContainerName", T::Str),
];
// ConfigMapProjection and SecretProjection have the same shape.
const OBJECT_PROJECTION: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "items", T::RepMsg(KEY_TO_PATH)),
    (4, "optional", T::Bool),
];
const DOWNWARD_API_FILE: Schema = &[
    (1, "path", T::Str),
    (2, "fieldRef", T::Msg(OBJECT_FIELD_SELECTOR)),
    (3, "resourceFieldRef", T::Msg(RESOURCE_FIELD_SELECTOR)),
    (4, "mode", T::Int),
];
const VOLUME_PROJECTION: Schema = &[
    (1, "secret", T::Msg(OBJECT_PROJECTION)),
    (
        2,
        "downwardAPI",
        T::Msg(&[(1, "items", T::RepMsg(DOWNWARD_API_FILE))]),
    ),
    (3, "configMap", T::Msg(OBJECT_PROJECTION)),
    (
        4,
        "serviceAccountToken",
        T::Msg(&[
            (1, "audience", T::Str),
            (2, "expirationSeconds", T::Int),
            (3, "path", T::Str),
        ]),
    ),
    (
        5,
        "clusterTrustBundle",
        T::Msg(&[
            (1, "name", T::Str),
            (2, "signerName", T::Str),
            (3, "labelSelector", T::Msg(LABEL_SELECTOR)),
            (5, "optional", T::Bool),
            (4, "path", T::Str),
        ]),
    ),
    (
        6,
        "podCertificate",
        T::Msg(&[
            (1, "signerName", T::Str),
            (2, "keyType", T::Str),
            (3, "maxExpirationSeconds", T::Int),
            (4, "credentialBundlePath", T::Str),
            (5, "keyPath", T::Str),
            (6, "certificateChainPath", T::Str),
            (7, "userAnnotations", T::MapStr),
        ]),
    ),
];
const PVC_SPEC: Schema = &[
    (1, "accessModes", T::RepStr),
    (4, "selector", T::Msg(LABEL_SELECTOR)),
    (
        2,
        "resources",
        T::Msg(&[
            (1, "limits", T::MapQuantity),
            (2, "requests", T::MapQuantity),
        ]),
    ),
    (3, "volumeName", T::Str),
    (5, "storageClassName", T::Str),
    (6, "volumeMode", T::Str),
    (
        7,
        "dataSource",
        T::Msg(&[
            (1, "apiGroup", T::Str),
            (2, "kind", T::Str),
            (3, "name", T::Str),
        ]),
    ),
    (
        8,
        "dataSourceRef",
        T::Msg(&[
            (1, "apiGroup", T::Str),
            (2, "kind", T::Str),
            (3, "name", T::Str),
            (4, "namespace", T::Str),
        ]),
    ),
    (9, "volumeAttributesClassName", T::Str),
];
// The in-tree plugins that Kubernetes no longer supports at all (glusterfs, rbd, cephfs,
// flocker, quobyte, photonPersistentDisk, scaleIO, storageos) are left out.
const VOLUME_SOURCE: Schema = &[
    (
        1,
        "hostPath",
        T::Msg(&[(1, "path", T::Str), (2, "type", T::Str)]),
    ),
    (
        2,
        "emptyDir",
        T::Msg(&[(1, "medium", T::Str), (2, "sizeLimit", T::Quantity)]),
    ),
    (
        3,
        "gcePersistentDisk",
        T::Msg(&[
            (1, "pdName", T::Str),
            (2, "fsType", T::Str),
            (3, "partition", T::IntOmitEmpty),
            (4, "readOnly", T::BoolOmitEmpty),
        ]),
    ),
    (
        4,
        "awsElasticBlockStore",
        T::Msg(&[
            (1, "volumeID", T::Str),
            (2, "fsType", T::Str),
            (3, "partition", T::IntOmitEmpty),
            (4, "readOnly", T::BoolOmitEmpty),
        ]),
    ),
    (
        5,
        "gitRepo",
        T::Msg(&[
            (1, "repository", T::Str),
            (2, "revision", T::Str),
            (3, "directory", T::Str),
        ]),
    ),
    (
        6,
        "secret",
        T::Msg(&[
            (1, "secretName", T::Str),
            (2, "items", T::RepMsg(KEY_TO_PATH)),
            (3, "defaultMode", T::Int),
            (4, "optional", T::Bool),
        ]),
    ),
    (
        7,
        "nfs",
        T::Msg(&[
            (1, "server", T::Str),
            (2, "path", T::Str),
            (3, "readOnly", T::BoolOmitEmpty),
        ]),
    ),
    (
        8,
        "iscsi",
        T::Msg(&[
            (1, "targetPortal", T::Str),
            (2, "iqn", T::Str),
            (3, "lun", T::Int),
            (4, "iscsiInterface", T::Str),
            (5, "fsType", T::Str),
            (6, "readOnly", T::BoolOmitEmpty),
            (7, "portals", T::RepStr),
            (8, "chapAuthDiscovery", T::BoolOmitEmpty),
            (11, "chapAuthSession", T::BoolOmitEmpty),
            (10, "secretRef", T::Msg(LOCAL_OBJECT_REF)),
            (12, "initiatorName", T::Str),
        ]),
    ),
    (
        10,
        "persistentVolumeClaim",
        T::Msg(&[(1, "claimName", T::Str), (2, "readOnly", T::BoolOmitEmpty)]),
    ),
    (
        12,
        "flexVolume",
        T::Msg(&[
            (1, "driver", T::Str),
            (2, "fsType", T::Str),
            (3, "secretRef", T::Msg(LOCAL_OBJECT_REF)),
            (4, "readOnly", T::BoolOmitEmpty),
            (5, "options", T::MapStr),
        ]),
    ),
    (
        13,
        "cinder",
        T::Msg(&[
            (1, "volumeID", T::Str),
            (2, "fsType", T::Str),
            (3, "readOnly", T::BoolOmitEmpty),
            (4, "secretRef", T::Msg(LOCAL_OBJECT_REF)),
        ]),
    ),
    (
        16,
        "downwardAPI",
        T::Msg(&[
            (1, "items", T::RepMsg(DOWNWARD_API_FILE)),
            (2, "defaultMode", T::Int),
        ]),
    ),
    (
        17,
        "fc",
        T::Msg(&[
            (1, "targetWWNs", T::RepStr),
            (2, "lun", T::Int),
            (3, "fsType", T::Str),
            (4, "readOnly", T::BoolOmitEmpty),
            (5, "wwids", T::RepStr),
        ]),
    ),
    (
        18,
        "azureFile",
        T::Msg(&[
            (1, "secretName", T::Str),
            (2, "shareName", T::Str),
            (3, "readOnly", T::BoolOmitEmpty),
        ]),
    ),
    (
        19,
        "configMap",
        T::Msg(&[
            (1, "", T::Inline(LOCAL_OBJECT_REF)),
            (2, "items", T::RepMsg(KEY_TO_PATH)),
            (3, "defaultMode", T::Int),
            (4, "optional", T::Bool),
        ]),
    ),
    (
        20,
        "vsphereVolume",
        T::Msg(&[
            (1, "volumePath", T::Str),
            (2, "fsType", T::Str),
            (3, "storagePolicyName", T::Str),
            (4, "storagePolicyID", T::Str),
        ]),
    ),
    (
        22,
        "azureDisk",
        T::Msg(&[
            (1, "diskName", T::Str),
            (2, "diskURI", T::Str),
            (3, "cachingMode", T::Str),
            (4, "fsType", T::Str),
            (5, "readOnly", T::Bool),
            (6, "kind", T::Str),
        ]),
    ),
    (
        26,
        "projected",
        T::Msg(&[
            (1, "sources", T::RepMsg(VOLUME_PROJECTION)),
            (2, "defaultMode", T::Int),
        ]),
    ),
    (
        24,
        "portworxVolume",
        T::Msg(&[
            (1, "volumeID", T::Str),
            (2, "fsType", T::Str),
            (3, "readOnly", T::BoolOmitEmpty),
        ]),
    ),
    (
        28,
        "csi",
        T::Msg(&[
            (1, "driver", T::Str),
            (2, "readOnly", T::Bool),
            (3, "fsType", T::Str),
            (4, "volumeAttributes", T::MapStr),
            (5, "nodePublishSecretRef", T::Msg(LOCAL_OBJECT_REF)),
        ]),
    ),
    (
        29,
        "ephemeral",
        T::Msg(&[(
            1,
            "volumeClaimTemplate",
            T::Msg(&[
                (1, "metadata", T::Msg(OBJECT_META)),
                (2, "spec", T::Msg(PVC_SPEC)),
            ]),
        )]),
    ),
    (
        30,
        "image",
        T::Msg(&[(1, "reference", T::Str), (2, "pullPolicy", T::Str)]),
    ),
];
const VOLUME: Schema = &[(1, "name", T::Str), (2, "", T::Inline(VOLUME_SOURCE))];
const NODE_SELECTOR_REQUIREMENT: Schema = &[
    (1, "key", T::Str),
    (2, "operator", T::Str),
    (3, "values", T::RepStr),
];
const NODE_SELECTOR_TERM: Schema = &[
    (1, "matchExpressions", T::RepMsg(NODE_SELECTOR_REQUIREMENT)),
    (2, "matchFields", T::RepMsg(NODE_SELECTOR_REQUIREMENT)),
];
const POD_AFFINITY_TERM: Schema = &[
    (1, "labelSelector", T::Msg(LABEL_SELECTOR)),
    (2, "namespaces", T::RepStr),
    (3, "topologyKey", T::Str),
    (4, "namespaceSelector", T::Msg(LABEL_SELECTOR)),
    (5, "matchLabelKeys", T::RepStr),
    (6, "mismatchLabelKeys", T::RepStr),
];
// PodAffinity and PodAntiAffinity have the same shape.
const POD_AFFINITY: Schema = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        T::RepMsg(POD_AFFINITY_TERM),
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        T::RepMsg(&[
            (1, "weight", T::Int),
            (2, "podAffinityTerm", T::Msg(POD_AFFINITY_TERM)),
        ]),
    ),
];
const AFFINITY: Schema = &[
    (
        1,
        "nodeAffinity",
        T::Msg(&[
            (
                1,
                "requiredDuringSchedulingIgnoredDuringExecution",
                T::Msg(&[(1, "nodeSelectorTerms", T::RepMsg(NODE_SELECTOR_TERM))]),
            ),
            (
                2,
                "preferredDuringSchedulingIgnoredDuringExecution",
                T::RepMsg(&[
                    (1, "weight", T::Int),
                    (2, "preference", T::Msg(NODE_SELECTOR_TERM)),
                ]),
            ),
        ]),
    ),
    (2, "podAffinity", T::Msg(POD_AFFINITY)),
    (3, "podAntiAffinity", T::Msg(POD_AFFINITY)),
];
const POD_SECURITY_CONTEXT: Schema = &[
    (1, "seLinuxOptions", T::Msg(SE_LINUX_OPTIONS)),
    (8, "windowsOptions", T::Msg(WINDOWS_OPTIONS)),
    (2, "runAsUser", T::Int),
    (6, "runAsGroup", T::Int),
    (3, "runAsNonRoot", T::Bool),
    (4, "supplementalGroups", T::RepInt),
    (12, "supplementalGroupsPolicy", T::Str),
    (5, "fsGroup", T::Int),
    (
        7,
        "sysctls",
        T::RepMsg(&[(1, "name", T::Str), (2, "value", T::Str)]),
    ),
    (9, "fsGroupChangePolicy", T::Str),
    (10, "seccompProfile", T::Msg(PROFILE)),
    (11, "appArmorProfile", T::Msg(PROFILE)),
    (13, "seLinuxChangePolicy", T::Str),
];
const TOLERATION: Schema = &[
    (1, "key", T::Str),
    (2, "operator", T::Str),
    (3, "value", T::Str),
    (4, "effect", T::Str),
    (5, "tolerationSeconds", T::Int),
];
const TOPOLOGY_SPREAD_CONSTRAINT: Schema = &[
    (1, "maxSkew", T::Int),
    (2, "topologyKey", T::Str),
    (3, "whenUnsatisfiable", T::Str),
    (4, "labelSelector", T::Msg(LABEL_SELECTOR)),
    (5, "minDomains", T::Int),
    (6, "nodeAffinityPolicy", T::Str),
    (7, "nodeTaintsPolicy", T::Str),
    (8, "matchLabelKeys", T::RepStr),
];
const POD_SPEC: Schema = &[
    (1, "volumes", T::RepMsg(VOLUME)),
    (20, "initContainers", T::RepMsg(CONTAINER)),
    (2, "containers", T::RepMsg(CONTAINER)),
    (34, "ephemeralContainers", T::RepMsg(EPHEMERAL_CONTAINER)),
    (3, "restartPolicy", T::Str),
    (4, "terminationGracePeriodSeconds", T::Int),
    (5, "activeDeadlineSeconds", T::Int),
    (6, "dnsPolicy", T::Str),
    (7, "nodeSelector", T::MapStr),
    (8, "serviceAccountName", T::Str),
    (9, "serviceAccount", T::Str),
    (21, "automountServiceAccountToken", T::Bool),
    (10, "nodeName", T::Str),
    (11, "hostNetwork", T::BoolOmitEmpty),
    (12, "hostPID", T::BoolOmitEmpty),
    (13, "hostIPC", T::BoolOmitEmpty),
    (27, "shareProcessNamespace", T::Bool),
    (14, "securityContext", T::Msg(POD_SECURITY_CONTEXT)),
    (15, "imagePullSecrets", T::RepMsg(LOCAL_OBJECT_REF)),
    (16, "hostname", T::Str),
    (17, "subdomain", T::Str),
    (18, "affinity", T::Msg(AFFINITY)),
    (19, "schedulerName", T::Str),
    (22, "tolerations", T::RepMsg(TOLERATION)),
    (
        23,
        "hostAliases",
        T::RepMsg(&[(1, "ip", T::Str), (2, "hostnames", T::RepStr)]),
    ),
    (24, "priorityClassName", T::Str),
    (25, "priority", T::Int),
    (
        26,
        "dnsConfig",
        T::Msg(&[
            (1, "nameservers", T::RepStr),
            (2, "searches", T::RepStr),
            (
                3,
                "options",
                T::RepMsg(&[(1, "name", T::Str), (2, "value", T::Str)]),
            ),
        ]),
    ),
    (
        28,
        "readinessGates",
        T::RepMsg(&[(1, "conditionType", T::Str)]),
    ),
    (29, "runtimeClassName", T::Str),
    (30, "enableServiceLinks", T::Bool),
    (31, "preemptionPolicy", T::Str),
    (32, "overhead", T::MapQuantity),
    (
        33,
        "topologySpreadConstraints",
        T::RepMsg(TOPOLOGY_SPREAD_CONSTRAINT),
    ),
    (35, "setHostnameAsFQDN", T::Bool),
    (36, "os", T::Msg(&[(1, "name", T::Str)])),
    (37, "hostUsers", T::Bool),
    (38, "schedulingGates", T::RepMsg(&[(1, "name", T::Str)])),
    (
        39,
        "resourceClaims",
        T::RepMsg(&[
            (1, "name", T::Str),
            (3, "resourceClaimName", T::Str),
            (4, "resourceClaimTemplateName", T::Str),
        ]),
    ),
    (40, "resources", T::Msg(RESOURCE_REQUIREMENTS)),
    (41, "hostnameOverride", T::Str),
];
const POD_TEMPLATE_SPEC: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(POD_SPEC)),
];
// Clients never set most of a Pod's status (the kubelet does), so only its summary is decoded.
const POD: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(POD_SPEC)),
    (
        3,
        "status",
        T::Msg(&[
            (1, "phase", T::Str),
            (3, "message", T::Str),
            (4, "reason", T::Str),
            (11, "nominatedNodeName", T::Str),
            (5, "hostIP", T::Str),
            (6, "podIP", T::Str),
            (7, "startTime", T::Time),
            (9, "qosClass", T::Str),
        ]),
    ),
];
const SERVICE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (
                1,
                "ports",
                T::RepMsg(&[
                    (1, "name", T::Str),
                    (2, "protocol", T::Str),
                    (6, "appProtocol", T::Str),
                    (3, "port", T::Int),
                    (4, "targetPort", T::IntOrStr),
                    (5, "nodePort", T::IntOmitEmpty),
                ]),
            ),
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
            (
                14,
                "sessionAffinityConfig",
                T::Msg(&[(1, "clientIP", T::Msg(&[(1, "timeoutSeconds", T::Int)]))]),
            ),
            (19, "ipFamilies", T::RepStr),
            (17, "ipFamilyPolicy", T::Str),
            (20, "allocateLoadBalancerNodePorts", T::Bool),
            (21, "loadBalancerClass", T::Str),
            (22, "internalTrafficPolicy", T::Str),
            (23, "trafficDistribution", T::Str),
        ]),
    ),
    (
        3,
        "status",
        T::Msg(&[
            (
                1,
                "loadBalancer",
                T::Msg(&[(
                    1,
                    "ingress",
                    T::RepMsg(&[
                        (1, "ip", T::Str),
                        (2, "hostname", T::Str),
                        (3, "ipMode", T::Str),
                        (
                            4,
                            "ports",
                            T::RepMsg(&[
                                (1, "port", T::Int),
                                (2, "protocol", T::Str),
                                (3, "error", T::Str),
                            ]),
                        ),
                    ]),
                )]),
            ),
            (2, "conditions", T::RepMsg(CONDITION)),
        ]),
    ),
];

// batch/v1.
const JOB_SPEC: Schema = &[
    (1, "parallelism", T::Int),
    (2, "completions", T::Int),
    (3, "activeDeadlineSeconds", T::Int),
    (
        11,
        "podFailurePolicy",
        T::Msg(&[(
            1,
            "rules",
            T::RepMsg(&[
                (1, "action", T::Str),
                (
                    2,
                    "onExitCodes",
                    T::Msg(&[
                        (1, "containerName", T::Str),
                        (2, "operator", T::Str),
                        (3, "values", T::RepInt),
                    ]),
                ),
                (
                    3,
                    "onPodConditions",
                    T::RepMsg(&[(1, "type", T::Str), (2, "status", T::Str)]),
                ),
            ]),
        )]),
    ),
    (
        16,
        "successPolicy",
        T::Msg(&[(
            1,
            "rules",
            T::RepMsg(&[
                (1, "succeededIndexes", T::Str),
                (2, "succeededCount", T::Int),
            ]),
        )]),
    ),
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
const JOB: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(JOB_SPEC)),
    (
        3,
        "status",
        T::Msg(&[
            (
                1,
                "conditions",
                T::RepMsg(&[
                    (1, "type", T::Str),
                    (2, "status", T::Str),
                    (3, "lastProbeTime", T::Time),
                    (4, "lastTransitionTime", T::Time),
                    (5, "reason", T::Str),
                    (6, "message", T::Str),
                ]),
            ),
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
                T::Msg(&[(1, "succeeded", T::RepStr), (2, "failed", T::RepStr)]),
            ),
            (9, "ready", T::Int),
        ]),
    ),
];
const CRONJOB: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "schedule", T::Str),
            (8, "timeZone", T::Str),
            (2, "startingDeadlineSeconds", T::Int),
            (3, "concurrencyPolicy", T::Str),
            (4, "suspend", T::Bool),
            (
                5,
                "jobTemplate",
                T::Msg(&[
                    (1, "metadata", T::Msg(OBJECT_META)),
                    (2, "spec", T::Msg(JOB_SPEC)),
                ]),
            ),
            (6, "successfulJobsHistoryLimit", T::Int),
            (7, "failedJobsHistoryLimit", T::Int),
        ]),
    ),
    (
        3,
        "status",
        T::Msg(&[
            (1, "active", T::RepMsg(OBJECT_REFERENCE)),
            (4, "lastScheduleTime", T::Time),
            (5, "lastSuccessfulTime", T::Time),
        ]),
    ),
];

fn schema_for(kind: &str) -> Option<Schema> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIGMAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICEACCOUNT,
        "SelfSubjectAccessReview" => SSAR,
        "SubjectAccessReview" | "LocalSubjectAccessReview" => SAR,
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

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or("truncated varint")?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.i.checked_add(n).ok_or("length overflow")?;
        let s = self.b.get(self.i..end).ok_or("truncated field")?;
        self.i = end;
        Ok(s)
    }

    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
}

enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn fields(b: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, String> {
    let mut r = Reader { b, i: 0 };
    let mut out = vec![];
    while !r.done() {
        let key = r.varint()?;
        let num = (key >> 3) as u32;
        let raw = match key & 7 {
            0 => Raw::Varint(r.varint()?),
            1 => {
                r.take(8)?;
                Raw::Other
            }
            2 => {
                let n = r.varint()? as usize;
                Raw::Bytes(r.take(n)?)
            }
            5 => {
                r.take(4)?;
                Raw::Other
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        out.push((num, raw));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in string".to_string())
}

fn time(b: &[u8], micro: bool) -> Result<Value, String> {
    let mut secs = 0i64;
    let mut nanos = 0i64;
    for (n, raw) in fields(b)? {
        if let Raw::Varint(v) = raw {
            match n {
                1 => secs = v as i64,
                2 => nanos = v as i64,
                _ => {}
            }
        }
    }
    // Go's zero time is `null` in JSON. client-go writes it as an empty message, and
    // metav1.Time's decoder also reads {0, 0} as the zero time, not the Unix epoch; a literal
    // 0001-01-01T00:00:00Z is the zero time too.
    const GO_ZERO_TIME: i64 = -62_135_596_800;
    if (secs == 0 || secs == GO_ZERO_TIME) && nanos == 0 {
        return Ok(Value::Null);
    }
    let t = chrono::DateTime::from_timestamp(secs, nanos as u32).ok_or("invalid time")?;
    Ok(json!(if micro {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }))
}

fn quantity(b: &[u8]) -> Result<Value, String> {
    let mut q = None;
    for (n, raw) in fields(b)? {
        if let (1, Raw::Bytes(x)) = (n, raw) {
            q = Some(string(x)?);
        }
    }
    // An empty message is the zero Quantity, which Go prints as "0".
    Ok(json!(q.unwrap_or_else(|| "0".into())))
}

fn int_or_string(b: &[u8]) -> Result<Value, String> {
    let (mut kind, mut int, mut text) = (0u64, 0i32, String::new());
    for (n, raw) in fields(b)? {
        match (n, raw) {
            (1, Raw::Varint(v)) => kind = v,
            // int32 on the wire is sign-extended to 64 bits; Go keeps the low 32.
            (2, Raw::Varint(v)) => int = v as i32,
            (3, Raw::Bytes(x)) => text = string(x)?,
            (1..=3, _) => return Err("unexpected wire type in an IntOrString".into()),
            _ => {}
        }
    }
    match kind {
        0 => Ok(json!(int)),
        1 => Ok(json!(text)),
        k => Err(format!("invalid IntOrString type {k}")),
    }
}

fn map_entry(b: &[u8], t: T) -> Result<(String, Value), String> {
    let mut k = String::new();
    let mut v = None;
    for (n, raw) in fields(b)? {
        if let Raw::Bytes(x) = raw {
            match n {
                1 => k = string(x)?,
                2 => {
                    v = Some(match t {
                        T::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(x)),
                        T::MapQuantity => quantity(x)?,
                        _ => json!(string(x)?),
                    })
                }
                _ => {}
            }
        }
    }
    // A map entry may leave out a default value; Go then stores the zero value.
    let v = match (v, t) {
        (Some(v), _) => v,
        (None, T::MapQuantity) => json!("0"),
        (None, _) => json!(""),
    };
    Ok((k, v))
}

fn packed_varints(b: &[u8]) -> Result<Vec<u64>, String> {
    let mut r = Reader { b, i: 0 };
    let mut out = vec![];
    while !r.done() {
        out.push(r.varint()?);
    }
    Ok(out)
}

fn push(m: &mut Map<String, Value>, name: String, item: Value) {
    if let Some(a) = m
        .entry(name)
        .or_insert_with(|| Value::Array(vec![]))
        .as_array_mut()
    {
        a.push(item);
    }
}

fn message(b: &[u8], schema: Schema) -> Result<Map<String, Value>, String> {
    let mut m = Map::new();
    // A singular message field may occur more than once; protobuf merges the occurrences,
    // which is what decoding their concatenation does.
    let mut nested: Vec<(u32, String, bool, Schema, Vec<u8>)> = vec![];
    for (num, raw) in fields(b)? {
        let Some((_, name, t)) = schema.iter().find(|(n, _, _)| *n == num) else {
            continue;
        };
        let name = name.to_string();
        match (t, raw) {
            (T::Str, Raw::Bytes(x)) => {
                if !x.is_empty() {
                    m.insert(name, json!(string(x)?));
                }
            }
            (T::Int, Raw::Varint(v)) => {
                m.insert(name, json!(v as i64));
            }
            (T::IntOmitEmpty, Raw::Varint(v)) => {
                if v == 0 {
                    m.remove(&name);
                } else {
                    m.insert(name, json!(v as i64));
                }
            }
            (T::Bool, Raw::Varint(v)) => {
                m.insert(name, json!(v != 0));
            }
            (T::BoolOmitEmpty, Raw::Varint(v)) => {
                if v == 0 {
                    m.remove(&name);
                } else {
                    m.insert(name, json!(true));
                }
            }
            (T::Time, Raw::Bytes(x)) => {
                let t = time(x, false)?;
                if !t.is_null() {
                    m.insert(name, t);
                }
            }
            (T::MicroTime, Raw::Bytes(x)) => {
                let t = time(x, true)?;
                if !t.is_null() {
                    m.insert(name, t);
                }
            }
            (T::Quantity, Raw::Bytes(x)) => {
                m.insert(name, quantity(x)?);
            }
            (T::IntOrStr, Raw::Bytes(x)) => {
                m.insert(name, int_or_string(x)?);
            }
            (T::Msg(s) | T::Inline(s), Raw::Bytes(x)) => {
                match nested.iter_mut().find(|(n, ..)| *n == num) {
                    Some((.., bytes)) => bytes.extend_from_slice(x),
                    None => nested.push((num, name, matches!(t, T::Inline(_)), s, x.to_vec())),
                }
            }
            (T::MapStr | T::MapBytes | T::MapQuantity, Raw::Bytes(x)) => {
                let (k, v) = map_entry(x, *t)?;
                if let Some(obj) = m
                    .entry(name)
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                {
                    obj.insert(k, v);
                }
            }
            (T::RepStr, Raw::Bytes(x)) => {
                let s = string(x)?;
                push(&mut m, name, json!(s));
            }
            (T::RepInt, Raw::Varint(v)) => push(&mut m, name, json!(v as i64)),
            // proto2 writes repeated scalars unpacked, but a packed run must decode too.
            (T::RepInt, Raw::Bytes(x)) => {
                for v in packed_varints(x)? {
                    push(&mut m, name.clone(), json!(v as i64));
                }
            }
            (T::RepMsg(s), Raw::Bytes(x)) => {
                let item = Value::Object(message(x, s)?);
                push(&mut m, name, item);
            }
            _ => return Err(format!("unexpected wire type for field {name}")),
        }
    }
    for (_, name, inline, s, bytes) in nested {
        let sub = message(&bytes, s)?;
        if inline {
            m.extend(sub);
        } else {
            m.insert(name, Value::Object(sub));
        }
    }
    Ok(m)
}

/// Decodes a `k8s\0`-prefixed protobuf body into JSON.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\x00")
        .ok_or("missing the k8s protobuf envelope")?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Raw::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    if let Raw::Bytes(x) = tf {
                        match tn {
                            1 => api_version = string(x)?,
                            2 => kind = string(x)?,
                            _ => {}
                        }
                    }
                }
            }
            (2, Raw::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let schema = schema_for(&kind)
        .ok_or_else(|| format!("protobuf bodies of kind {kind:?} are not supported; send JSON"))?;
    let mut m = message(raw, schema)?;
    if !api_version.is_empty() {
        m.insert("apiVersion".into(), json!(api_version));
    }
    if !kind.is_empty() {
        m.insert("kind".into(), json!(kind));
    }
    Ok(Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = vec![];
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn field(num: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = varint(u64::from(num) << 3 | 2);
        out.extend(varint(payload.len() as u64));
        out.extend_from_slice(payload);
        out
    }

    fn int(num: u32, v: i64) -> Vec<u8> {
        let mut out = varint(u64::from(num) << 3);
        out.extend(varint(v as u64));
        out
    }

    fn entry(k: &str, v: &[u8]) -> Vec<u8> {
        [field(1, k.as_bytes()), field(2, v)].concat()
    }

    /// What client-go writes for a zero `metav1.Time`.
    fn zero_time(num: u32) -> Vec<u8> {
        field(num, b"")
    }

    fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
        [b"k8s\x00".to_vec(), field(1, &type_meta), field(2, raw)].concat()
    }

    fn int_or_string_int(num: u32, v: i64) -> Vec<u8> {
        field(num, &[int(1, 0), int(2, v), field(3, b"")].concat())
    }

    fn int_or_string_str(num: u32, v: &str) -> Vec<u8> {
        field(
            num,
            &[int(1, 1), int(2, 0), field(3, v.as_bytes())].concat(),
        )
    }

    #[test]
    fn decodes_a_configmap() {
        let mut meta = field(1, b"cm1");
        meta.extend(field(11, &[field(1, b"app"), field(2, b"web")].concat()));
        let mut cm = field(1, &meta);
        cm.extend(field(2, &[field(1, b"k"), field(2, b"v")].concat()));
        let mut unknown = field(1, &[field(1, b"v1"), field(2, b"ConfigMap")].concat());
        unknown.extend(field(2, &cm));
        let mut body = b"k8s\x00".to_vec();
        body.extend(unknown);
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    /// A container as gogo-protobuf writes it: every non-pointer field, zero or not.
    fn plain_container(name: &str, image: &str, command: &[&str]) -> Vec<u8> {
        let mut c = [field(1, name.as_bytes()), field(2, image.as_bytes())].concat();
        for arg in command {
            c.extend(field(3, arg.as_bytes()));
        }
        c.extend(
            [
                field(5, b""),
                field(8, b""),
                field(13, b""),
                field(14, b""),
                int(16, 0),
                int(17, 0),
                int(18, 0),
                field(20, b""),
            ]
            .concat(),
        );
        c
    }

    fn plain_pod_spec(containers: &[Vec<u8>], restart: &str) -> Vec<u8> {
        let mut s = vec![];
        for c in containers {
            s.extend(field(2, c));
        }
        s.extend(
            [
                field(3, restart.as_bytes()),
                field(6, b""),
                field(8, b""),
                field(9, b""),
                field(10, b""),
                int(11, 0),
                int(12, 0),
                int(13, 0),
                field(16, b""),
                field(17, b""),
                field(19, b""),
            ]
            .concat(),
        );
        s
    }

    #[test]
    fn decodes_a_cronjob_as_kubectl_create_sends_it() {
        let container = plain_container("cj1", "busybox", &["echo", "hi"]);
        let template = [
            field(1, &zero_time(8)),
            field(2, &plain_pod_spec(&[container], "OnFailure")),
        ]
        .concat();
        let job_template = [
            field(1, &[field(1, b"cj1"), zero_time(8)].concat()),
            field(2, &field(6, &template)),
        ]
        .concat();
        let spec = [
            field(1, b"*/1 * * * *"),
            field(3, b""),
            field(5, &job_template),
        ]
        .concat();
        // The other spellings of the zero time: Go's year 1, and an explicit {0, 0}.
        let meta = [
            field(1, b"cj1"),
            field(3, b"t1"),
            int(7, 0),
            field(8, &int(1, -62_135_596_800)),
            field(9, &[int(1, 0), int(2, 0)].concat()),
        ]
        .concat();
        let status = field(4, &int(1, 1_700_000_000));
        let raw = [field(1, &meta), field(2, &spec), field(3, &status)].concat();
        let v = decode(&body("batch/v1", "CronJob", &raw)).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "cj1", "namespace": "t1"},
                "spec": {
                    "schedule": "*/1 * * * *",
                    "jobTemplate": {
                        "metadata": {"name": "cj1"},
                        "spec": {"template": {
                            "metadata": {},
                            "spec": {
                                "containers": [{"name": "cj1", "image": "busybox", "command": ["echo", "hi"], "resources": {}}],
                                "restartPolicy": "OnFailure"
                            }
                        }}
                    }
                },
                "status": {"lastScheduleTime": "2023-11-14T22:13:20Z"}
            })
        );
    }

    #[test]
    fn decodes_a_job_with_a_full_pod_template() {
        let env = [
            field(7, &[field(1, b"PLAIN"), field(2, b"x")].concat()),
            field(
                7,
                &[
                    field(1, b"FROM_CM"),
                    field(2, b""),
                    field(
                        3,
                        &field(
                            3,
                            &[field(1, &field(1, b"cm")), field(2, b"k"), int(3, 1)].concat(),
                        ),
                    ),
                ]
                .concat(),
            ),
            field(
                7,
                &[
                    field(1, b"POD"),
                    field(
                        3,
                        &field(1, &[field(1, b"v1"), field(2, b"metadata.name")].concat()),
                    ),
                ]
                .concat(),
            ),
            field(
                19,
                &[field(1, b"P_"), field(3, &field(1, &field(1, b"sec")))].concat(),
            ),
        ]
        .concat();
        let ports = field(
            6,
            &[
                field(1, b"http"),
                int(2, 0),
                int(3, 8080),
                field(4, b"TCP"),
                field(5, b""),
            ]
            .concat(),
        );
        let resources = field(
            8,
            &[
                field(1, &entry("cpu", &field(1, b"500m"))),
                field(1, &entry("memory", &field(1, b"128Mi"))),
                field(2, &entry("cpu", &field(1, b"250m"))),
            ]
            .concat(),
        );
        let mounts = field(
            9,
            &[
                field(1, b"cfg"),
                int(2, 1),
                field(3, b"/etc/cfg"),
                field(4, b""),
                field(6, b""),
            ]
            .concat(),
        );
        let liveness = field(
            10,
            &[
                field(
                    1,
                    &field(
                        2,
                        &[field(1, b"/healthz"), int_or_string_str(2, "http")].concat(),
                    ),
                ),
                int(2, 5),
                int(3, 0),
                int(4, 0),
            ]
            .concat(),
        );
        let readiness = field(11, &field(1, &field(3, &int_or_string_int(1, 8080))));
        let security = field(
            15,
            &[int(4, 1000), int(5, 1), field(1, &field(2, b"ALL"))].concat(),
        );
        let container = [
            field(1, b"main"),
            field(2, b"busybox:1.36"),
            field(4, b"run"),
            field(5, b"/work"),
            ports,
            env,
            resources,
            mounts,
            liveness,
            readiness,
            field(14, b"IfNotPresent"),
            security,
            int(16, 0),
        ]
        .concat();
        let volumes = [
            field(
                1,
                &[
                    field(1, b"cfg"),
                    field(
                        2,
                        &field(
                            19,
                            &[field(1, &field(1, b"app-config")), int(3, 420)].concat(),
                        ),
                    ),
                ]
                .concat(),
            ),
            field(
                1,
                &[
                    field(1, b"scratch"),
                    field(
                        2,
                        &field(2, &[field(1, b""), field(2, &field(1, b"1Gi"))].concat()),
                    ),
                ]
                .concat(),
            ),
        ]
        .concat();
        let pod_security = field(
            14,
            &[
                int(2, 1000),
                int(3, 1),
                int(4, 10),
                // a packed run of supplementalGroups as well as an unpacked one
                field(4, &[varint(20), varint(30)].concat()),
                int(5, 2000),
            ]
            .concat(),
        );
        let pod_spec = [
            volumes,
            field(2, &container),
            field(3, b"Never"),
            int(4, 10),
            field(7, &entry("disk", b"ssd")),
            field(8, b"runner"),
            int(11, 0),
            pod_security,
            field(
                22,
                &[
                    field(1, b"dedicated"),
                    field(2, b"Equal"),
                    field(3, b"batch"),
                    field(4, b"NoExecute"),
                    int(5, 60),
                ]
                .concat(),
            ),
            int(25, -5),
            int(30, 0),
        ]
        .concat();
        let spec = [
            int(1, 2),
            int(7, 0),
            field(6, &[field(1, &field(11, &entry("app", b"j")))].concat()),
            field(6, &[field(2, &pod_spec)].concat()),
            int(10, 0),
            int(8, 100),
        ]
        .concat();
        let owner = [
            field(1, b"CronJob"),
            field(3, b"cj1"),
            field(4, b"uid-1"),
            field(5, b"batch/v1"),
            int(6, 1),
            int(7, 1),
        ]
        .concat();
        let meta = [
            field(1, b"j1"),
            field(3, b"t1"),
            field(12, &entry("cronjob.kubernetes.io/instantiate", b"manual")),
            field(13, &owner),
        ]
        .concat();
        let raw = [field(1, &meta), field(2, &spec)].concat();
        let v = decode(&body("batch/v1", "Job", &raw)).unwrap();
        assert_eq!(
            v["metadata"],
            json!({
                "name": "j1",
                "namespace": "t1",
                "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "cj1", "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]
            })
        );
        let spec = &v["spec"];
        assert_eq!(spec["parallelism"], json!(2));
        assert_eq!(spec["backoffLimit"], json!(0), "a pointer's zero is kept");
        assert_eq!(spec["suspend"], json!(false));
        assert_eq!(spec["ttlSecondsAfterFinished"], json!(100));
        assert_eq!(
            spec["template"]["metadata"],
            json!({"labels": {"app": "j"}}),
            "two occurrences of a message field both count"
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(
            pod["volumes"],
            json!([
                {"name": "cfg", "configMap": {"name": "app-config", "defaultMode": 420}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
            ])
        );
        assert_eq!(pod["restartPolicy"], json!("Never"));
        assert_eq!(pod["terminationGracePeriodSeconds"], json!(10));
        assert_eq!(pod["nodeSelector"], json!({"disk": "ssd"}));
        assert_eq!(pod["serviceAccountName"], json!("runner"));
        assert_eq!(pod.get("hostNetwork"), None);
        assert_eq!(pod["enableServiceLinks"], json!(false));
        assert_eq!(pod["priority"], json!(-5));
        assert_eq!(
            pod["securityContext"],
            json!({"runAsUser": 1000, "runAsNonRoot": true, "supplementalGroups": [10, 20, 30], "fsGroup": 2000})
        );
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoExecute", "tolerationSeconds": 60}])
        );
        assert_eq!(
            pod["containers"][0],
            json!({
                "name": "main",
                "image": "busybox:1.36",
                "args": ["run"],
                "workingDir": "/work",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "PLAIN", "value": "x"},
                    {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": true}}},
                    {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
                ],
                "envFrom": [{"prefix": "P_", "secretRef": {"name": "sec"}}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "volumeMounts": [{"name": "cfg", "readOnly": true, "mountPath": "/etc/cfg"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": 8080}},
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {"runAsUser": 1000, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}}
            })
        );
    }

    fn service_port(name: &str, port: i64, target: Vec<u8>, node_port: i64) -> Vec<u8> {
        field(
            1,
            &[
                field(1, name.as_bytes()),
                field(2, b"TCP"),
                int(3, port),
                target,
                int(5, node_port),
            ]
            .concat(),
        )
    }

    #[test]
    fn decodes_services_with_int_and_string_target_ports() {
        let spec = [
            service_port("80-8080", 80, int_or_string_int(4, 8080), 0),
            field(2, &entry("app", b"s1")),
            field(3, b""),
            field(4, b"ClusterIP"),
            field(7, b""),
            field(10, b""),
            field(11, b""),
            int(12, 0),
            int(13, 0),
        ]
        .concat();
        let raw = [
            field(
                1,
                &[field(1, b"s1"), field(11, &entry("app", b"s1"))].concat(),
            ),
            field(2, &spec),
            field(3, &field(1, b"")),
        ]
        .concat();
        let v = decode(&body("v1", "Service", &raw)).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "s1", "labels": {"app": "s1"}},
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "s1"},
                    "type": "ClusterIP"
                },
                "status": {"loadBalancer": {}}
            })
        );
        let spec = [
            service_port("web", 80, int_or_string_str(4, "http"), 30080),
            field(4, b"NodePort"),
            field(19, b"IPv4"),
        ]
        .concat();
        let v = decode(&body("v1", "Service", &field(2, &spec))).unwrap();
        assert_eq!(
            v["spec"],
            json!({
                "ports": [{"name": "web", "protocol": "TCP", "port": 80, "targetPort": "http", "nodePort": 30080}],
                "type": "NodePort",
                "ipFamilies": ["IPv4"]
            })
        );
    }

    #[test]
    fn decodes_a_pod() {
        let raw = [
            field(1, &field(1, b"p1")),
            field(
                2,
                &plain_pod_spec(&[plain_container("c", "nginx", &[])], "Always"),
            ),
            field(3, &[field(1, b"Pending"), zero_time(7)].concat()),
        ]
        .concat();
        let v = decode(&body("v1", "Pod", &raw)).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p1"},
                "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}], "restartPolicy": "Always"},
                "status": {"phase": "Pending"}
            })
        );
    }

    #[test]
    fn rejects_malformed_workload_bodies() {
        let bad_kind = field(2, &service_port("p", 80, field(4, &int(1, 7)), 0));
        let err = decode(&body("v1", "Service", &bad_kind)).unwrap_err();
        assert!(err.contains("IntOrString"), "{err}");
        let varint_port = field(2, &service_port("p", 80, int(4, 8080), 0));
        assert!(decode(&body("v1", "Service", &varint_port)).is_err());
        let bad_quantity = field(
            2,
            &field(
                6,
                &field(
                    2,
                    &field(2, &field(8, &field(1, &entry("cpu", &field(1, &[0xff]))))),
                ),
            ),
        );
        assert!(decode(&body("batch/v1", "Job", &bad_quantity)).is_err());

        // Every truncation and every single-byte corruption of a valid body decodes or fails;
        // none panics.
        let good = body(
            "batch/v1",
            "Job",
            &field(
                2,
                &field(
                    6,
                    &field(
                        2,
                        &plain_pod_spec(&[plain_container("c", "i", &["a"])], "Never"),
                    ),
                ),
            ),
        );
        assert!(decode(&good).is_ok());
        for n in 0..good.len() {
            let _ = decode(&good[..n]);
            for flip in [0x00, 0x7f, 0x80, 0xff] {
                let mut b = good.clone();
                b[n] ^= flip;
                let _ = decode(&b);
            }
        }
    }
}
