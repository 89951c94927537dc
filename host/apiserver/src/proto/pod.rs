//! Schemas of the pod spec and everything inside it: containers, probes, volumes, affinity.

use crate::proto::meta::{LABEL_SELECTOR, OBJECT_META};
use crate::proto::shape::{Schema, T};

// core/v1 building blocks of the workload kinds.
pub(super) const OBJECT_REFERENCE: Schema = &[
    (1, "kind", T::Str),
    (2, "namespace", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
    (5, "apiVersion", T::Str),
    (6, "resourceVersion", T::Str),
    (7, "fieldPath", T::Str),
];

pub(super) const LOCAL_OBJECT_REF: Schema = &[(1, "name", T::Str)];

pub(super) const KEY_TO_PATH: Schema =
    &[(1, "key", T::Str), (2, "path", T::Str), (3, "mode", T::Int)];

pub(super) const OBJECT_FIELD_SELECTOR: Schema =
    &[(1, "apiVersion", T::Str), (2, "fieldPath", T::Str)];

pub(super) const RESOURCE_FIELD_SELECTOR: Schema = &[
    (1, "containerName", T::Str),
    (2, "resource", T::Str),
    (3, "divisor", T::Quantity),
];

// ConfigMapKeySelector and SecretKeySelector have the same shape.
pub(super) const KEY_SELECTOR: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "key", T::Str),
    (3, "optional", T::Bool),
];

const FILE_KEY_SELECTOR: Schema = &[
    (1, "volumeName", T::Str),
    (2, "path", T::Str),
    (3, "key", T::Str),
    (4, "optional", T::Bool),
];

const ENV_VAR_SOURCE: Schema = &[
    (1, "fieldRef", T::Msg(OBJECT_FIELD_SELECTOR)),
    (2, "resourceFieldRef", T::Msg(RESOURCE_FIELD_SELECTOR)),
    (3, "configMapKeyRef", T::Msg(KEY_SELECTOR)),
    (4, "secretKeyRef", T::Msg(KEY_SELECTOR)),
    (5, "fileKeyRef", T::Msg(FILE_KEY_SELECTOR)),
];

pub(super) const ENV_VAR: Schema = &[
    (1, "name", T::Str),
    (2, "value", T::Str),
    (3, "valueFrom", T::Msg(ENV_VAR_SOURCE)),
];

// ConfigMapEnvSource and SecretEnvSource have the same shape.
pub(super) const ENV_SOURCE: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "optional", T::Bool),
];

pub(super) const ENV_FROM_SOURCE: Schema = &[
    (1, "prefix", T::Str),
    (2, "configMapRef", T::Msg(ENV_SOURCE)),
    (3, "secretRef", T::Msg(ENV_SOURCE)),
];

pub(super) const CONTAINER_PORT: Schema = &[
    (1, "name", T::Str),
    (2, "hostPort", T::IntOmitEmpty),
    (3, "containerPort", T::Int),
    (4, "protocol", T::Str),
    (5, "hostIP", T::Str),
];

const RESOURCE_CLAIM: Schema = &[(1, "name", T::Str), (2, "request", T::Str)];

pub(super) const RESOURCE_REQUIREMENTS: Schema = &[
    (1, "limits", T::MapQuantity),
    (2, "requests", T::MapQuantity),
    (3, "claims", T::RepMsg(RESOURCE_CLAIM)),
];

pub(super) const VOLUME_MOUNT: Schema = &[
    (1, "name", T::Str),
    (2, "readOnly", T::BoolOmitEmpty),
    (7, "recursiveReadOnly", T::Str),
    (3, "mountPath", T::Str),
    (4, "subPath", T::Str),
    (5, "mountPropagation", T::Str),
    (6, "subPathExpr", T::Str),
];

pub(super) const EXEC_ACTION: Schema = &[(1, "command", T::RepStr)];

const HTTP_HEADER: Schema = &[(1, "name", T::Str), (2, "value", T::Str)];

pub(super) const HTTP_GET_ACTION: Schema = &[
    (1, "path", T::Str),
    (2, "port", T::IntOrStr),
    (3, "host", T::Str),
    (4, "scheme", T::Str),
    (5, "httpHeaders", T::RepMsg(HTTP_HEADER)),
];

