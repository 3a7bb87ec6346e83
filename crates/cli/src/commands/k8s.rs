//! `throng k8s job`: read the plan (a scenario file and the files it names,
//! or a command line), size one agent, and print the manifests of an
//! Indexed Job (throng-k8s makes them, without I/O) and, on stderr, the
//! commands that collect and merge the results.

use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser as _;
use throng_k8s::{JobRequest, Load, PerOpen, Plan, PlanFile, Work, sizing};
use throng_scenario::{Executor, ScenarioPlan, Step, TargetInputs};

use super::shared::print_bytes;
use crate::args::{Cli, Command, K8sCommand, K8sJobCmd};
use crate::exit::UsageError;

pub fn run(c: crate::args::K8sCmd) -> anyhow::Result<ExitCode> {
    match c.command {
        K8sCommand::Job(job) => job_manifests(*job),
        K8sCommand::Run(r) => super::k8s_run::run(*r),
    }
}

fn job_manifests(c: K8sJobCmd) -> anyhow::Result<ExitCode> {
    let (plan, load, secrets) = match &c.plan {
        Some(file) => scenario(file, &c.command)?,
        None => command_line(&c.command)?,
    };
    let mut sizing = sizing::size(&load, c.parallelism);
    if let Some(cpu) = &c.cpu {
        sizing.cpu = cpu.clone();
        sizing.why[1] = format!("cpu {cpu}: set with --cpu");
    }
    if let Some(memory) = &c.memory {
        sizing.memory = memory.clone();
        sizing.why[0] = format!("memory {memory}: set with --memory");
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // Whole seconds, rounded up, so the printed time is the time used.
    let start = (now + c.start_in).as_secs() + 1;
    let req = JobRequest {
        name: c.name.clone(),
        namespace: c.namespace.clone(),
        image: c
            .image
            .clone()
            .unwrap_or_else(|| format!("throng:{}", env!("CARGO_PKG_VERSION"))),
        parallelism: c.parallelism,
        results_dir: c.results_dir.clone(),
        results_pvc: c.results_pvc.clone(),
        start_at_unix: i64::try_from(start).unwrap_or(i64::MAX),
        plan,
        secret_args: secrets.args,
        secret_scenario: secrets.scenario,
        sizing,
    };
    let m = throng_k8s::generate(&req).map_err(|e| UsageError(e.to_string()))?;
    print_bytes(m.yaml.as_bytes())?;
    let mut note = format!(
        "throng: {} agents, each one segment of 0..1, all starting at {} ({} from now): apply within that time, e.g.\n\
         \x20 throng k8s job ... > job.yaml && kubectl apply -f job.yaml\n\
         throng: each agent: cpu {}, memory {} (requests = limits)\n",
        c.parallelism,
        m.start_at,
        throng_plan::format_duration(c.start_in),
        req.sizing.cpu,
        req.sizing.memory,
    );
    for why in &req.sizing.why {
        note.push_str(&format!("  {why}\n"));
    }
    note.push_str("throng: then collect and merge the results:\n");
    for line in m.collect.lines() {
        note.push_str(&format!("  {line}\n"));
    }
    say_part!("{note}");
    Ok(ExitCode::SUCCESS)
}

/// Which of the plan's files carry a secret (and go in the Secret).
#[derive(Clone, Copy, Debug, Default)]
struct Secrets {
    args: bool,
    scenario: bool,
}

/// True when `url` carries credentials (`nats://user:pass@`, `http://user:pass@`).
fn has_userinfo(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| !u.username().is_empty() || u.password().is_some())
}

/// True when `--remote-write` or `--otlp` carries a secret: a header
/// (Authorization), or a query (tokens travel there too).
fn pushes_a_secret(live: &crate::args::LiveArgs) -> bool {
    let secret_url = |u: &Option<String>| {
        u.as_deref()
            .is_some_and(|u| has_userinfo(u) || url::Url::parse(u).is_ok_and(|u| u.query().is_some()))
    };
    !live.push.remote_write_header.is_empty()
        || !live.push.otlp_header.is_empty()
        || secret_url(&live.push.remote_write)
        || secret_url(&live.push.otlp)
}

