//! `throng k8s run`: a Secret with the coordinator's token and the agents'
//! TLS certificate and key, and an Indexed Job whose pods each run `throng
//! agent` on their node's network, pod `i` on port `base + i` (so that
//! several agents can share a node), serving one run each over TLS. The
//! coordinator finds them by their pods' addresses and drives them as
//! `throng coordinate` does, verifying their certificate for
//! [`SERVER_NAME`] (they are reached by IP address); afterwards it deletes
//! what [`Agents::created`] lists.
//!
//! ```text
//!  AgentsRequest ─ agents (I/O-free) ─► Secret NAME-token + Job NAME (JSON)
//!                                       pod i: throng agent --listen $POD_IP:(base+i)
//!                                              --token-file /token/token --runs 1
//!                                              --tls-cert /token/tls.crt --tls-key /token/tls.key
//!                                              --client-ca /token/ca.crt
//!                 └─ Agents::yaml: the same, the token and the key redacted (to show)
//! ```

use std::collections::BTreeMap;

use crate::objects::*;
use crate::{AGENT_UID, K8sError, check_name, yaml11_ambiguous};

/// Where the token's Secret is mounted in the pod.
pub const TOKEN_DIR: &str = "/token";
/// Most agents one run drives (as many as `throng coordinate` takes).
pub const MAX_AGENTS: u32 = 1000;
/// The name the agents' certificate is made for and verified as: the
/// coordinator connects to pod IPs, which change with every run.
pub const SERVER_NAME: &str = "throng-agent";
/// What the shown manifests hold instead of a secret value.
pub const REDACTED: &str = "<redacted: made for the run, never shown>";

/// Lowest port an agent may listen on: the agents run as a user without
/// capabilities, which cannot bind below 1024.
pub const MIN_PORT: u16 = 1024;

/// What the agents' objects depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentsRequest {
    /// Job and Secret name (the Secret gets `-token` after it).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Container image with throng as `throng` on the PATH.
    pub image: String,
    /// Agents (pods).
    pub agents: u32,
    /// Pod `i` listens on `base_port + i`.
    pub base_port: u16,
    /// The shared token the coordinator presents.
    pub token: String,
    /// The agents' TLS.
    pub tls: AgentsTls,
}

/// The agents' TLS, PEM texts made for the run: they serve `cert` (for
/// [`SERVER_NAME`]) with `key`, and serve only a coordinator whose
/// certificate `client_ca` issued.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentsTls {
    /// The agents' certificate chain.
    pub cert: String,
    /// Its private key: in the Secret only.
    pub key: String,
    /// The CA of the coordinator's client certificate.
    pub client_ca: String,
}

impl std::fmt::Debug for AgentsTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentsTls")
            .field("cert", &self.cert)
            .field("key", &REDACTED)
            .field("client_ca", &self.client_ca)
            .finish()
    }
}

/// One object made, to delete afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    /// `job` or `secret` (as `kubectl delete` takes it).
    pub kind: &'static str,
    /// Its name.
    pub name: String,
}

/// What [`agents`] makes.
#[derive(Clone, Debug)]
pub struct Agents {
    /// A `v1` List of the Secret and the Job, as JSON (`kubectl apply -f -`).
    pub json: String,
    /// The same Secret and Job as YAML to show (`--dry-run`): the token
    /// and the key [`REDACTED`], the certificates as they are.
    pub yaml: String,
    /// What to delete afterwards, in that order: the Job (and with it its
    /// pods) first, so that no agent outlives its token.
    pub created: Vec<Created>,
    /// The pods' label selector (`job-name=NAME`).
    pub selector: String,
}

/// The port pod `index` listens on.
pub fn port(base: u16, index: u32) -> Option<u16> {
    u16::try_from(u32::from(base).checked_add(index)?).ok()
}

/// `HOST:PORT` for a pod's address (an IPv6 one in brackets).
pub fn address(pod_ip: &str, port: u16) -> String {
    if pod_ip.contains(':') {
        format!("[{pod_ip}]:{port}")
    } else {
        format!("{pod_ip}:{port}")
    }
}

/// The agents' shell command: its listen address from the pod's IP and
/// its index.
const AGENT_COMMAND: &str = r#"ip="$THRONG_POD_IP"; case "$ip" in *:*) ip="[$ip]" ;; esac
exec throng agent --listen "$ip:$((THRONG_BASE_PORT + JOB_COMPLETION_INDEX))" --token-file /token/token --runs 1 \
    --tls-cert /token/tls.crt --tls-key /token/tls.key --client-ca /token/ca.crt"#;

/// The Secret's keys: each a file in [`TOKEN_DIR`]; the secret ones are
/// redacted in [`Agents::yaml`].
const SECRET_KEYS: [(&str, bool); 4] = [
    ("token", true),
    ("tls.crt", false),
    ("tls.key", true),
    ("ca.crt", false),
];

