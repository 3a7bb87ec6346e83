//! `throng coordinate`: checks the command once, has agent i run segment i
//! of N of it from one instant, and merges their results exactly.

use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use throng_result::RunResult;

use super::command::{Coordinated, check_command};
use super::journal::Journal;
use super::{
    Conn, MAX_AGENTS, MAX_HELLO, Msg, PROTOCOL, RECONNECT, SILENCE, WireError, now_ms, read_token, recv, recv_within,
    send,
};
use crate::args::CoordinateCmd;
use crate::exit::{Outcome, UsageError};

/// Longest a connection to an agent may take.
const CONNECT: Duration = Duration::from_secs(5);
/// Longest an agent may take to answer a hello.
const ANSWER: Duration = Duration::from_secs(10);
/// Longest an agent may take from its run orders to its run's start (it
/// writes the shipped files and checks the command first).
const STARTING: Duration = Duration::from_secs(30);
/// How far ahead of now the agents start: time for every agent to get its
/// orders and start its process.
const START_AHEAD: Duration = Duration::from_secs(3);
/// Largest clock difference between here and an agent.
const MAX_OFFSET_MS: u64 = 1000;

/// One agent, connected and greeted.
pub(super) struct Agent {
    addr: String,
    /// Its segment: i of the run's N (its place in --agents).
    pub(super) seat: usize,
    pub(super) stream: Conn,
    /// Its clock minus this one's at the welcome, in ms, and the round
    /// trip that bounds the error of that.
    offset_ms: i64,
    round_trip_ms: u64,
    /// How often its connection broke and was made again.
    reconnects: u32,
}

/// What the coordinator proves itself with: the token, and the TLS it
/// speaks.
#[derive(Clone)]
pub struct Access {
    pub(super) token: String,
    pub(super) tls: Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>,
    /// `--sni`: the name every agent's certificate is verified for (else
    /// the host of its address).
    pub(super) sni: Option<String>,
}

/// How the parts ended: each with its segment's index (its agent's place in
/// --agents), in that order.
pub(super) type Parts = Vec<(usize, Part)>;

/// How an agent's part ended.
pub(super) enum Part {
    Done {
        exit_code: i32,
        result: Option<String>,
        error: String,
    },
    Missing(String),
}

pub fn run(c: CoordinateCmd) -> anyhow::Result<ExitCode> {
    run_with(c, Given::default())
}

/// What a caller that started the agents itself hands over (`throng k8s
/// run`): the token it gave them, the TLS that trusts the certificate it
/// gave them, and its control with the signals already forwarded to it.
#[derive(Default)]
pub struct Given {
    /// The token, instead of `--token-file`.
    pub token: Option<String>,
    /// The TLS to speak to the agents, instead of `--cacert`/`--cert`/`--key`
    /// (`--sni` still names what to verify).
    pub tls: Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>,
    /// The run's control, instead of a new one.
    pub control: Option<throng_engine::Control>,
}

/// The checks `run` makes of the command before any agent is asked, for a
/// caller that has things to do before it (start the agents): the command
/// with `--abort-on-fail` taken out.
pub fn check(command: &[String]) -> anyhow::Result<()> {
    let command: Vec<String> = command.iter().filter(|a| *a != "--abort-on-fail").cloned().collect();
    prepared(&command).map(|_| ())
}

