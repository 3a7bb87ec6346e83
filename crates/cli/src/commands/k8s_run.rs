//! `throng k8s run`: starts N `throng agent` pods as an Indexed Job (the
//! objects come from throng-k8s, without I/O), waits for each to listen,
//! drives them with `throng coordinate`'s own code, and deletes the Job and
//! its Secret whatever happens (the end of the run, an error, Ctrl-C). The
//! agents speak TLS only, with certificates made for the run: the pods'
//! addresses are known only once they run, so their certificate is for a
//! fixed name, which the coordinator verifies instead of the address.
//!
//! ```text
//!  check the command ─► token, CA, agents' and coordinator's certificates
//!        ─► kubectl apply (Secret + Job) ─► pods Running, ports open
//!        ─► coordinate::run_with(agents = pod IP:base+i, token, TLS) ─► merged result
//!        ─► kubectl delete job, secret            (also when any step fails)
//! ```
//!
//! The cluster is reached with kubectl, as `throng k8s job`'s instructions
//! already do: a kubeconfig may authenticate with client certificates,
//! tokens, or an exec plugin (cloud providers, OIDC), which only kubectl
//! implements in full; the workspace has no Kubernetes client. Every
//! kubectl call has a deadline and is killed past it.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_k8s::agents::{AgentsRequest, AgentsTls, Created};

use super::distributed::coordinate;
use crate::args::{CoordinateCmd, K8sRunCmd};
use crate::exit::{Interrupted, UsageError};

/// Longest one kubectl call may take.
const KUBECTL: Duration = Duration::from_secs(60);
/// Most output read from one kubectl call.
const MAX_OUTPUT: u64 = 4 << 20;
/// How often the pods are looked at while they start.
const POLL: Duration = Duration::from_secs(1);

pub fn run(c: K8sRunCmd) -> anyhow::Result<ExitCode> {
    // Everything that can be checked is, before anything is created.
    coordinate::check(&c.command)?;
    crate::commands::export::check_outputs(&[("--json", c.json.as_deref()), ("--html", c.html.as_deref())])?;
    if c.per_agent && c.push.remote_write.is_none() && c.push.otlp.is_none() {
        return Err(
            UsageError("--per-agent shows each agent in the pushes: give --remote-write or --otlp too".into()).into(),
        );
    }
    crate::live::Pushes::check(&c.push)?;
    if let Some(k) = &c.kubeconfig
        && !k.is_file()
    {
        return Err(UsageError(format!(
            "--kubeconfig {}: no such file; give the kubeconfig of the cluster (or leave it out for kubectl's own)",
            k.display()
        ))
        .into());
    }
    // 8 digits name the run; 32 (128 bits) are the token.
    let random = random_hex(40)?;
    let (suffix, token) = random.split_at(8);
    let name = c.name.clone().unwrap_or_else(|| format!("throng-run-{suffix}"));
    let (tls, client) = made_tls()?;
    let agents = throng_k8s::agents::agents(&AgentsRequest {
        name: name.clone(),
        namespace: c.namespace.clone(),
        image: c
            .image
            .clone()
            .unwrap_or_else(|| format!("throng:{}", env!("CARGO_PKG_VERSION"))),
        agents: c.agents,
        base_port: c.base_port,
        token: token.to_string(),
        tls: tls.clone(),
    })
    .map_err(|e| UsageError(e.to_string()))?;
    if c.dry_run {
        crate::commands::shared::print_bytes(agents.yaml.as_bytes())?;
        say!(
            "throng: k8s run --dry-run: nothing was created; a run makes a new token, CA and certificates, in the \
             Secret {name}-token only"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let kubectl = Kubectl {
        kubeconfig: c.kubeconfig.clone(),
        namespace: c.namespace.clone(),
        secrets: vec![token.to_string(), tls.key.clone()],
    };
    let control = throng_engine::Control::new();
    crate::signals::forward_to_saying(
        &control,
        "throng: stopping: the agents stop, then the Job and its Secret are deleted",
    );
    // From here on, whatever happens, what was created is deleted.
    let cleanup = Cleanup {
        kubectl: &kubectl,
        created: agents.created.clone(),
    };
    say!(
        "throng: k8s run: creating job/{name} ({} agents, TLS) and secret/{name}-token in namespace {}",
        c.agents,
        c.namespace
    );
    kubectl.call(&["apply", "-f", "-"], Some(&agents.json))?;
    let addrs = wait_for_agents(&kubectl, &agents.selector, &c, &control)?;
    say!(
        "throng: k8s run: {} agents listening: {}",
        addrs.len(),
        addrs.join(", ")
    );
    let coordinate_cmd = CoordinateCmd {
        agents: addrs,
        token_file: None,
        // The TLS is given below, made for this run.
        cacert: None,
        cert: None,
        key: None,
        sni: Some(throng_k8s::agents::SERVER_NAME.to_string()),
        json: c.json,
        html: c.html,
        allow_missing: c.allow_missing,
        abort_on_fail: false,
        prometheus: None,
        prometheus_linger: Duration::ZERO,
        per_agent: c.per_agent,
        push: c.push,
        quiet: c.quiet,
        // The pods go when this process does: nothing to resume.
        journal: None,
        resume: None,
        command: c.command,
    };
    let given = coordinate::Given {
        token: Some(token.to_string()),
        tls: Some(client),
        control: Some(control),
    };
    let outcome = coordinate::run_with(coordinate_cmd, given);
    drop(cleanup);
    outcome
}

/// The run's TLS: a CA (its key dropped here, never written), the agents'
/// certificate for [`throng_k8s::agents::SERVER_NAME`] and the
/// coordinator's client certificate; the agents' part, and the
/// coordinator's configuration that trusts them.
fn made_tls() -> anyhow::Result<(AgentsTls, Arc<throng_tls::rustls::ClientConfig>)> {
    let set = throng_tls::generate(
        throng_tls::CertKind::Ecdsa,
        &[throng_k8s::agents::SERVER_NAME.to_string()],
        throng_tls::Validity::Current,
    )
    .map_err(|e| anyhow::anyhow!("making the agents' TLS certificates: {e}"))?;
    let pem = |name: &str| {
        set.files
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, text, _)| text.clone())
            .ok_or_else(|| anyhow::anyhow!("making the agents' TLS certificates: no {name} was made"))
    };
    let ca = pem("ca.pem")?;
    let client = coordinate::client_tls_made("the run", &ca, &pem("client.pem")?, &pem("client.key")?)?;
    Ok((
        AgentsTls {
            cert: pem("server.pem")?,
            key: pem("server.key")?,
            client_ca: ca,
        },
        client,
    ))
}