/// Makes the Secret and the Job.
pub fn agents(req: &AgentsRequest) -> Result<Agents, K8sError> {
    check_name("--name", &req.name, 52)?;
    check_name("--namespace", &req.namespace, 63)?;
    if yaml11_ambiguous(&req.image) || req.image.is_empty() || req.image.contains(char::is_whitespace) {
        return Err(K8sError::Ambiguous {
            flag: "--image",
            value: req.image.clone(),
        });
    }
    if !(1..=MAX_AGENTS).contains(&req.agents) {
        return Err(K8sError::Agents(req.agents));
    }
    if req.base_port < MIN_PORT || port(req.base_port, req.agents - 1).is_none() {
        return Err(K8sError::Ports {
            base: req.base_port,
            agents: req.agents,
        });
    }
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
    let secret_name = format!("{}-token", req.name);
    let secret = Secret {
        api_version: "v1",
        kind: "Secret",
        metadata: meta(&secret_name),
        type_: "Opaque",
        string_data: BTreeMap::from([
            ("token".to_string(), format!("{}\n", req.token)),
            ("tls.crt".to_string(), req.tls.cert.clone()),
            ("tls.key".to_string(), req.tls.key.clone()),
            ("ca.crt".to_string(), req.tls.client_ca.clone()),
        ]),
    };
    let mut shown = secret.clone();
    for (key, secret) in SECRET_KEYS {
        if let (true, Some(v)) = (secret, shown.string_data.get_mut(key)) {
            *v = REDACTED.to_string();
        }
    }
    let job = Job {
        api_version: "batch/v1",
        kind: "Job",
        metadata: meta(&req.name),
        spec: JobSpec {
            completion_mode: "Indexed",
            completions: req.agents,
            parallelism: req.agents,
            // A pod that fails is a missing segment, not a retry.
            backoff_limit: 0,
            template: PodTemplate {
                metadata: PodMeta { labels: labels.clone() },
                spec: pod_spec(req, &secret_name),
            },
        },
    };
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [secret, job],
    });
    let yaml = format!("{}---\n{}", crate::to_yaml(&shown), crate::to_yaml(&job));
    Ok(Agents {
        json: list.to_string(),
        yaml,
        created: vec![
            Created {
                kind: "job",
                name: req.name.clone(),
            },
            Created {
                kind: "secret",
                name: secret_name,
            },
        ],
        selector: format!("job-name={}", req.name),
    })
}

