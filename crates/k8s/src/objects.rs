//! The few Kubernetes object kinds throng writes, typed as far as it uses
//! them. Field names and order follow the Kubernetes API reference, so the
//! YAML reads like a hand-written manifest.

use std::collections::BTreeMap;

use serde::Serialize;

/// Labels and annotations.
pub type Labels = BTreeMap<String, String>;

/// `metadata`.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectMeta {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Labels,
}

/// A `v1` ConfigMap.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    /// `v1`.
    pub api_version: &'static str,
    /// `ConfigMap`.
    pub kind: &'static str,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Files by key.
    pub data: BTreeMap<String, String>,
}

/// A `v1` Secret, written as `stringData`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// `v1`.
    pub api_version: &'static str,
    /// `Secret`.
    pub kind: &'static str,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// `Opaque`.
    #[serde(rename = "type")]
    pub type_: &'static str,
    /// Files by key.
    pub string_data: BTreeMap<String, String>,
}

/// A `batch/v1` Job.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// `batch/v1`.
    pub api_version: &'static str,
    /// `Job`.
    pub kind: &'static str,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: JobSpec,
}

/// `Job.spec`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// `Indexed`: each pod gets `JOB_COMPLETION_INDEX`.
    pub completion_mode: &'static str,
    /// Pods that must succeed.
    pub completions: u32,
    /// Pods at once.
    pub parallelism: u32,
    /// Retries (0: a segment re-run late would not follow the shared schedule).
    pub backoff_limit: u32,
    /// The pods.
    pub template: PodTemplate,
}

/// `Job.spec.template`.
#[derive(Clone, Debug, Serialize)]
pub struct PodTemplate {
    /// Labels of the pods.
    pub metadata: PodMeta,
    /// Spec.
    pub spec: PodSpec,
}

/// A pod template's metadata.
#[derive(Clone, Debug, Serialize)]
pub struct PodMeta {
    /// Labels.
    pub labels: Labels,
}

/// `PodSpec`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `Never`.
    pub restart_policy: &'static str,
    /// The node's network namespace (`throng k8s run`: the agents listen on
    /// the node's address, one port each).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_network: bool,
    /// Pod security context.
    pub security_context: PodSecurityContext,
    /// Spread the agents over nodes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// The agent.
    pub containers: Vec<Container>,
    /// Volumes.
    pub volumes: Vec<Volume>,
}

/// `PodSecurityContext`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    /// true.
    pub run_as_non_root: bool,
    /// The image's user.
    pub run_as_user: u32,
    /// Its group.
    pub run_as_group: u32,
    /// Group owning the volumes (results are writable).
    pub fs_group: u32,
    /// Namespaced sysctls (none with the host's network).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sysctls: Vec<NameValue>,
}

/// `name` and `value` (sysctls, environment variables).
#[derive(Clone, Debug, Serialize)]
pub struct NameValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// `EnvVar`: a value, or a field of the pod.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Its value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the value comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

impl EnvVar {
    /// `name: value`.
    pub fn value(name: &str, value: &str) -> Self {
        Self {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        }
    }

    /// The pod's field at `path` (`status.podIP`).
    pub fn field(name: &str, path: &str) -> Self {
        Self {
            name: name.to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: FieldRef {
                    field_path: path.to_string(),
                },
            }),
        }
    }
}

/// `EnvVarSource`: the kind throng uses.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    /// A field of the pod.
    pub field_ref: FieldRef,
}

/// `ObjectFieldSelector`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldRef {
    /// The field (`status.podIP`).
    pub field_path: String,
}

/// `TopologySpreadConstraint`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpreadConstraint {
    /// Largest difference in agents between two nodes.
    pub max_skew: u32,
    /// `kubernetes.io/hostname`.
    pub topology_key: &'static str,
    /// `ScheduleAnyway`: a preference, not a requirement.
    pub when_unsatisfiable: &'static str,
    /// Which pods count.
    pub label_selector: LabelSelector,
}

/// `LabelSelector`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels to match.
    pub match_labels: Labels,
}

/// `Container`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// Name.
    pub name: String,
    /// Image.
    pub image: String,
    /// `IfNotPresent`.
    pub image_pull_policy: &'static str,
    /// The agent script.
    pub command: Vec<String>,
    /// Environment.
    pub env: Vec<EnvVar>,
    /// Requests and limits (none: what the node gives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Container security context.
    pub security_context: ContainerSecurityContext,
    /// Mounts.
    pub volume_mounts: Vec<VolumeMount>,
}

/// `ResourceRequirements`.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceRequirements {
    /// Requests.
    pub requests: Labels,
    /// Limits.
    pub limits: Labels,
}

/// `SecurityContext` of a container.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSecurityContext {
    /// false.
    pub allow_privilege_escalation: bool,
    /// true.
    pub read_only_root_filesystem: bool,
    /// Dropped capabilities.
    pub capabilities: Capabilities,
}

/// `Capabilities`.
#[derive(Clone, Debug, Serialize)]
pub struct Capabilities {
    /// `ALL`.
    pub drop: Vec<String>,
}

/// `VolumeMount`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    /// Volume name.
    pub name: String,
    /// Where.
    pub mount_path: String,
    /// Read only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// `Volume`: the kinds throng uses.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Name.
    pub name: String,
    /// The plan: ConfigMap (and Secret) files in one directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected: Option<ProjectedVolume>,
    /// Scratch space that lives as long as the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDir>,
    /// A claim (results kept after the pods).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimRef>,
}

/// `emptyDir: {}`.
#[derive(Clone, Debug, Serialize)]
pub struct EmptyDir {}

/// `persistentVolumeClaim`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    /// The claim's name.
    pub claim_name: String,
}

/// `projected`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedVolume {
    /// File mode.
    pub default_mode: u32,
    /// Sources.
    pub sources: Vec<ProjectionSource>,
}

/// One source of a projected volume.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectionSource {
    /// A ConfigMap's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeysFrom>,
    /// A Secret's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeysFrom>,
}

/// Keys of a ConfigMap or Secret, each to a path.
#[derive(Clone, Debug, Serialize)]
pub struct KeysFrom {
    /// The object's name.
    pub name: String,
    /// Key to path.
    pub items: Vec<KeyToPath>,
}

/// `KeyToPath`.
#[derive(Clone, Debug, Serialize)]
pub struct KeyToPath {
    /// Key.
    pub key: String,
    /// Relative path in the volume.
    pub path: String,
    /// File mode (secrets: owner and group only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}