/// True when one of `-H` headers is secret: always-sensitive, or named by
/// `--secret-header`.
fn has_secret_header(headers: &[String], marked: &[String]) -> bool {
    let names = headers.iter().filter_map(|h| h.split_once(':')).map(|(n, _)| n.trim());
    // A --secret-header the agents will refuse: ship the line as a secret anyway.
    throng_plan::secret_names(marked, names).map_or(true, |secret| {
        headers
            .iter()
            .filter_map(|h| h.split_once(':'))
            .any(|(n, _)| throng_plan::is_secret(&secret, n.trim()))
    })
}

/// Flags the agents set themselves.
const AGENT_FLAGS: [&str; 4] = ["--json", "--segment", "--segment-sequence", "--start-at"];

fn refuse_agent_flags(args: &[String]) -> Result<(), UsageError> {
    for a in args {
        let flag = a.split('=').next().unwrap_or_default();
        if AGENT_FLAGS.contains(&flag) {
            return Err(UsageError(format!(
                "{flag}: each agent sets it itself (its segment, the shared start, its result file); leave it out"
            )));
        }
    }
    Ok(())
}

/// A command line after `--`: `http ...` or `storm ...`.
fn command_line(args: &[String]) -> anyhow::Result<(Plan, Load, Secrets)> {
    if args.is_empty() {
        return Err(UsageError(
            "give a scenario file (throng k8s job FILE --parallelism N) or a command line after '--' \
             (throng k8s job --parallelism N -- http http://svc:8080/ -c 400 -d 5m)"
                .into(),
        )
        .into());
    }
    refuse_agent_flags(args)?;
    let cli = Cli::try_parse_from(std::iter::once("throng".to_string()).chain(args.iter().cloned()))
        .map_err(|e| UsageError(format!("the command after '--': {}", first_line(&e))))?;
    let mut secrets = Secrets::default();
    let load = match &cli.command {
        Command::Http(h) => {
            // `--data @FILE` is a file the agents need too (`@-` has no file to ship).
            let data_file = h
                .data
                .as_deref()
                .and_then(|d| d.strip_prefix('@'))
                .filter(|p| *p != "-")
                .map(std::path::PathBuf::from);
            secrets.args = h.url.iter().chain(&h.more_urls).any(|u| has_userinfo(u))
                || pushes_a_secret(&h.live)
                || has_secret_header(&h.headers, &h.secret_headers)
                || h.basic_auth.is_some()
                || !h.cookies.is_empty()
                || h.reach.proxy.as_deref().is_some_and(has_userinfo)
                // An inline body may carry credentials (`@FILE` is shipped as a file).
                || h.data.as_deref().is_some_and(|d| !d.starts_with('@'));
            image_files(&[
                ("--body", &h.body),
                ("--bearer-file", &h.bearer_file),
                ("--targets", &h.targets),
                ("--body-lines", &h.body_lines),
                ("--data", &data_file),
                ("--cacert", &h.tls.cacert),
                ("--cert", &h.tls.cert),
                ("--key", &h.tls.key),
                ("--remote-write-cacert", &h.live.push.remote_write_cacert),
                ("--otlp-cacert", &h.live.push.otlp_cacert),
            ]);
            let https = h.url.as_deref().is_some_and(|u| u.starts_with("https://"));
            let open = u64::from(h.connections.unwrap_or(if h.rate.is_some() { 1000 } else { 50 }));
            Load {
                open,
                per_open: if https { PerOpen::LiveTls } else { PerOpen::Connection },
                rate: h.rate,
                work: match (h.no_keepalive, https) {
                    (false, _) => Work::KeepAliveRequest,
                    (true, false) => Work::NewConnection,
                    (true, true) => Work::TlsHandshake,
                },
            }
        }
        Command::Storm(s) => {
            secrets.args = has_userinfo(&s.target)
                || pushes_a_secret(&s.live)
                || !s.send_secret.is_empty()
                || s.reach.proxy.as_deref().is_some_and(has_userinfo);
            image_files(&[
                ("--cacert", &s.tls.cacert),
                ("--cert", &s.tls.cert),
                ("--key", &s.tls.key),
                ("--nats-creds", &s.nats_creds),
                ("--remote-write-cacert", &s.live.push.remote_write_cacert),
                ("--otlp-cacert", &s.live.push.otlp_cacert),
            ]);
            let tls = ["tls://", "https://", "mqtts://"]
                .iter()
                .any(|scheme| s.target.starts_with(scheme));
            let total = s.connections.unwrap_or(1);
            Load {
                open: s.max_concurrent.map_or(total, |m| m.min(total)),
                per_open: if tls { PerOpen::HeldTls } else { PerOpen::Connection },
                rate: s.rate,
                work: if tls { Work::TlsHandshake } else { Work::NewConnection },
            }
        }
        Command::Run(_) => {
            return Err(UsageError(
                "give the scenario file as PLAN, before the flags: throng k8s job FILE --parallelism N \
                 [-- more throng run flags]; it is shipped to the agents in the ConfigMap"
                    .into(),
            )
            .into());
        }
        _ => {
            return Err(UsageError(format!(
                "the command after '--' is '{}': agents run http or storm (or a scenario file as PLAN)",
                args[0]
            ))
            .into());
        }
    };
    Ok((Plan::Command(args.to_vec()), load, secrets))
}