fn pod_spec(req: &AgentsRequest, secret_name: &str) -> PodSpec {
    PodSpec {
        restart_policy: "Never",
        host_network: true,
        security_context: PodSecurityContext {
            run_as_non_root: true,
            run_as_user: AGENT_UID,
            run_as_group: AGENT_UID,
            fs_group: AGENT_UID,
            // Network sysctls cannot be set on the host's network.
            sysctls: Vec::new(),
        },
        topology_spread_constraints: Vec::new(),
        containers: vec![Container {
            name: "throng".to_string(),
            image: req.image.clone(),
            image_pull_policy: "IfNotPresent",
            command: vec!["/bin/sh".to_string(), "-c".to_string(), AGENT_COMMAND.to_string()],
            env: vec![
                EnvVar::field("THRONG_POD_IP", "status.podIP"),
                EnvVar::value("THRONG_BASE_PORT", &req.base_port.to_string()),
            ],
            resources: None,
            security_context: ContainerSecurityContext {
                allow_privilege_escalation: false,
                read_only_root_filesystem: true,
                capabilities: Capabilities {
                    drop: vec!["ALL".to_string()],
                },
            },
            volume_mounts: vec![
                VolumeMount {
                    name: "token".to_string(),
                    mount_path: TOKEN_DIR.to_string(),
                    read_only: true,
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
                name: "token".to_string(),
                projected: Some(ProjectedVolume {
                    default_mode: 0o440,
                    sources: vec![ProjectionSource {
                        config_map: None,
                        secret: Some(KeysFrom {
                            name: secret_name.to_string(),
                            items: SECRET_KEYS
                                .iter()
                                .map(|(key, _)| KeyToPath {
                                    key: key.to_string(),
                                    path: key.to_string(),
                                    mode: Some(0o440),
                                })
                                .collect(),
                        }),
                    }],
                }),
                empty_dir: None,
                persistent_volume_claim: None,
            },
            Volume {
                name: "tmp".to_string(),
                projected: None,
                empty_dir: Some(EmptyDir {}),
                persistent_volume_claim: None,
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> AgentsRequest {
        AgentsRequest {
            name: "throng-run-1".into(),
            namespace: "load".into(),
            image: "throng:0.1.0".into(),
            agents: 4,
            base_port: 7700,
            token: "s3cret".into(),
            tls: AgentsTls {
                cert: "CERT-PEM".into(),
                key: "KEY-PEM".into(),
                client_ca: "CA-PEM".into(),
            },
        }
    }

    fn parsed(a: &Agents) -> serde_json::Value {
        serde_json::from_str(&a.json).expect("the manifests are JSON")
    }

    #[test]
    fn the_job_runs_one_agent_per_index_on_the_host_network() {
        let a = agents(&req()).expect("valid");
        let v = parsed(&a);
        let items = v["items"].as_array().expect("a list");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["kind"], "Secret");
        assert_eq!(items[0]["metadata"]["name"], "throng-run-1-token");
        assert_eq!(items[0]["metadata"]["namespace"], "load");
        assert_eq!(items[0]["stringData"]["token"], "s3cret\n");
        let job = &items[1];
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["apiVersion"], "batch/v1");
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"], 4);
        assert_eq!(spec["parallelism"], 4);
        assert_eq!(spec["backoffLimit"], 0);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["restartPolicy"], "Never");
        // No network sysctls and no spread constraint on the host's network.
        assert!(pod["securityContext"].get("sysctls").is_none());
        assert!(pod.get("topologySpreadConstraints").is_none());
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "throng:0.1.0");
        let script = c["command"][2].as_str().expect("a script");
        assert!(script.contains("throng agent --listen"), "{script}");
        assert!(script.contains("--runs 1"), "{script}");
        assert!(
            script.contains("$((THRONG_BASE_PORT + JOB_COMPLETION_INDEX))"),
            "{script}"
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
        assert_eq!(c["env"][1]["value"], "7700");
        assert!(c.get("resources").is_none());
        assert_eq!(
            pod["volumes"][0]["projected"]["sources"][0]["secret"]["name"],
            "throng-run-1-token"
        );
        // The token and the key are in the Secret only, never in the Job.
        assert!(!job.to_string().contains("s3cret"));
        assert!(!job.to_string().contains("KEY-PEM"));
        assert_eq!(a.selector, "job-name=throng-run-1");
    }

    #[test]
    fn the_agents_serve_tls_with_the_secret_s_certificate_and_key() {
        let a = agents(&req()).expect("valid");
        let v = parsed(&a);
        let data = &v["items"][0]["stringData"];
        assert_eq!(data["tls.crt"], "CERT-PEM");
        assert_eq!(data["tls.key"], "KEY-PEM");
        assert_eq!(data["ca.crt"], "CA-PEM");
        let pod = &v["items"][1]["spec"]["template"]["spec"];
        let script = pod["containers"][0]["command"][2].as_str().expect("a script");
        for flag in [
            "--tls-cert /token/tls.crt",
            "--tls-key /token/tls.key",
            "--client-ca /token/ca.crt",
        ] {
            assert!(script.contains(flag), "{script}");
        }
        let items = pod["volumes"][0]["projected"]["sources"][0]["secret"]["items"]
            .as_array()
            .expect("items");
        let keys: Vec<&str> = items.iter().filter_map(|i| i["key"].as_str()).collect();
        assert_eq!(keys, ["token", "tls.crt", "tls.key", "ca.crt"]);
        assert!(items.iter().all(|i| i["mode"] == 0o440));
    }

    #[test]
    fn the_shown_manifests_hold_the_certificates_and_neither_token_nor_key() {
        let a = agents(&req()).expect("valid");
        assert!(a.yaml.contains("CERT-PEM") && a.yaml.contains("CA-PEM"), "{}", a.yaml);
        assert!(!a.yaml.contains("KEY-PEM") && !a.yaml.contains("s3cret"), "{}", a.yaml);
        assert_eq!(a.yaml.matches(REDACTED).count(), 2, "{}", a.yaml);
        assert!(
            a.yaml.contains("kind: Job") && a.yaml.contains("kind: Secret"),
            "{}",
            a.yaml
        );
        assert!(!format!("{:?}", req().tls).contains("KEY-PEM"));
    }

    #[test]
    fn the_job_is_deleted_before_its_token() {
        let a = agents(&req()).expect("valid");
        let kinds: Vec<(&str, &str)> = a.created.iter().map(|c| (c.kind, c.name.as_str())).collect();
        assert_eq!(kinds, [("job", "throng-run-1"), ("secret", "throng-run-1-token")]);
    }

    #[test]
    fn agents_and_ports_out_of_range_are_refused() {
        let with = |agents, base_port| AgentsRequest {
            agents,
            base_port,
            ..req()
        };
        assert_eq!(agents(&with(0, 7700)).err(), Some(K8sError::Agents(0)));
        assert_eq!(agents(&with(1001, 7700)).err(), Some(K8sError::Agents(1001)));
        assert_eq!(
            agents(&with(4, 80)).err(),
            Some(K8sError::Ports { base: 80, agents: 4 })
        );
        assert_eq!(
            agents(&with(4, 65533)).err(),
            Some(K8sError::Ports { base: 65533, agents: 4 })
        );
        assert!(agents(&with(4, 65532)).is_ok());
        let bad_name = AgentsRequest {
            name: "Not_A_Name".into(),
            ..req()
        };
        assert!(matches!(agents(&bad_name), Err(K8sError::Name { flag: "--name", .. })));
    }

    #[test]
    fn addresses_and_ports() {
        assert_eq!(address("127.0.0.1", 7700), "127.0.0.1:7700");
        assert_eq!(address("::1", 7701), "[::1]:7701");
        assert_eq!(port(7700, 3), Some(7703));
        assert_eq!(port(65535, 1), None);
    }
}
