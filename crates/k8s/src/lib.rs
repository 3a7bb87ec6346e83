//! throng's agents on Kubernetes: the manifests of an Indexed Job whose pods
//! each run one execution segment of the same plan, all starting at the same
//! wall-clock time, and the commands that collect and merge their results.
//!
//! ```text
//!  JobRequest (plan: scenario file + the files it names, or a command line;
//!              N agents, image, start time, resources)
//!      │ generate (I/O-free; the caller reads files and the clock)
//!      ▼
//!  Manifests { yaml: ConfigMap [+ Secret] + Job, collect: shell commands }
//!      │ kubectl apply -f -          pod i: JOB_COMPLETION_INDEX = i
//!      ▼                             → --segment i/N:(i+1)/N --start-at T
//!  pod logs ─ awk between markers ─► segment-i.json ─ throng merge ─► merged.json
//! ```
//!
//! The YAML is serialized from typed objects ([`objects`]), never from text
//! templates, so any plan text or argument is quoted correctly.

pub mod agents;
pub mod objects;
pub mod segments;
pub mod sizing;

use std::collections::BTreeMap;

use objects::*;
pub use sizing::{Load, PerOpen, Sizing, Work};

/// The agent script: picks the pod's segment, runs throng, prints the result.
pub const AGENT_SCRIPT: &str = include_str!("agent.sh");

/// Where the plan's ConfigMap is mounted in the pod.
pub const PLAN_DIR: &str = "/plan";
/// The image's user and group (docker/Dockerfile makes it).
pub const AGENT_UID: u32 = 10001;
/// Ephemeral ports an agent may use (a namespaced, "safe" sysctl): the
/// default 32768–60999 allows ~28K connections per destination address and
/// port, this ~64K.
pub const PORT_RANGE: &str = "1024 65535";
/// The marker lines around a result in a pod's log.
pub const RESULT_BEGIN: &str = "throng-result-begin";
/// See [`RESULT_BEGIN`].
pub const RESULT_END: &str = "throng-result-end";
/// What starts each line of the result between the markers (a line of
/// stderr may land there too: the log interleaves the two streams).
pub const RESULT_LINE: &str = "throng-result-line";

/// Why the manifests cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum K8sError {
    /// A name Kubernetes would refuse.
    #[error("{flag} '{value}': {why}")]
    Name {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What a valid one looks like.
        why: String,
    },
    /// `--parallelism` out of range.
    #[error("--parallelism {0}: give 1 to 10000 agents")]
    Parallelism(u32),
    /// `--agents` out of range (`throng k8s run`).
    #[error("--agents {0}: give 1 to 1000 agents")]
    Agents(u32),
    /// `--base-port` too low, or too high for that many agents.
    #[error("--base-port {base}: agent i listens on {base}+i; with {agents} agents give 1024 to {} (ports from 1024 up)", 65536u32.saturating_sub(*agents))]
    Ports {
        /// The first port.
        base: u16,
        /// Agents.
        agents: u32,
    },
    /// An argument with a line break (the agent reads one per line).
    #[error("the argument {0:?} has a line break; the agents read their command line one argument per line")]
    Argument(String),
    /// A value YAML 1.1 (Kubernetes' parser) would read as something else than a string.
    #[error(
        "{flag} '{value}': YAML 1.1, which Kubernetes reads manifests with, takes it for a boolean, number or time; choose another"
    )]
    Ambiguous {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
    },
    /// `--results-dir` not absolute or not plain.
    #[error("--results-dir '{0}': give an absolute path such as /results (not /plan, not /)")]
    ResultsDir(String),
    /// A file the scenario names cannot be shipped in the ConfigMap.
    #[error(
        "the scenario names '{0}': only files in the scenario's directory or below can be shipped with it \
         (a relative path without '..')"
    )]
    File(String),
}

/// The plan the agents run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `throng run` with this scenario file.
    Scenario {
        /// The scenario file's text (mounted as `/plan/scenario.yaml`).
        text: String,
        /// Files it names (data file, TLS files), relative to it.
        files: Vec<PlanFile>,
        /// More `throng run` flags (`--env NAME=VALUE`, `--scale F`, ...).
        extra_args: Vec<String>,
    },
    /// A command line: `http URL ...` or `storm TARGET ...`.
    Command(Vec<String>),
}