/// Files a command line names are read inside the pod.
fn image_files(flags: &[(&str, &Option<std::path::PathBuf>)]) {
    for (flag, path) in flags {
        if let Some(p) = path {
            say!(
                "throng: warning: {flag} {} is read inside each pod: the file must be in the image at that path \
                 (or use a scenario file, whose files are shipped in the ConfigMap)",
                p.display()
            );
        }
    }
}

/// A scenario file, the files it names, and `throng run` flags after `--`.
fn scenario(file: &Path, extra: &[String]) -> anyhow::Result<(Plan, Load, Secrets)> {
    refuse_agent_flags(extra)?;
    let cli = Cli::try_parse_from(
        ["throng", "run", "/plan/scenario.yaml"]
            .into_iter()
            .map(String::from)
            .chain(extra.iter().cloned()),
    )
    .map_err(|e| UsageError(format!("the throng run flags after '--': {}", first_line(&e))))?;
    let Command::Run(run) = cli.command else {
        return Err(UsageError("after '--' give throng run flags".into()).into());
    };
    let text = super::shared::read_plan_file(file, "scenario file")?;
    let dir = file.parent().unwrap_or(Path::new("."));
    // The .proto files (and imports) grpc: steps were compiled from: the
    // pods read them too.
    let protos = std::cell::RefCell::new(Vec::new());
    let read = |name: &str| {
        let text = super::shared::read_side_file(&dir.join(name)).map_err(|e| e.to_string())?;
        if name.ends_with(".proto") && !protos.borrow().iter().any(|p| p == name) {
            protos.borrow_mut().push(name.to_string());
        }
        Ok(text)
    };
    // The pods' environment is what --env gives them, no more.
    let env: std::collections::HashMap<String, String> = super::run::parse_env(&run.env)?.into_iter().collect();
    let target = TargetInputs {
        url: run.target.as_deref(),
        env: Some(&env),
    };
    let mut plan = ScenarioPlan::parse_with(&text, &file.display().to_string(), &read, &target)
        .map_err(|e| UsageError(e.to_string()))?;
    super::shared::check_js_steps(&plan)?;
    if let Some(f) = run.scale.filter(|f| f.is_finite() && *f > 0.0) {
        plan = plan.scaled(f);
    }
    let plan = plan
        .with_secret_headers(&run.secret_headers)
        .map_err(|e| UsageError(e.to_string()))?;
    // --env values are often tokens that templates put in headers.
    let secrets = Secrets {
        args: !run.env.is_empty() || pushes_a_secret(&run.live),
        scenario: plan.redaction_note().is_some(),
    };
    let given: Vec<&str> = run
        .env
        .iter()
        .filter_map(|e| e.split_once('=').map(|(k, _)| k))
        .collect();
    for name in plan.env_names().iter().filter(|n| !given.contains(&n.as_str())) {
        say!(
            "throng: warning: {} uses {{{{env.{name}}}}}; the pods' environment does not have it: add -- --env {name}=VALUE",
            file.display()
        );
    }
    let mut files = Vec::new();
    let mut ship = |name: &str, secret: bool, limit: u64| -> anyhow::Result<()> {
        let contents = super::shared::read_side_file_within(&dir.join(name), limit)
            .map_err(|e| UsageError(format!("{}: cannot read '{name}', which it names: {e}", file.display())))?;
        files.push(PlanFile {
            path: name.to_string(),
            contents,
            secret,
        });
        Ok(())
    };
    if let Some(data) = &plan.data {
        ship(&data.file, false, super::shared::MAX_SIDE_FILE_BYTES)?;
    }
    for p in protos.borrow().iter() {
        ship(p, false, super::shared::MAX_SIDE_FILE_BYTES)?;
    }
    if let Some(tls) = &plan.tls {
        for (p, secret) in [(&tls.cacert, false), (&tls.cert, false), (&tls.key, true)] {
            if let Some(p) = p {
                ship(p, secret, throng_plan::input::MAX_PEM_BYTES)?;
            }
        }
    }
    Ok((
        Plan::Scenario {
            text,
            files,
            extra_args: extra.to_vec(),
        },
        scenario_load(&plan),
        secrets,
    ))
}