pub(super) const TCP_SOCKET_ACTION: Schema = &[(1, "port", T::IntOrStr), (2, "host", T::Str)];

const GRPC_ACTION: Schema = &[(1, "port", T::Int), (2, "service", T::Str)];

const PROBE_HANDLER: Schema = &[
    (1, "exec", T::Msg(EXEC_ACTION)),
    (2, "httpGet", T::Msg(HTTP_GET_ACTION)),
    (3, "tcpSocket", T::Msg(TCP_SOCKET_ACTION)),
    (4, "grpc", T::Msg(GRPC_ACTION)),
];

pub(super) const PROBE: Schema = &[
    (1, "", T::Inline(PROBE_HANDLER)),
    (2, "initialDelaySeconds", T::IntOmitEmpty),
    (3, "timeoutSeconds", T::IntOmitEmpty),
    (4, "periodSeconds", T::IntOmitEmpty),
    (5, "successThreshold", T::IntOmitEmpty),
    (6, "failureThreshold", T::IntOmitEmpty),
    (7, "terminationGracePeriodSeconds", T::Int),
];

const SLEEP_ACTION: Schema = &[(1, "seconds", T::Int)];

pub(super) const LIFECYCLE_HANDLER: Schema = &[
    (1, "exec", T::Msg(EXEC_ACTION)),
    (2, "httpGet", T::Msg(HTTP_GET_ACTION)),
    (3, "tcpSocket", T::Msg(TCP_SOCKET_ACTION)),
    (4, "sleep", T::Msg(SLEEP_ACTION)),
];

pub(super) const SE_LINUX_OPTIONS: Schema = &[
    (1, "user", T::Str),
    (2, "role", T::Str),
    (3, "type", T::Str),
    (4, "level", T::Str),
];

pub(super) const WINDOWS_OPTIONS: Schema = &[
    (1, "gmsaCredentialSpecName", T::Str),
    (2, "gmsaCredentialSpec", T::Str),
    (3, "runAsUserName", T::Str),
    (4, "hostProcess", T::Bool),
];

// SeccompProfile and AppArmorProfile have the same shape.
pub(super) const PROFILE: Schema = &[(1, "type", T::Str), (2, "localhostProfile", T::Str)];

const CAPABILITIES: Schema = &[(1, "add", T::RepStr), (2, "drop", T::RepStr)];

const ULIMIT: Schema = &[
    (1, "name", T::Str),
    (2, "hard", T::Int),
    (3, "soft", T::Int),
];

pub(super) const SECURITY_CONTEXT: Schema = &[
    (1, "capabilities", T::Msg(CAPABILITIES)),
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
    (13, "ulimits", T::RepMsg(ULIMIT)),
];

const CONTAINER_RESIZE_POLICY: Schema =
    &[(1, "resourceName", T::Str), (2, "restartPolicy", T::Str)];

const CONTAINER_RESTART_RULE_ON_EXIT_CODES: Schema =
    &[(1, "operator", T::Str), (2, "values", T::RepInt)];

const CONTAINER_RESTART_RULE: Schema = &[
    (1, "action", T::Str),
    (2, "exitCodes", T::Msg(CONTAINER_RESTART_RULE_ON_EXIT_CODES)),
];

const VOLUME_DEVICE: Schema = &[(1, "name", T::Str), (2, "devicePath", T::Str)];

const LIFECYCLE: Schema = &[
    (1, "postStart", T::Msg(LIFECYCLE_HANDLER)),
    (2, "preStop", T::Msg(LIFECYCLE_HANDLER)),
    (3, "stopSignal", T::Str),
];