/// A file shipped with the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFile {
    /// Path relative to the scenario file, as the scenario names it.
    pub path: String,
    /// Its contents.
    pub contents: String,
    /// A private key: shipped in a Secret, not the ConfigMap.
    pub secret: bool,
}

/// Everything the manifests depend on (the caller reads files and the clock).
#[derive(Clone, Debug, PartialEq)]
pub struct JobRequest {
    /// Job, ConfigMap and Secret name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Container image with throng as `throng` on the PATH.
    pub image: String,
    /// Agents (pods), each one segment.
    pub parallelism: u32,
    /// Where each pod writes `segment-I.json`.
    pub results_dir: String,
    /// A PersistentVolumeClaim for the results instead of an emptyDir.
    pub results_pvc: Option<String>,
    /// The shared start, seconds since the Unix epoch (UTC).
    pub start_at_unix: i64,
    /// The plan.
    pub plan: Plan,
    /// The command line carries a secret (a secret header's value, a URL
    /// with a password, `--env` values): the `args` file goes in the
    /// Secret, not the ConfigMap.
    pub secret_args: bool,
    /// The scenario file carries a secret header's value: it goes in the
    /// Secret, not the ConfigMap.
    pub secret_scenario: bool,
    /// Resources per agent.
    pub sizing: Sizing,
}

/// What [`generate`] makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifests {
    /// ConfigMap [, Secret], Job: YAML documents separated by `---`.
    pub yaml: String,
    /// Shell commands (with comments) that wait, collect and merge.
    pub collect: String,
    /// `--start-at` as the pods get it (RFC 3339, UTC).
    pub start_at: String,
}