/// The peak of VUs and of the arrival rate, all scenarios added up (an upper
/// bound: scenarios with start times may not overlap).
fn scenario_load(plan: &ScenarioPlan) -> Load {
    let mut vus = 0u64;
    let mut rate: Option<f64> = None;
    let mut requests = 0u32;
    for s in &plan.scenarios {
        let peak =
            |start: f64, stages: &[throng_scenario::Stage]| stages.iter().map(|st| st.target).fold(start, f64::max);
        match &s.executor {
            Executor::ConstantVus { vus: v, .. }
            | Executor::PerVuIterations { vus: v, .. }
            | Executor::SharedIterations { vus: v, .. } => vus += v,
            Executor::RampingVus { start_vus, stages, .. } => vus += peak(*start_vus as f64, stages).ceil() as u64,
            Executor::ConstantArrivalRate {
                rate: r,
                time_unit,
                max_vus,
                ..
            } => {
                vus += max_vus;
                *rate.get_or_insert(0.0) += r / time_unit.as_secs_f64().max(1e-9);
            }
            Executor::RampingArrivalRate {
                start_rate,
                time_unit,
                stages,
                max_vus,
                ..
            } => {
                vus += max_vus;
                *rate.get_or_insert(0.0) += peak(*start_rate, stages) / time_unit.as_secs_f64().max(1e-9);
            }
        }
        requests = requests.max(count_requests(&s.flow));
    }
    Load {
        open: vus,
        per_open: if plan.target.https { PerOpen::TlsVu } else { PerOpen::Vu },
        rate,
        work: Work::Iteration(requests.max(1)),
    }
}

fn count_requests(flow: &[Step]) -> u32 {
    flow.iter()
        .map(|s| match s {
            Step::Request(_) | Step::Grpc(_) => 1,
            // Each expect is a request (one when it has none).
            Step::WebSocket(w) => w
                .messages
                .iter()
                .filter(|m| matches!(m, throng_scenario::WsMessage::Expect { .. }))
                .count()
                .max(1) as u32,
            Step::Mqtt(m) => m
                .messages
                .iter()
                .filter(|m| matches!(m, throng_scenario::MqttMessage::Expect { .. }))
                .count()
                .max(1) as u32,
            Step::Think(_) | Step::Add(_) | Step::Js(_) => 0,
            Step::Group { flow, .. } => count_requests(flow),
            // At most: every pass of a loop, the larger branch.
            Step::Repeat { times, flow } => times.saturating_mul(count_requests(flow)),
            Step::Until { max, flow, .. } => max.saturating_mul(count_requests(flow)),
            Step::If { then, otherwise, .. } => count_requests(then).max(count_requests(otherwise)),
            Step::Choose { branches } => branches.iter().map(|b| count_requests(&b.flow)).max().unwrap_or(0),
        })
        .fold(0u32, u32::saturating_add)
}

fn first_line(e: &clap::Error) -> String {
    e.render()
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}