pub(super) const CONTAINER: Schema = &[
    (1, "name", T::Str),
    (2, "image", T::Str),
    (3, "command", T::RepStr),
    (4, "args", T::RepStr),
    (5, "workingDir", T::Str),
    (6, "ports", T::RepMsg(CONTAINER_PORT)),
    (19, "envFrom", T::RepMsg(ENV_FROM_SOURCE)),
    (7, "env", T::RepMsg(ENV_VAR)),
    (8, "resources", T::Msg(RESOURCE_REQUIREMENTS)),
    (23, "resizePolicy", T::RepMsg(CONTAINER_RESIZE_POLICY)),
    (24, "restartPolicy", T::Str),
    (25, "restartPolicyRules", T::RepMsg(CONTAINER_RESTART_RULE)),
    (9, "volumeMounts", T::RepMsg(VOLUME_MOUNT)),
    (21, "volumeDevices", T::RepMsg(VOLUME_DEVICE)),
    (10, "livenessProbe", T::Msg(PROBE)),
    (11, "readinessProbe", T::Msg(PROBE)),
    (22, "startupProbe", T::Msg(PROBE)),
    (12, "lifecycle", T::Msg(LIFECYCLE)),
    (13, "terminationMessagePath", T::Str),
    (20, "terminationMessagePolicy", T::Str),
    (14, "imagePullPolicy", T::Str),
    (15, "securityContext", T::Msg(SECURITY_CONTEXT)),
    (16, "stdin", T::BoolOmitEmpty),
    (17, "stdinOnce", T::BoolOmitEmpty),
    (18, "tty", T::BoolOmitEmpty),
];

pub(super) const EPHEMERAL_CONTAINER: Schema = &[
    (1, "", T::Inline(CONTAINER)),
    (2, "targetContainerName", T::Str),
];

// ConfigMapProjection and SecretProjection have the same shape.
pub(super) const OBJECT_PROJECTION: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "items", T::RepMsg(KEY_TO_PATH)),
    (4, "optional", T::Bool),
];

pub(super) const DOWNWARD_API_FILE: Schema = &[
    (1, "path", T::Str),
    (2, "fieldRef", T::Msg(OBJECT_FIELD_SELECTOR)),
    (3, "resourceFieldRef", T::Msg(RESOURCE_FIELD_SELECTOR)),
    (4, "mode", T::Int),
];

const DOWNWARD_API_PROJECTION: Schema = &[(1, "items", T::RepMsg(DOWNWARD_API_FILE))];

const SERVICE_ACCOUNT_TOKEN_PROJECTION: Schema = &[
    (1, "audience", T::Str),
    (2, "expirationSeconds", T::Int),
    (3, "path", T::Str),
];

const CLUSTER_TRUST_BUNDLE_PROJECTION: Schema = &[
    (1, "name", T::Str),
    (2, "signerName", T::Str),
    (3, "labelSelector", T::Msg(LABEL_SELECTOR)),
    (5, "optional", T::Bool),
    (4, "path", T::Str),
];

const POD_CERTIFICATE_PROJECTION: Schema = &[
    (1, "signerName", T::Str),
    (2, "keyType", T::Str),
    (3, "maxExpirationSeconds", T::Int),
    (4, "credentialBundlePath", T::Str),
    (5, "keyPath", T::Str),
    (6, "certificateChainPath", T::Str),
    (7, "userAnnotations", T::MapStr),
];