/// Deletes what was created when dropped (an error, a signal, the end).
struct Cleanup<'a> {
    kubectl: &'a Kubectl,
    created: Vec<Created>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for o in &self.created {
            let what = format!("{}/{}", o.kind, o.name);
            match self
                .kubectl
                .call(&["delete", o.kind, &o.name, "--ignore-not-found", "--wait=false"], None)
            {
                Ok(_) => say!("throng: k8s run: deleted {what}"),
                Err(e) => say!(
                    "throng: k8s run: could not delete {what}: {e:#}; delete it with: kubectl -n {} delete {} {}",
                    self.kubectl.namespace,
                    o.kind,
                    o.name
                ),
            }
        }
    }
}

/// Waits until every index has a running pod whose agent accepts a
/// connection; returns their addresses by index.
fn wait_for_agents(
    kubectl: &Kubectl,
    selector: &str,
    c: &K8sRunCmd,
    control: &throng_engine::Control,
) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + c.ready_timeout;
    let n = c.agents as usize;
    let mut ready: Vec<Option<String>> = vec![None; n];
    loop {
        if control.was_interrupted() {
            return Err(Interrupted("while waiting for the agents' pods").into());
        }
        let listing = kubectl.call(&["get", "pods", "-l", selector, "-o", POD_FIELDS], None)?;
        let pods = parse_pods(&listing);
        let mut waiting = Vec::new();
        for (i, slot) in ready.iter_mut().enumerate() {
            if slot.is_some() {
                continue;
            }
            let Some(p) = pods.iter().find(|p| p.index == i) else {
                waiting.push(format!("agent {i}: no pod yet"));
                continue;
            };
            match p.phase.as_str() {
                "Failed" | "Succeeded" => {
                    return Err(anyhow::anyhow!(
                        "agent {i}: its pod {} ended ({}{}) before it was given its segment; see kubectl -n {} logs {}",
                        p.name,
                        p.phase,
                        p.reason_note(),
                        kubectl.namespace,
                        p.name
                    ));
                }
                "Running" if !p.ip.is_empty() => {
                    let port = throng_k8s::agents::port(c.base_port, i as u32).unwrap_or(c.base_port);
                    let addr = throng_k8s::agents::address(&p.ip, port);
                    if listens(&addr) {
                        *slot = Some(addr);
                    } else {
                        waiting.push(format!("agent {i}: pod {} runs, {addr} not listening yet", p.name));
                    }
                }
                phase => waiting.push(format!("agent {i}: pod {} {phase}{}", p.name, p.reason_note())),
            }
        }
        if waiting.is_empty() {
            return Ok(ready.into_iter().flatten().collect());
        }
        if Instant::now() >= deadline {
            return Err(anyhow::anyhow!(
                "the agents were not all listening within --ready-timeout {}: {}; see kubectl -n {} describe pods -l {selector}",
                throng_plan::format_duration(c.ready_timeout),
                waiting.join("; "),
                kubectl.namespace
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// One line per pod: index, phase, IP, name, why it waits.
const POD_FIELDS: &str = "jsonpath={range .items[*]}{.metadata.annotations.batch\\.kubernetes\\.io/job-completion-index}\
{\"\\t\"}{.status.phase}{\"\\t\"}{.status.podIP}{\"\\t\"}{.metadata.name}{\"\\t\"}\
{.status.containerStatuses[0].state.waiting.reason}{.status.containerStatuses[0].state.terminated.reason}{\"\\n\"}{end}";

/// A pod as [`POD_FIELDS`] lists it.
#[derive(Debug, PartialEq, Eq)]
struct Pod {
    index: usize,
    phase: String,
    ip: String,
    name: String,
    reason: String,
}

impl Pod {
    fn reason_note(&self) -> String {
        if self.reason.is_empty() {
            String::new()
        } else {
            format!(", {}", self.reason)
        }
    }
}

/// The pods in kubectl's listing; a line that does not parse is skipped
/// (a pod being created has no index yet).
fn parse_pods(listing: &str) -> Vec<Pod> {
    listing
        .lines()
        .filter_map(|line| {
            let mut f = line.split('\t');
            let index = f.next()?.trim().parse().ok()?;
            let mut next = || f.next().unwrap_or_default().trim().to_string();
            Some(Pod {
                index,
                phase: next(),
                ip: next(),
                name: next(),
                reason: next(),
            })
        })
        .collect()
}

/// True when something accepts a connection at `addr` (the agent does not
/// count a connection that says nothing as a run).
fn listens(addr: &str) -> bool {
    let Some(a) = addr.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok()
}

/// `n` random hexadecimal digits from the kernel.
fn random_hex(n: usize) -> anyhow::Result<String> {
    let mut bytes = vec![0u8; n.div_ceil(2)];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom for the agents' token: {e}"))?;
    let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(n);
    Ok(hex)
}

/// kubectl, pointed at the namespace (and kubeconfig).
struct Kubectl {
    kubeconfig: Option<PathBuf>,
    namespace: String,
    /// Never shown: taken out of anything kubectl says (the token, the
    /// agents' key).
    secrets: Vec<String>,
}

impl Kubectl {
    /// Runs `kubectl ARGS` (stdin: `input`) to its end or [`KUBECTL`];
    /// its stdout, or an error with what it said.
    fn call(&self, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
        let mut cmd = Command::new("kubectl");
        if let Some(k) = &self.kubeconfig {
            cmd.arg("--kubeconfig").arg(k);
        }
        cmd.args(["--namespace", &self.namespace, "--request-timeout=30s"])
            .args(args)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = format!("kubectl {}", args.first().copied().unwrap_or_default());
        let mut child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                UsageError("kubectl is not on the PATH: throng k8s run talks to the cluster with it; install it".into())
                    .into()
            } else {
                anyhow::anyhow!("cannot start kubectl: {e}")
            }
        })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            let text = text.to_string();
            // On a thread: a kubectl that does not read must not hold this one.
            std::thread::spawn(move || {
                let _ = stdin.write_all(text.as_bytes());
            });
        }
        let read = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                if let Some(r) = r {
                    let _ = r.take(MAX_OUTPUT).read_to_end(&mut out);
                }
                String::from_utf8_lossy(&out).into_owned()
            })
        };
        let stdout = read(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
        let stderr = read(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
        let deadline = Instant::now() + KUBECTL;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok(out),
            Some(s) => Err(anyhow::anyhow!(
                "{what} failed ({s}): {}",
                // Its last line says what went wrong (the lines before repeat it).
                self.redacted(
                    err.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("nothing said")
                        .trim()
                )
            )),
            None => Err(anyhow::anyhow!(
                "{what} did not finish within {} s; is the cluster reachable (kubectl cluster-info)?",
                KUBECTL.as_secs()
            )),
        }
    }

    fn redacted(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in self.secrets.iter().filter(|s| !s.is_empty()) {
            text = text.replace(secret.as_str(), "<redacted>");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_read_from_the_listing() {
        let listing = "1\tRunning\t127.0.0.1\tthrong-run-1-1-abcde\t\n\
                       0\tPending\t\tthrong-run-1-0-fghij\tErrImageNeverPull\n\
                       \tPending\t\tbeing-made\t\n";
        let pods = parse_pods(listing);
        assert_eq!(pods.len(), 2);
        assert_eq!(
            pods[0],
            Pod {
                index: 1,
                phase: "Running".into(),
                ip: "127.0.0.1".into(),
                name: "throng-run-1-1-abcde".into(),
                reason: String::new(),
            }
        );
        assert_eq!(pods[1].reason_note(), ", ErrImageNeverPull");
        assert!(parse_pods("").is_empty());
    }

    #[test]
    fn the_token_never_leaves_in_an_error() {
        let k = Kubectl {
            kubeconfig: None,
            namespace: "default".into(),
            secrets: vec!["abc123".into(), String::new(), "KEY".into()],
        };
        assert_eq!(
            k.redacted("bad value abc123 here, KEY there"),
            "bad value <redacted> here, <redacted> there"
        );
    }

    #[test]
    fn random_hex_has_the_length_asked() {
        let a = random_hex(20).expect("urandom");
        assert_eq!(a.len(), 20);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, random_hex(20).expect("urandom"));
    }
}