/// Makes the manifests and the collect commands.
pub fn generate(req: &JobRequest) -> Result<Manifests, K8sError> {
    let dir = checked_results_dir(req)?;
    let start_at = rfc3339(req.start_at_unix);
    let labels: Labels = [
        ("app.kubernetes.io/name", "throng"),
        ("app.kubernetes.io/instance", req.name.as_str()),
        ("app.kubernetes.io/component", "agent"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let meta = |name: &str| ObjectMeta {
        name: name.to_string(),
        namespace: req.namespace.clone(),
        labels: labels.clone(),
        annotations: Labels::new(),
    };

    let files = plan_files(req, &start_at)?;
    let (mut docs, sources) = plan_documents(req, files, &meta);
    let job = job(req, dir, &labels, &meta, sources);
    docs.push(to_yaml(&job));
    Ok(Manifests {
        yaml: docs.join("---\n"),
        collect: collect_commands(req, &start_at),
        start_at,
    })
}

/// Refuses names, an image, a parallelism or a results directory that the
/// manifests cannot carry; the results directory without a trailing slash.
fn checked_results_dir(req: &JobRequest) -> Result<&str, K8sError> {
    check_name("--name", &req.name, 52)?;
    check_name("--namespace", &req.namespace, 63)?;
    if let Some(pvc) = &req.results_pvc {
        check_name("--results-pvc", pvc, 253)?;
    }
    if yaml11_ambiguous(&req.image) {
        return Err(K8sError::Ambiguous {
            flag: "--image",
            value: req.image.clone(),
        });
    }
    if !(1..=10_000).contains(&req.parallelism) {
        return Err(K8sError::Parallelism(req.parallelism));
    }
    let dir = req.results_dir.trim_end_matches('/');
    if !dir.starts_with('/') || dir.is_empty() || dir == PLAN_DIR || dir.starts_with("/plan/") || dir.contains("..") {
        return Err(K8sError::ResultsDir(req.results_dir.clone()));
    }
    Ok(dir)
}

/// The plan's files: the script, the segments, the scenario and what it
/// names, as (key, path, contents, secret).
fn plan_files(req: &JobRequest, start_at: &str) -> Result<Vec<(String, String, String, bool)>, K8sError> {
    let n = req.parallelism;
    let args_file = |args: &[String]| -> Result<String, K8sError> {
        if let Some(bad) = args.iter().find(|a| a.contains('\n')) {
            return Err(K8sError::Argument(bad.clone()));
        }
        Ok(args.iter().map(|a| format!("{a}\n")).collect())
    };
    let mut files: Vec<(String, String, String, bool)> = Vec::new();
    let mut plan_file = |k: &str, contents: String, secret: bool| {
        files.push((k.to_string(), k.to_string(), contents, secret));
    };
    plan_file("entrypoint.sh", AGENT_SCRIPT.to_string(), false);
    match &req.plan {
        Plan::Command(args) => plan_file("args", args_file(args)?, req.secret_args),
        Plan::Scenario { extra_args, .. } => {
            let mut a = vec!["run".to_string(), format!("{PLAN_DIR}/scenario.yaml")];
            a.extend(extra_args.iter().cloned());
            plan_file("args", args_file(&a)?, req.secret_args);
        }
    }
    plan_file("segments", segments::segments(n).join("\n") + "\n", false);
    plan_file("segment-sequence", segments::sequence(n) + "\n", false);
    plan_file("start-at", format!("{start_at}\n"), false);
    if let Plan::Scenario { text, files: named, .. } = &req.plan {
        files.push((
            "scenario.yaml".into(),
            "scenario.yaml".into(),
            text.clone(),
            req.secret_scenario,
        ));
        for f in named {
            let path = f.path.trim_start_matches("./");
            if path.is_empty() || path.starts_with('/') || path.split('/').any(|p| p == "..") {
                return Err(K8sError::File(f.path.clone()));
            }
            files.push((file_key(path), path.to_string(), f.contents.clone(), f.secret));
        }
    }
    Ok(files)
}

/// The ConfigMap (and the Secret, when a file holds one) and the projected
/// volume's sources that put their files in the pods' plan directory.
fn plan_documents(
    req: &JobRequest,
    files: Vec<(String, String, String, bool)>,
    meta: &dyn Fn(&str) -> ObjectMeta,
) -> (Vec<String>, Vec<ProjectionSource>) {
    // A file that holds a secret goes in the Secret: the pods read it from
    // the same directory either way.
    let mut data = BTreeMap::new();
    let mut secret_data = BTreeMap::new();
    let mut items = Vec::new();
    let mut secret_items = Vec::new();
    for (k, path, contents, secret) in files {
        if data.contains_key(&k) || secret_data.contains_key(&k) {
            continue; // named twice (or the same sanitized name): shipped once
        }
        if secret {
            secret_data.insert(k.clone(), contents);
            secret_items.push(KeyToPath {
                key: k,
                path,
                mode: Some(0o440),
            });
        } else {
            data.insert(k.clone(), contents);
            items.push(key(&k, &path));
        }
    }

    let mut docs = Vec::new();
    docs.push(to_yaml(&ConfigMap {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: meta(&req.name),
        data,
    }));
    let mut sources = vec![ProjectionSource {
        config_map: Some(KeysFrom {
            name: req.name.clone(),
            items,
        }),
        secret: None,
    }];
    if !secret_data.is_empty() {
        docs.push(to_yaml(&Secret {
            api_version: "v1",
            kind: "Secret",
            metadata: meta(&format!("{}-keys", req.name)),
            type_: "Opaque",
            string_data: secret_data,
        }));
        sources.push(ProjectionSource {
            config_map: None,
            secret: Some(KeysFrom {
                name: format!("{}-keys", req.name),
                items: secret_items,
            }),
        });
    }
    (docs, sources)
}

/// The Indexed Job: one pod per segment, spread over nodes, locked down.
fn job(
    req: &JobRequest,
    dir: &str,
    labels: &Labels,
    meta: &dyn Fn(&str) -> ObjectMeta,
    sources: Vec<ProjectionSource>,
) -> Job {
    let n = req.parallelism;
    let resources: Labels = [("cpu", &req.sizing.cpu), ("memory", &req.sizing.memory)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut job_meta = meta(&req.name);
    job_meta
        .annotations
        .insert("throng.dev/sizing".to_string(), req.sizing.why.join("; "));
    let results_volume = Volume {
        name: "results".to_string(),
        projected: None,
        empty_dir: req.results_pvc.is_none().then_some(EmptyDir {}),
        persistent_volume_claim: req.results_pvc.as_ref().map(|c| ClaimRef { claim_name: c.clone() }),
    };
    Job {
        api_version: "batch/v1",
        kind: "Job",
        metadata: job_meta,
        spec: JobSpec {
            completion_mode: "Indexed",
            completions: n,
            parallelism: n,
            backoff_limit: 0,
            template: PodTemplate {
                metadata: PodMeta { labels: labels.clone() },
                spec: PodSpec {
                    restart_policy: "Never",
                    host_network: false,
                    security_context: PodSecurityContext {
                        run_as_non_root: true,
                        run_as_user: AGENT_UID,
                        run_as_group: AGENT_UID,
                        fs_group: AGENT_UID,
                        sysctls: vec![NameValue {
                            name: "net.ipv4.ip_local_port_range".to_string(),
                            value: PORT_RANGE.to_string(),
                        }],
                    },
                    topology_spread_constraints: vec![TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: "kubernetes.io/hostname",
                        when_unsatisfiable: "ScheduleAnyway",
                        label_selector: LabelSelector {
                            match_labels: labels.clone(),
                        },
                    }],
                    containers: vec![Container {
                        name: "throng".to_string(),
                        image: req.image.clone(),
                        image_pull_policy: "IfNotPresent",
                        command: vec!["/bin/sh".to_string(), format!("{PLAN_DIR}/entrypoint.sh")],
                        env: vec![EnvVar::value("THRONG_RESULTS_DIR", dir)],
                        resources: Some(ResourceRequirements {
                            requests: resources.clone(),
                            limits: resources,
                        }),
                        security_context: ContainerSecurityContext {
                            allow_privilege_escalation: false,
                            read_only_root_filesystem: true,
                            capabilities: Capabilities {
                                drop: vec!["ALL".to_string()],
                            },
                        },
                        volume_mounts: vec![
                            VolumeMount {
                                name: "plan".to_string(),
                                mount_path: PLAN_DIR.to_string(),
                                read_only: true,
                            },
                            VolumeMount {
                                name: "results".to_string(),
                                mount_path: dir.to_string(),
                                read_only: false,
                            },
                            VolumeMount {
                                name: "tmp".to_string(),
                                mount_path: "/tmp".to_string(),
                                read_only: false,
                            },
                        ],
                    }],
                    volumes: vec![
                        Volume {
                            name: "plan".to_string(),
                            projected: Some(ProjectedVolume {
                                default_mode: 0o444,
                                sources,
                            }),
                            empty_dir: None,
                            persistent_volume_claim: None,
                        },
                        results_volume,
                        Volume {
                            name: "tmp".to_string(),
                            projected: None,
                            empty_dir: Some(EmptyDir {}),
                            persistent_volume_claim: None,
                        },
                    ],
                },
            },
        },
    }
}

/// The shell commands that wait for the job, pull each segment's result out
/// of its pod's log, and merge them.
fn collect_commands(req: &JobRequest, start_at: &str) -> String {
    let (ns, name) = (&req.namespace, &req.name);
    let out = format!("{name}-results");
    let files: Vec<String> = (0..req.parallelism)
        .map(|i| format!("{out}/segment-{i}.json"))
        .collect();
    let awk = format!(
        "$1 == \"{RESULT_BEGIN}\" {{ f = dir \"/\" $2; next }} $1 == \"{RESULT_END}\" {{ close(f); f = \"\"; next }} \
         f != \"\" && $1 == \"{RESULT_LINE}\" {{ sub(/^{RESULT_LINE} /, \"\"); print > f }}"
    );
    let mut s = String::new();
    s.push_str(&format!(
        "# the agents start together at {start_at}; wait for all of them (a failed segment fails the job)\n"
    ));
    s.push_str(&format!(
        "kubectl -n {ns} wait --for=condition=complete --timeout=24h job/{name}\n"
    ));
    s.push_str("# each pod printed its result between marker lines in its log\n");
    s.push_str(&format!("mkdir -p {out}\n"));
    s.push_str(&format!(
        "for pod in $(kubectl -n {ns} get pods -l job-name={name} -o name); do \
         kubectl -n {ns} logs \"$pod\" | awk -v dir={out} '{awk}'; done\n"
    ));
    if let Some(pvc) = &req.results_pvc {
        s.push_str(&format!(
            "# the same files are also kept on the claim {pvc}, under {}\n",
            req.results_dir
        ));
    }
    s.push_str("# exact merge: histograms add, so the merged p99 is the p99 of every sample\n");
    s.push_str(&format!("throng merge {} -o {name}-merged.json\n", files.join(" ")));
    s.push_str(&format!("throng report {name}-merged.json\n"));
    let secret = if has_secret(req) {
        format!(" secret/{name}-keys")
    } else {
        String::new()
    };
    s.push_str(&format!(
        "# then remove the job and its pods\nkubectl -n {ns} delete job/{name} configmap/{name}{secret}\n"
    ));
    s
}

/// True when the manifests include a Secret.
fn has_secret(req: &JobRequest) -> bool {
    req.secret_args
        || req.secret_scenario
        || matches!(&req.plan, Plan::Scenario { files, .. } if files.iter().any(|f| f.secret))
}

fn key(k: &str, path: &str) -> KeyToPath {
    KeyToPath {
        key: k.to_string(),
        path: path.to_string(),
        mode: None,
    }
}

/// A ConfigMap key for a relative path (keys allow `[-._a-zA-Z0-9]`).
fn file_key(path: &str) -> String {
    let k: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("file.{k}")
}

/// True when a YAML 1.1 reader (Kubernetes' sigs.k8s.io/yaml, PyYAML)
/// would resolve `s`, written plain, to something else than a string:
/// booleans such as `yes` and `on`, null, sexagesimal or underscored
/// numbers, timestamps. serde_yaml_ng quotes what YAML 1.2 would misread
/// (`true`, `null`, `0x1F`, digits) but writes these plain.
pub fn yaml11_ambiguous(s: &str) -> bool {
    const WORDS: [&str; 14] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "", "=", "<<", ".inf",
    ];
    let lower = s.to_ascii_lowercase();
    if WORDS.contains(&lower.as_str()) {
        return true;
    }
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let numeric = !body.is_empty()
        && body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && body.chars().all(|c| c.is_ascii_digit() || "_:.eE+-".contains(c));
    let b = s.as_bytes();
    let date = b.len() >= 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit();
    numeric || date
}

/// A DNS-1123 label of at most `max` characters.
pub(crate) fn check_name(flag: &'static str, value: &str, max: usize) -> Result<(), K8sError> {
    if yaml11_ambiguous(value) {
        return Err(K8sError::Ambiguous {
            flag,
            value: value.to_string(),
        });
    }
    let ok = !value.is_empty()
        && value.len() <= max
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(K8sError::Name {
            flag,
            value: value.to_string(),
            why: format!(
                "use lowercase letters, digits and '-', at most {max} characters, starting and ending with a letter or digit"
            ),
        })
    }
}

/// Seconds since the epoch as RFC 3339 in UTC (`2026-01-02T03:04:05Z`).
pub fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| unix.to_string())
}

pub(crate) fn to_yaml<T: serde::Serialize>(v: &T) -> String {
    // Serializing these plain structs (strings, numbers, maps with string
    // keys) cannot fail.
    serde_yaml_ng::to_string(v).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_225_600), "2026-01-01T00:00:00Z");
    }

    #[test]
    fn yaml11_hazards_are_found() {
        for s in [
            "yes",
            "No",
            "ON",
            "y",
            "1:20",
            "1_000",
            "2026-01-01T00:01:00Z",
            "2026-01-01",
            "~",
            "",
        ] {
            assert!(yaml11_ambiguous(s), "{s}");
        }
        for s in [
            "throng",
            "throng:0.1.0",
            "registry.example/throng:1",
            "5m",
            "http://svc:8080/",
            "0:1/4",
        ] {
            assert!(!yaml11_ambiguous(s), "{s}");
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("--name", "throng-1", 52).is_ok());
        for bad in ["", "Throng", "-a", "a-", "a_b", &"a".repeat(53)] {
            assert!(check_name("--name", bad, 52).is_err(), "{bad}");
        }
    }
}