pub(super) const VOLUME_PROJECTION: Schema = &[
    (1, "secret", T::Msg(OBJECT_PROJECTION)),
    (2, "downwardAPI", T::Msg(DOWNWARD_API_PROJECTION)),
    (3, "configMap", T::Msg(OBJECT_PROJECTION)),
    (
        4,
        "serviceAccountToken",
        T::Msg(SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ),
    (
        5,
        "clusterTrustBundle",
        T::Msg(CLUSTER_TRUST_BUNDLE_PROJECTION),
    ),
    (6, "podCertificate", T::Msg(POD_CERTIFICATE_PROJECTION)),
];

const VOLUME_RESOURCE_REQUIREMENTS: Schema = &[
    (1, "limits", T::MapQuantity),
    (2, "requests", T::MapQuantity),
];

const TYPED_LOCAL_OBJECT_REF: Schema = &[
    (1, "apiGroup", T::Str),
    (2, "kind", T::Str),
    (3, "name", T::Str),
];

const TYPED_OBJECT_REF: Schema = &[
    (1, "apiGroup", T::Str),
    (2, "kind", T::Str),
    (3, "name", T::Str),
    (4, "namespace", T::Str),
];

pub(super) const PVC_SPEC: Schema = &[
    (1, "accessModes", T::RepStr),
    (4, "selector", T::Msg(LABEL_SELECTOR)),
    (2, "resources", T::Msg(VOLUME_RESOURCE_REQUIREMENTS)),
    (3, "volumeName", T::Str),
    (5, "storageClassName", T::Str),
    (6, "volumeMode", T::Str),
    (7, "dataSource", T::Msg(TYPED_LOCAL_OBJECT_REF)),
    (8, "dataSourceRef", T::Msg(TYPED_OBJECT_REF)),
    (9, "volumeAttributesClassName", T::Str),
];

const HOST_PATH: Schema = &[(1, "path", T::Str), (2, "type", T::Str)];

const EMPTY_DIR: Schema = &[(1, "medium", T::Str), (2, "sizeLimit", T::Quantity)];

const GCE_PERSISTENT_DISK: Schema = &[
    (1, "pdName", T::Str),
    (2, "fsType", T::Str),
    (3, "partition", T::IntOmitEmpty),
    (4, "readOnly", T::BoolOmitEmpty),
];

const AWS_ELASTIC_BLOCK_STORE: Schema = &[
    (1, "volumeID", T::Str),
    (2, "fsType", T::Str),
    (3, "partition", T::IntOmitEmpty),
    (4, "readOnly", T::BoolOmitEmpty),
];

const GIT_REPO: Schema = &[
    (1, "repository", T::Str),
    (2, "revision", T::Str),
    (3, "directory", T::Str),
];

const SECRET_VOLUME: Schema = &[
    (1, "secretName", T::Str),
    (2, "items", T::RepMsg(KEY_TO_PATH)),
    (3, "defaultMode", T::Int),
    (4, "optional", T::Bool),
];

const NFS: Schema = &[
    (1, "server", T::Str),
    (2, "path", T::Str),
    (3, "readOnly", T::BoolOmitEmpty),
];

const ISCSI: Schema = &[
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
];

const PERSISTENT_VOLUME_CLAIM: Schema =
    &[(1, "claimName", T::Str), (2, "readOnly", T::BoolOmitEmpty)];

const FLEX_VOLUME: Schema = &[
    (1, "driver", T::Str),
    (2, "fsType", T::Str),
    (3, "secretRef", T::Msg(LOCAL_OBJECT_REF)),
    (4, "readOnly", T::BoolOmitEmpty),
    (5, "options", T::MapStr),
];

const CINDER: Schema = &[
    (1, "volumeID", T::Str),
    (2, "fsType", T::Str),
    (3, "readOnly", T::BoolOmitEmpty),
    (4, "secretRef", T::Msg(LOCAL_OBJECT_REF)),
];

const DOWNWARD_API_VOLUME: Schema = &[
    (1, "items", T::RepMsg(DOWNWARD_API_FILE)),
    (2, "defaultMode", T::Int),
];

const FC: Schema = &[
    (1, "targetWWNs", T::RepStr),
    (2, "lun", T::Int),
    (3, "fsType", T::Str),
    (4, "readOnly", T::BoolOmitEmpty),
    (5, "wwids", T::RepStr),
];

const AZURE_FILE: Schema = &[
    (1, "secretName", T::Str),
    (2, "shareName", T::Str),
    (3, "readOnly", T::BoolOmitEmpty),
];

const CONFIG_MAP_VOLUME: Schema = &[
    (1, "", T::Inline(LOCAL_OBJECT_REF)),
    (2, "items", T::RepMsg(KEY_TO_PATH)),
    (3, "defaultMode", T::Int),
    (4, "optional", T::Bool),
];

const VSPHERE_VOLUME: Schema = &[
    (1, "volumePath", T::Str),
    (2, "fsType", T::Str),
    (3, "storagePolicyName", T::Str),
    (4, "storagePolicyID", T::Str),
];

const AZURE_DISK: Schema = &[
    (1, "diskName", T::Str),
    (2, "diskURI", T::Str),
    (3, "cachingMode", T::Str),
    (4, "fsType", T::Str),
    (5, "readOnly", T::Bool),
    (6, "kind", T::Str),
];

const PROJECTED_VOLUME: Schema = &[
    (1, "sources", T::RepMsg(VOLUME_PROJECTION)),
    (2, "defaultMode", T::Int),
];

const PORTWORX_VOLUME: Schema = &[
    (1, "volumeID", T::Str),
    (2, "fsType", T::Str),
    (3, "readOnly", T::BoolOmitEmpty),
];

const CSI_VOLUME: Schema = &[
    (1, "driver", T::Str),
    (2, "readOnly", T::Bool),
    (3, "fsType", T::Str),
    (4, "volumeAttributes", T::MapStr),
    (5, "nodePublishSecretRef", T::Msg(LOCAL_OBJECT_REF)),
];

const VOLUME_CLAIM_TEMPLATE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(PVC_SPEC)),
];