/// The command's thresholds, its connections, and its scenario, checked
/// as the command checks them before it runs.
#[allow(clippy::type_complexity)]
pub(super) fn prepared(
    command: &[String],
) -> anyhow::Result<(
    Vec<throng_scenario::Threshold>,
    Option<u64>,
    Option<Box<crate::args::RunCmd>>,
)> {
    Ok(match check_command(command)? {
        Coordinated::Http(http) => {
            let thresholds = http
                .thresholds
                .iter()
                .map(|t| {
                    throng_scenario::Threshold::read_line(t)
                        .map_err(|e| UsageError(format!("the command after --: --threshold: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let connections = http.connections.map(u64::from);
            crate::commands::http::prepare(*http).map_err(|e| e.context("the command after --"))?;
            (thresholds, connections, None)
        }
        Coordinated::Storm(storm) => {
            let (_, plan, _) =
                crate::commands::storm::prepare(&storm).map_err(|e| e.context("the command after --"))?;
            let thresholds = crate::commands::storm::thresholds(&plan)
                .map_err(|e| UsageError(format!("the command after --: {}", e.0)))?;
            (thresholds, storm.max_concurrent.or(storm.connections), None)
        }
        Coordinated::Run(run) => {
            // The scenario's thresholds are judged here on the merged
            // figures, each with abort_on_fail stopping every agent.
            let prepared = crate::commands::run::prepare(&run).map_err(|e| e.context("the command after --"))?;
            (prepared.thresholds().to_vec(), None, Some(run))
        }
    })
}

/// [`run`], with what the caller gives.
pub fn run_with(mut c: CoordinateCmd, given: Given) -> anyhow::Result<ExitCode> {
    // `--abort-on-fail` is the coordinator's, also where the command's
    // thresholds are written: it judges the merged figures, not a segment's.
    let before = c.command.len();
    c.command.retain(|a| a != "--abort-on-fail");
    let abort = c.abort_on_fail || c.command.len() != before;
    // As the journal keeps it: a resume aborts as this run would.
    c.abort_on_fail = abort;
    // The whole check the command makes before it runs, here, once: an
    // agent never gets a command that would not run.
    let (thresholds, connections, run) = prepared(&c.command)?;
    let mut files = super::files::ship(&c.command)?;
    if let Some(run) = &run {
        // The scenario is read (and checked) here with every file it names.
        files = super::files::ship_plan(&c.command, run, files)?;
    }
    // Every file the command reads must be one shipped: checked here as the
    // agents will check it.
    let probe = std::path::Path::new("/throng-shipped");
    let cannot_ship = |what: String| {
        UsageError(format!(
            "the command after --: cannot tell how to ship {what}; write each file flag and its file as two \
             arguments (--body FILE)"
        ))
    };
    let (rewritten, _) = super::files::rewrite(&c.command, &files, probe).map_err(cannot_ship)?;
    super::files::only_in(&check_command(&rewritten)?, probe).map_err(|p| cannot_ship(format!("'{p}'")))?;
    crate::commands::export::check_outputs(&[("--json", c.json.as_deref()), ("--html", c.html.as_deref())])?;
    if c.per_agent && c.prometheus.is_none() && c.push.remote_write.is_none() && c.push.otlp.is_none() {
        return Err(UsageError(
            "--per-agent shows each agent on /metrics and in the pushes: give --prometheus, --remote-write or \
             --otlp too"
                .into(),
        )
        .into());
    }
    let access = Access {
        token: match given.token {
            Some(t) => t,
            None => read_token(c.token_file.as_deref())?,
        },
        tls: match given.tls {
            Some(tls) => Some(tls),
            None => client_tls(&c)?,
        },
        sni: c.sni.clone(),
    };
    if c.agents.len() > MAX_AGENTS {
        return Err(UsageError(format!("--agents: {} agents, more than {MAX_AGENTS}", c.agents.len())).into());
    }
    for (i, addr) in c.agents.iter().enumerate() {
        if addr.len() > MAX_ADDRESS {
            return Err(UsageError(format!(
                "--agents: agent {} is an address of {} bytes; give HOST:PORT (a host name is at most 253 bytes)",
                i + 1,
                addr.len()
            ))
            .into());
        }
        if c.agents[..i].contains(addr) {
            return Err(UsageError(format!(
                "--agents: {addr} is listed twice; an agent runs one segment at a time, list each once"
            ))
            .into());
        }
    }
    // Listening before any agent is asked: a busy --prometheus address is
    // a usage error, not a run cut short.
    let mut view = super::live::LiveView::new(&c, thresholds, abort)?;
    let control = given.control.unwrap_or_else(|| {
        let control = throng_engine::Control::new();
        crate::signals::forward_to(&control);
        control
    });
    // A scenario's setup: runs once, here, for every agent; its teardown
    // once, after them.
    let setup = match &run {
        Some(r) => crate::commands::run::run_once_flow(r, &control, None)?,
        None => None,
    };
    if let Some(s) = &setup {
        say!("throng: coordinate: {}", s.note);
    }
    let driven = drive(&c, &access, connections, files, &mut view, &control, setup.as_ref());
    let mut once: Vec<throng_engine::OnceRun> = Vec::new();
    let mut once_notes = Vec::new();
    if let (Some(r), Some(s)) = (&run, setup) {
        let vars = std::sync::Arc::clone(&s.vars);
        once.push(s);
        match crate::commands::run::run_once_flow(r, &control, Some(vars)) {
            Ok(Some(t)) => once.push(t),
            Ok(None) => {}
            Err(e) => once_notes.push(format!("{e:#}")),
        }
    }
    let Driven {
        mut agents,
        points,
        parts,
        aborted,
        mut journal,
    } = driven?;
    let signalled = control.was_interrupted();
    let code = finish(&c, &agents, &points, parts, aborted, (once, once_notes), &view)?;
    collected(&mut agents, journal.as_mut());
    // A signal during the linger ends it (one that stopped the run does
    // not: the last scrape still sees the totals).
    view.linger(c.prometheus_linger, || !signalled && control.was_interrupted());
    Ok(code)
}

/// What the agents did: who they are, their segments' points, how each
/// part ended, and the threshold that stopped them, if one did.
struct Driven {
    agents: Vec<Agent>,
    points: Vec<String>,
    parts: Parts,
    aborted: Option<String>,
    /// The run's journal and where it is kept.
    journal: Option<Journaled>,
}

/// A journal and its file.
pub(super) type Journaled = (std::path::PathBuf, Journal);

/// The merged result is written: the agents may drop their parts' results,
/// and the journal says there is nothing left to resume.
pub(super) fn collected(agents: &mut [Agent], journal: Option<&mut Journaled>) {
    for a in agents {
        let _ = send(&mut a.stream, &Msg::Collected);
    }
    if let Some((path, j)) = journal {
        j.finished = true;
        if let Err(e) = j.write(path) {
            say!("throng: coordinate: --journal {}: {e}", path.display());
        }
    }
}

/// Segment i of N runs from points[i] to points[i + 1].
pub(super) fn points(n: usize) -> Vec<String> {
    (0..=n)
        .map(|i| match i {
            0 => "0".to_string(),
            i if i == n => "1".to_string(),
            i => format!("{i}/{n}"),
        })
        .collect()
}

/// The agents' parts of a run: each greeted and given its segment, all
/// started, followed to their ends.
#[allow(clippy::too_many_arguments)]
fn drive(
    c: &CoordinateCmd,
    access: &Access,
    connections: Option<u64>,
    files: Vec<super::files::Shipped>,
    view: &mut super::live::LiveView,
    control: &throng_engine::Control,
    setup: Option<&throng_engine::OnceRun>,
) -> anyhow::Result<Driven> {
    // Every agent greeted hears Alive until the run is followed: it waits
    // for its run while this coordinator is there, however long the rest
    // takes.
    let mut beat = super::heartbeat::Heartbeat::start(c.agents.len());
    let mut agents = Vec::new();
    for (i, addr) in c.agents.iter().enumerate() {
        let mut agent = greet(addr, access, connections, c.agents.len(), None)?;
        agent.seat = i;
        beat.add(i, &agent.stream);
        agents.push(agent);
    }
    let n = agents.len();
    let points = points(n);
    let sequence = points.join(",");
    // The run's name: a connection that breaks resumes it by this.
    let run_id = super::secure::nonce().map_err(|e| anyhow::anyhow!(e))?;
    let start_at = now_ms() + START_AHEAD.as_millis() as u64;
    // Written before any agent has its orders: a run that starts can be
    // resumed.
    let mut journal = match super::journal::path_for(c.journal.as_deref(), c.json.as_deref()) {
        Some(path) => {
            let mut j = Journal::new(&run_id, &c.agents, &c.command, start_at);
            j.json.clone_from(&c.json);
            j.html.clone_from(&c.html);
            j.started_with = super::journal::StartedWith {
                abort_on_fail: c.abort_on_fail,
                allow_missing: c.allow_missing,
            };
            j.write(&path)
                .map_err(|e| UsageError(format!("--journal {}: {e}; give a writable path", path.display())))?;
            say!(
                "throng: coordinate: the run's journal is '{}' (should this process die: throng coordinate --resume {} \
                 --token-file ...)",
                path.display(),
                path.display()
            );
            Some((path, j))
        }
        None => None,
    };
    // Writing it may have taken a while (a slow disk, a busy machine): the
    // agents still get START_AHEAD to start.
    let start_at = match now_ms() + START_AHEAD.as_millis() as u64 {
        later if later > start_at + 1000 => {
            if let Some((path, j)) = journal.as_mut() {
                j.start_at_unix_ms = later;
                j.write(path)
                    .map_err(|e| UsageError(format!("--journal {}: {e}; give a writable path", path.display())))?;
            }
            later
        }
        _ => start_at,
    };
    view.starts_at(Instant::now() + START_AHEAD, start_at);
    for (i, a) in agents.iter_mut().enumerate() {
        let run = Msg::Run {
            command: c.command.clone(),
            segment: format!("{}:{}", points[i], points[i + 1]),
            sequence: sequence.clone(),
            start_at_unix_ms: start_at,
            files: files.clone(),
            setup: setup.map(|s| (*s.vars).clone()),
            run_id: run_id.clone(),
            resumable: journal.is_some(),
        };
        beat.pause(i);
        send(&mut a.stream, &run).map_err(|e| anyhow::anyhow!("agent {}: {e}", a.addr))?;
        beat.add(i, &a.stream);
    }
    for a in &mut agents {
        if let Err(e) = started(a) {
            beat.stop();
            for other in &mut agents {
                let _ = send(&mut other.stream, &Msg::Stop);
            }
            // Nothing to resume: the agents keep no result for it.
            collected(&mut agents, journal.as_mut());
            return Err(e);
        }
    }
    // From here on, follow says Alive.
    beat.stop();
    let over = match (&access.tls, &access.sni) {
        (None, _) => String::new(),
        (Some(_), None) => " over TLS".to_string(),
        (Some(_), Some(name)) => format!(" over TLS (each verified as '{name}')"),
    };
    say!(
        "throng: coordinate: {n} agents{over}, one segment of the plan each, start at {}",
        throng_result::rfc3339(start_at)
    );
    let (parts, aborted) = follow(&mut agents, view, control, (access, &run_id), journal.as_mut())?;
    Ok(Driven {
        agents,
        points,
        parts,
        aborted,
        journal,
    })
}

/// The longest `--agents` address: a DNS name's 253 bytes, a colon and a
/// port, with room for brackets around an IPv6 address.
pub(super) const MAX_ADDRESS: usize = 263;

/// The TLS configuration of --cacert/--cert/--key, read bounded.
pub(super) fn client_tls(
    c: &CoordinateCmd,
) -> Result<Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>, UsageError> {
    if c.cacert.is_none() {
        return Ok(None);
    }
    let show = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let settings = throng_plan::TlsSettings {
        cacert: show(&c.cacert),
        cert: show(&c.cert),
        key: show(&c.key),
        ..Default::default()
    };
    crate::commands::tls::client_config(&settings, std::path::Path::new("."), &[super::secure::ALPN]).map(Some)
}

/// The TLS of a caller that made the agents' certificates itself (`throng
/// k8s run`): trusting `ca`, presenting `cert` with `key` (PEM texts, named
/// `what` in an error).
pub fn client_tls_made(
    what: &str,
    ca: &str,
    cert: &str,
    key: &str,
) -> anyhow::Result<std::sync::Arc<throng_tls::rustls::ClientConfig>> {
    let pem = |part: &str, text: &str| Some((format!("{what}'s {part}"), text.as_bytes().to_vec()));
    throng_tls::client_config(&throng_tls::ClientOptions {
        cacert: pem("CA", ca),
        cert: pem("certificate", cert),
        key: pem("key", key),
        alpn: vec![super::secure::ALPN.to_vec()],
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Connects to `addr` (TLS with --cacert), answers its challenge, and
/// checks its welcome: version, clock, descriptor limit.
pub(super) fn greet(
    addr: &str,
    access: &Access,
    connections: Option<u64>,
    n: usize,
    resume: Option<&str>,
) -> anyhow::Result<Agent> {
    let resolved = addr
        .to_socket_addrs()
        .map_err(|e| UsageError(format!("--agents: '{addr}': {e}; give HOST:PORT")))?
        .next()
        .ok_or_else(|| UsageError(format!("--agents: '{addr}' resolves to no address; give HOST:PORT")))?;
    let tcp = TcpStream::connect_timeout(&resolved, CONNECT).map_err(|e| {
        anyhow::anyhow!(
            "agent {addr}: cannot connect: {e}; start `throng agent --listen {addr}` there, or check the address"
        )
    })?;
    let _ = tcp.set_nodelay(true);
    let mut stream = match &access.tls {
        Some(config) => {
            let host = match &access.sni {
                Some(name) => name.as_str(),
                None => {
                    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                    host.trim_start_matches('[').trim_end_matches(']')
                }
            };
            super::secure::connect_tls(tcp, std::sync::Arc::clone(config), host, ANSWER).map_err(|e| {
                anyhow::anyhow!(
                    "agent {addr}: {e}; check that the agent was started with --tls-cert, a certificate for \
                     '{host}' issued by --cacert (and, if it has --client-ca, give --cert/--key here)"
                )
            })?
        }
        None => Conn::Tcp(tcp),
    };
    let _ = stream.set_write_timeout(Some(SILENCE));
    let nonce = match recv_within(&mut stream, ANSWER, MAX_HELLO) {
        Ok(Msg::Challenge { protocol, nonce }) if protocol == PROTOCOL => nonce,
        Ok(Msg::Challenge { protocol, .. }) => {
            return Err(UsageError(format!(
                "agent {addr} speaks protocol {protocol}, this coordinator {PROTOCOL}: run the same throng version \
                 everywhere"
            ))
            .into());
        }
        Ok(other) => {
            return Err(anyhow::anyhow!(
                "agent {addr}: expected a challenge, got a {} message",
                other.name()
            ));
        }
        Err(e) => {
            let hint = match (&e, access.tls.is_some()) {
                (WireError::Timeout(_) | WireError::Closed, false) => {
                    " (an agent started with --tls-cert needs --cacert here; an older throng agent says nothing)"
                }
                (WireError::Timeout(_) | WireError::Closed, true) => {
                    " (an agent started with --client-ca refuses a coordinator without a certificate that CA issued: \
                     give --cert/--key here)"
                }
                _ => "",
            };
            return Err(anyhow::anyhow!("agent {addr}: {e}{hint}"));
        }
    };
    let asked = now_ms();
    send(
        &mut stream,
        &Msg::Hello {
            protocol: PROTOCOL,
            proof: super::secure::proof(&access.token, &nonce),
            resume: resume.map(str::to_string),
        },
    )
    .map_err(|e| anyhow::anyhow!("agent {addr}: {e}"))?;
    let answer = recv_within(&mut stream, ANSWER, MAX_HELLO).map_err(|e| anyhow::anyhow!("agent {addr}: {e}"))?;
    let heard = now_ms();
    match answer {
        Msg::Welcome {
            version,
            unix_ms,
            nofile,
        } => {
            let ours = env!("CARGO_PKG_VERSION");
            if version != ours {
                return Err(UsageError(format!(
                    "agent {addr} runs throng {}, this is {ours}: run the same version everywhere",
                    super::shown(&version)
                ))
                .into());
            }
            let middle = asked.midpoint(heard);
            let offset = unix_ms.abs_diff(middle);
            let signed = i64::try_from(offset).unwrap_or(i64::MAX) * if unix_ms >= middle { 1 } else { -1 };
            if offset > MAX_OFFSET_MS + (heard - asked) / 2 {
                return Err(UsageError(format!(
                    "agent {addr}: its clock is {offset} ms off this one's, more than {MAX_OFFSET_MS} ms: the \
                     agents would not start together; sync the clocks (NTP)"
                ))
                .into());
            }
            let share = connections.map_or(0, |c| c.div_ceil(n as u64));
            if share + 64 > nofile {
                return Err(UsageError(format!(
                    "agent {addr}: may open {nofile} files, too few for its share of {share} connections; raise \
                     its limit (ulimit -n) or add agents"
                ))
                .into());
            }
            Ok(Agent {
                addr: addr.to_string(),
                seat: 0,
                stream,
                offset_ms: signed,
                round_trip_ms: heard - asked,
                reconnects: 0,
            })
        }
        Msg::Refused { reason } => Err(UsageError(format!("agent {addr} refused: {}", super::shown(&reason))).into()),
        other => Err(anyhow::anyhow!(
            "agent {addr}: expected a welcome, got a {} message",
            other.name()
        )),
    }
}

/// Waits for the agent to say its run started; its refusal is the error.
fn started(a: &mut Agent) -> anyhow::Result<()> {
    let addr = &a.addr;
    let deadline = Instant::now() + STARTING;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(anyhow::anyhow!(
                "agent {addr}: did not say its run started within {} s of its orders (this coordinator's wait ran \
                 out); see the agent's log",
                STARTING.as_secs()
            ));
        }
        let msg = recv(&mut a.stream, left).map_err(|e| match e {
            WireError::Closed => anyhow::anyhow!(
                "agent {addr}: the connection closed before the agent said its run started (an agent gives up on a \
                 coordinator silent for {} s after its welcome, or preparing the run for over {} s: its log says \
                 which wait ran out)",
                SILENCE.as_secs(),
                super::PREPARE.as_secs()
            ),
            e => anyhow::anyhow!("agent {addr}: {e}"),
        })?;
        match msg {
            Msg::Started => return Ok(()),
            Msg::Alive { .. } => {}
            Msg::Done { exit_code, error, .. } => {
                let e = format!("agent {addr} could not start the run: {}", super::shown(&error));
                return Err(if exit_code == 2 {
                    UsageError(e).into()
                } else {
                    anyhow::anyhow!(e)
                });
            }
            other => {
                return Err(anyhow::anyhow!(
                    "agent {addr}: expected started, got a {} message",
                    other.name()
                ));
            }
        }
    }
}

/// Follows every agent to its end: says alive every second, merges their
/// live figures into `view`, passes Ctrl-C (and a threshold that fails
/// and stops the run) on as a stop, and collects how each part ended, and the
/// threshold that stopped the run.
pub(super) fn follow(
    agents: &mut [Agent],
    view: &mut super::live::LiveView,
    control: &throng_engine::Control,
    (access, run_id): (&Access, &str),
    mut journal: Option<&mut Journaled>,
) -> anyhow::Result<(Parts, Option<String>)> {
    let (tx, rx) = mpsc::channel();
    for (i, a) in agents.iter().enumerate() {
        let mut reader = a.stream.try_clone().context("cloning an agent's connection")?;
        let tx = tx.clone();
        let (addr, access, run_id) = (a.addr.clone(), access.clone(), run_id.to_string());
        std::thread::Builder::new()
            .name(format!("throng-coord-{i}"))
            .spawn(move || {
                loop {
                    let mut msg = recv(&mut reader, SILENCE);
                    if matches!(msg, Err(WireError::Closed | WireError::Timeout(_))) {
                        match reconnect(&addr, &access, &run_id) {
                            Ok(back) => {
                                let writer = back.try_clone();
                                reader = back;
                                if let Ok(w) = writer
                                    && tx.send((i, Heard::Back(w))).is_ok()
                                {
                                    continue;
                                }
                                return;
                            }
                            Err(why) => {
                                msg = Err(WireError::Io(std::io::Error::other(why)));
                            }
                        }
                    }
                    let end = !matches!(msg, Ok(Msg::Alive { .. } | Msg::Live { .. }));
                    if tx.send((i, Heard::Msg(msg))).is_err() || end {
                        return;
                    }
                }
            })
            .context("starting a thread")?;
    }
    drop(tx);
    let mut parts: Vec<Option<Part>> = agents.iter().map(|_| None).collect();
    let mut stop_sent = false;
    let mut aborted = None;
    let mut last_alive = Instant::now();
    let mut journal_failed = false;
    while parts.iter().any(Option::is_none) {
        if (control.was_interrupted() || aborted.is_some()) && !stop_sent {
            stop_sent = true;
            for (a, p) in agents.iter_mut().zip(&parts) {
                if p.is_none() {
                    let _ = send(&mut a.stream, &Msg::Stop);
                }
            }
        }
        if last_alive.elapsed() >= Duration::from_secs(1) {
            last_alive = Instant::now();
            if let Some(failed) = view.tick()
                && aborted.is_none()
            {
                say!(
                    "throng: coordinate: threshold {failed} failed on the merged figures: stopping every agent ({})",
                    view.abort_flag()
                );
                aborted = Some(format!("({}): threshold {failed}", view.abort_flag()));
                continue;
            }
            // Every agent, also one whose part ended: it waits to hear that
            // its result was collected.
            for a in agents.iter_mut() {
                let _ = send(&mut a.stream, &Msg::Alive { seq: 0 });
            }
            if let Some((path, j)) = journal.as_deref_mut() {
                for (i, s) in j.seqs.iter_mut().enumerate() {
                    *s = view.seq_of(i);
                }
                // An agent not heard of here (a resume did not reach it)
                // keeps what the journal had.
                j.figures = (0..j.agents.len())
                    .map(|i| {
                        view.last_of(i)
                            .map(|(ended, ok)| [ended, ok])
                            .or_else(|| j.figures.get(i).copied().flatten())
                    })
                    .collect();
                if let Err(e) = j.write(path)
                    && !journal_failed
                {
                    journal_failed = true;
                    say!("throng: coordinate: --journal {}: {e}", path.display());
                }
            }
        }
        let Ok((i, msg)) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let msg = match msg {
            Heard::Msg(msg) => msg,
            Heard::Back(conn) => {
                say!(
                    "throng: coordinate: agent {}: reconnected; its run goes on",
                    agents[i].addr
                );
                agents[i].stream = conn;
                agents[i].reconnects += 1;
                if stop_sent {
                    let _ = send(&mut agents[i].stream, &Msg::Stop);
                }
                continue;
            }
        };
        let part = match msg {
            Ok(Msg::Alive { .. }) => continue,
            Ok(Msg::Live { seq, figures }) => {
                view.update(agents[i].seat, seq, &figures);
                continue;
            }
            Ok(Msg::Done {
                exit_code,
                result,
                error,
            }) => Part::Done {
                exit_code,
                result,
                error,
            },
            Ok(other) => Part::Missing(format!("sent a {} message during the run", other.name())),
            Err(WireError::Closed) => Part::Missing("the connection closed during the run (did the agent die?)".into()),
            Err(WireError::Timeout(_)) => Part::Missing(format!("said nothing for {} s", SILENCE.as_secs())),
            Err(e) => Part::Missing(e.to_string()),
        };
        let part = match part {
            Part::Missing(why) => Part::Missing(match view.last_of(agents[i].seat) {
                Some((ended, ok)) => format!("{why}; its last live figures: {ended} requests ({ok} ok)"),
                None => format!("{why}; it sent no live figures"),
            }),
            done => done,
        };
        if let Some(slot) = parts.get_mut(i) {
            *slot = Some(part);
        }
    }
    let seats = agents.iter().map(|a| a.seat);
    Ok((
        seats.zip(parts).filter_map(|(seat, p)| p.map(|p| (seat, p))).collect(),
        aborted,
    ))
}

/// What an agent's reader thread heard.
enum Heard {
    Msg(Result<Msg, WireError>),
    /// The connection broke and was made again: the new one, to write on.
    Back(Conn),
}

/// Connects to an agent again, for [`RECONNECT`] at most, and resumes
/// `run_id` there: the new connection, or why it could not be made.
fn reconnect(addr: &str, access: &Access, run_id: &str) -> Result<Conn, String> {
    let deadline = Instant::now() + RECONNECT;
    let mut last = String::new();
    while Instant::now() < deadline {
        match greet(addr, access, None, 1, Some(run_id)) {
            Ok(a) => return Ok(a.stream),
            Err(e) => last = format!("{e:#}"),
        }
        if last.contains("refused") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500).min(deadline.saturating_duration_since(Instant::now())));
    }
    Err(format!(
        "its connection broke and did not come back within {} s ({last})",
        RECONNECT.as_secs()
    ))
}

/// Merges the parts (each of its segment, `agents` those that were
/// followed), shows and pushes the merged totals (`view`), writes
/// --json/--html, prints the report, and says how the whole ended.
pub(super) fn finish(
    c: &CoordinateCmd,
    agents: &[Agent],
    points: &[String],
    parts: Parts,
    aborted: Option<String>,
    (once, once_notes): (Vec<throng_engine::OnceRun>, Vec<String>),
    view: &super::live::LiveView,
) -> anyhow::Result<ExitCode> {
    let mut results = Vec::new();
    // The agent each result is of.
    let mut of_agent = Vec::new();
    let mut notes = Vec::new();
    let mut missing = Vec::new();
    for (i, part) in parts {
        let segment = format!("{}:{}", points[i], points[i + 1]);
        let addr = c.agents.get(i).map_or("?", String::as_str);
        // An agent a resumed coordinator did not reach was not greeted.
        let clock = agents.iter().find(|a| a.seat == i).map(clock_note);
        match read_part(part) {
            Ok(r) => {
                notes.push(format!(
                    "agent {addr}: segment {segment}: {} requests ({} ok)",
                    r.measurements.requests.ended(),
                    r.measurements.requests.ok
                ));
                notes.extend(clock);
                results.push(r);
                of_agent.push(i);
            }
            Err(why) => {
                say!("throng: coordinate: agent {addr}: segment {segment} is missing: {why}");
                notes.push(format!("agent {addr}: segment {segment} MISSING: {why}"));
                notes.extend(clock);
                missing.push(addr.to_string());
            }
        }
    }
    if results.is_empty() {
        return Err(anyhow::anyhow!(
            "no agent returned a result ({}); nothing to merge",
            notes.join("; ")
        ));
    }
    let merged = RunResult::merge(&results).context("merging the agents' results")?;
    // The setup's and teardown's rows, once for the whole run.
    let once_said: Vec<String> = once
        .iter()
        .map(|o| format!("{} (by the coordinator)", o.note))
        .collect();
    let (mut merged, left_out) = throng_engine::add_once_rows(merged, once);
    merged.notes.extend(once_said);
    merged.notes.extend(once_notes);
    merged.notes.extend(left_out);
    merged.notes.extend(notes);
    if let Some(failed) = &aborted {
        // Stopped by a verdict, as a single run's abort: not a signal.
        merged.interrupted = false;
        merged
            .notes
            .push(format!("stopped early {failed} failed on the agents' merged figures"));
    }
    // The final point of the live series is the merged result's totals.
    let per_agent: Vec<(usize, &throng_metrics::Measurements)> = of_agent
        .iter()
        .zip(&results)
        .map(|(&i, r)| (i, &r.measurements))
        .collect();
    let (remote_write, otlp) = view.finished(&merged.measurements, &per_agent);
    merged.remote_write = with_agents(remote_write, merged.remote_write.take());
    merged.otlp = with_agents(otlp, merged.otlp.take());
    if let Some(path) = &c.json {
        crate::commands::shared::write_result(path, &merged)?;
    }
    if let Some(path) = &c.html {
        crate::commands::shared::write_html(path, &merged)?;
    }
    crate::commands::shared::print_report(throng_report::View::Text, &merged)?;
    say!(
        "throng: coordinate: merged the results of {} of {} agents{}: {} requests ({} ok)",
        results.len(),
        c.agents.len(),
        c.json
            .as_ref()
            .map_or_else(String::new, |p| format!(" into '{}'", p.display())),
        merged.measurements.requests.ended(),
        merged.measurements.requests.ok,
    );
    let mut outcome = crate::commands::shared::run_outcome(&merged);
    if aborted.is_some() {
        outcome = Outcome::Thresholds;
    }
    if !missing.is_empty() && outcome != Outcome::Interrupted {
        if c.allow_missing {
            say!(
                "throng: coordinate: missing {} (--allow-missing: the result says so)",
                missing.join(", ")
            );
        } else {
            say!(
                "throng: coordinate: missing {}; the merged result names the missing segments; --allow-missing accepts it",
                missing.join(", ")
            );
            return Ok(Outcome::Failed.into());
        }
    }
    Ok(outcome.into())
}

/// What the coordinator's push did, and the agents' own pushes (a command
/// with --remote-write/--otlp) added to it: one record of every sample.
fn with_agents(
    ours: Option<throng_result::PushRecord>,
    theirs: Option<throng_result::PushRecord>,
) -> Option<throng_result::PushRecord> {
    match (ours, theirs) {
        (Some(mut a), Some(b)) => {
            a.add(&b);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

/// How far the agent's clock was from this one's when it was greeted.
fn clock_note(a: &Agent) -> String {
    let again = match a.reconnects {
        0 => String::new(),
        n => format!("; its connection broke and was made again {n} time(s)"),
    };
    format!(
        "agent {}: clock offset {:+} ms (measured over a {} ms round trip){again}",
        a.addr, a.offset_ms, a.round_trip_ms
    )
}

/// An agent's result, checked as `throng merge` checks a file.
fn read_part(part: Part) -> Result<RunResult, String> {
    let (exit_code, result, error) = match part {
        Part::Missing(why) => return Err(why),
        Part::Done {
            exit_code,
            result,
            error,
        } => (exit_code, result, error),
    };
    let Some(text) = result else {
        return Err(format!(
            "its run ended (exit {exit_code}) without a result: {}",
            super::shown(&error)
        ));
    };
    let runs = throng_result::Document::from_reader(text.as_bytes())
        .map_err(|e| format!("its result does not read: {e}"))?
        .into_runs();
    let one = RunResult::merge_sequential(&runs).map_err(|e| format!("its result does not add up: {e}"))?;
    one.books()
        .map_err(|p| format!("the books of its result do not balance: {p}"))?;
    Ok(one)
}