const EPHEMERAL_VOLUME: Schema = &[(1, "volumeClaimTemplate", T::Msg(VOLUME_CLAIM_TEMPLATE))];

const IMAGE_VOLUME: Schema = &[(1, "reference", T::Str), (2, "pullPolicy", T::Str)];

// The in-tree plugins that Kubernetes no longer supports at all (glusterfs, rbd, cephfs,
// flocker, quobyte, photonPersistentDisk, scaleIO, storageos) are left out.
pub(super) const VOLUME_SOURCE: Schema = &[
    (1, "hostPath", T::Msg(HOST_PATH)),
    (2, "emptyDir", T::Msg(EMPTY_DIR)),
    (3, "gcePersistentDisk", T::Msg(GCE_PERSISTENT_DISK)),
    (4, "awsElasticBlockStore", T::Msg(AWS_ELASTIC_BLOCK_STORE)),
    (5, "gitRepo", T::Msg(GIT_REPO)),
    (6, "secret", T::Msg(SECRET_VOLUME)),
    (7, "nfs", T::Msg(NFS)),
    (8, "iscsi", T::Msg(ISCSI)),
    (10, "persistentVolumeClaim", T::Msg(PERSISTENT_VOLUME_CLAIM)),
    (12, "flexVolume", T::Msg(FLEX_VOLUME)),
    (13, "cinder", T::Msg(CINDER)),
    (16, "downwardAPI", T::Msg(DOWNWARD_API_VOLUME)),
    (17, "fc", T::Msg(FC)),
    (18, "azureFile", T::Msg(AZURE_FILE)),
    (19, "configMap", T::Msg(CONFIG_MAP_VOLUME)),
    (20, "vsphereVolume", T::Msg(VSPHERE_VOLUME)),
    (22, "azureDisk", T::Msg(AZURE_DISK)),
    (26, "projected", T::Msg(PROJECTED_VOLUME)),
    (24, "portworxVolume", T::Msg(PORTWORX_VOLUME)),
    (28, "csi", T::Msg(CSI_VOLUME)),
    (29, "ephemeral", T::Msg(EPHEMERAL_VOLUME)),
    (30, "image", T::Msg(IMAGE_VOLUME)),
];

pub(super) const VOLUME: Schema = &[(1, "name", T::Str), (2, "", T::Inline(VOLUME_SOURCE))];

pub(super) const NODE_SELECTOR_REQUIREMENT: Schema = &[
    (1, "key", T::Str),
    (2, "operator", T::Str),
    (3, "values", T::RepStr),
];

pub(super) const NODE_SELECTOR_TERM: Schema = &[
    (1, "matchExpressions", T::RepMsg(NODE_SELECTOR_REQUIREMENT)),
    (2, "matchFields", T::RepMsg(NODE_SELECTOR_REQUIREMENT)),
];

pub(super) const POD_AFFINITY_TERM: Schema = &[
    (1, "labelSelector", T::Msg(LABEL_SELECTOR)),
    (2, "namespaces", T::RepStr),
    (3, "topologyKey", T::Str),
    (4, "namespaceSelector", T::Msg(LABEL_SELECTOR)),
    (5, "matchLabelKeys", T::RepStr),
    (6, "mismatchLabelKeys", T::RepStr),
];

const WEIGHTED_POD_AFFINITY_TERM: Schema = &[
    (1, "weight", T::Int),
    (2, "podAffinityTerm", T::Msg(POD_AFFINITY_TERM)),
];

// PodAffinity and PodAntiAffinity have the same shape.
pub(super) const POD_AFFINITY: Schema = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        T::RepMsg(POD_AFFINITY_TERM),
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        T::RepMsg(WEIGHTED_POD_AFFINITY_TERM),
    ),
];

const NODE_SELECTOR: Schema = &[(1, "nodeSelectorTerms", T::RepMsg(NODE_SELECTOR_TERM))];

const PREFERRED_SCHEDULING_TERM: Schema = &[
    (1, "weight", T::Int),
    (2, "preference", T::Msg(NODE_SELECTOR_TERM)),
];

const NODE_AFFINITY: Schema = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        T::Msg(NODE_SELECTOR),
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        T::RepMsg(PREFERRED_SCHEDULING_TERM),
    ),
];

pub(super) const AFFINITY: Schema = &[
    (1, "nodeAffinity", T::Msg(NODE_AFFINITY)),
    (2, "podAffinity", T::Msg(POD_AFFINITY)),
    (3, "podAntiAffinity", T::Msg(POD_AFFINITY)),
];

const SYSCTL: Schema = &[(1, "name", T::Str), (2, "value", T::Str)];

pub(super) const POD_SECURITY_CONTEXT: Schema = &[
    (1, "seLinuxOptions", T::Msg(SE_LINUX_OPTIONS)),
    (8, "windowsOptions", T::Msg(WINDOWS_OPTIONS)),
    (2, "runAsUser", T::Int),
    (6, "runAsGroup", T::Int),
    (3, "runAsNonRoot", T::Bool),
    (4, "supplementalGroups", T::RepInt),
    (12, "supplementalGroupsPolicy", T::Str),
    (5, "fsGroup", T::Int),
    (7, "sysctls", T::RepMsg(SYSCTL)),
    (9, "fsGroupChangePolicy", T::Str),
    (10, "seccompProfile", T::Msg(PROFILE)),
    (11, "appArmorProfile", T::Msg(PROFILE)),
    (13, "seLinuxChangePolicy", T::Str),
];

pub(super) const TOLERATION: Schema = &[
    (1, "key", T::Str),
    (2, "operator", T::Str),
    (3, "value", T::Str),
    (4, "effect", T::Str),
    (5, "tolerationSeconds", T::Int),
];

pub(super) const TOPOLOGY_SPREAD_CONSTRAINT: Schema = &[
    (1, "maxSkew", T::Int),
    (2, "topologyKey", T::Str),
    (3, "whenUnsatisfiable", T::Str),
    (4, "labelSelector", T::Msg(LABEL_SELECTOR)),
    (5, "minDomains", T::Int),
    (6, "nodeAffinityPolicy", T::Str),
    (7, "nodeTaintsPolicy", T::Str),
    (8, "matchLabelKeys", T::RepStr),
];

const HOST_ALIAS: Schema = &[(1, "ip", T::Str), (2, "hostnames", T::RepStr)];

const POD_DNS_CONFIG_OPTION: Schema = &[(1, "name", T::Str), (2, "value", T::Str)];

const POD_DNS_CONFIG: Schema = &[
    (1, "nameservers", T::RepStr),
    (2, "searches", T::RepStr),
    (3, "options", T::RepMsg(POD_DNS_CONFIG_OPTION)),
];

const POD_READINESS_GATE: Schema = &[(1, "conditionType", T::Str)];

const POD_OS: Schema = &[(1, "name", T::Str)];

const POD_SCHEDULING_GATE: Schema = &[(1, "name", T::Str)];

const POD_RESOURCE_CLAIM: Schema = &[
    (1, "name", T::Str),
    (3, "resourceClaimName", T::Str),
    (4, "resourceClaimTemplateName", T::Str),
];

pub(super) const POD_SPEC: Schema = &[
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
    (23, "hostAliases", T::RepMsg(HOST_ALIAS)),
    (24, "priorityClassName", T::Str),
    (25, "priority", T::Int),
    (26, "dnsConfig", T::Msg(POD_DNS_CONFIG)),
    (28, "readinessGates", T::RepMsg(POD_READINESS_GATE)),
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
    (36, "os", T::Msg(POD_OS)),
    (37, "hostUsers", T::Bool),
    (38, "schedulingGates", T::RepMsg(POD_SCHEDULING_GATE)),
    (39, "resourceClaims", T::RepMsg(POD_RESOURCE_CLAIM)),
    (40, "resources", T::Msg(RESOURCE_REQUIREMENTS)),
    (41, "hostnameOverride", T::Str),
];

pub(super) const POD_TEMPLATE_SPEC: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(POD_SPEC)),
];
