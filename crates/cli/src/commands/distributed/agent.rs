//! `throng agent`: waits for a coordinator, runs its segment as a child
//! process of this binary, sends the result back.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::{
    Conn, KEEP_RESULT, MAX_HELLO, Msg, ORPHANED, PREPARE, PROTOCOL, RECONNECT, SILENCE, WireError, now_ms, read_token,
    recv, recv_within, same_token, send,
};
use crate::args::AgentCmd;
use crate::exit::UsageError;

/// How long a coordinator has for its hello (its run comes within
/// [`PREPARE`], Alive every second until then).
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long an interrupted run has to write its result before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);
/// How much of the child's stderr goes back in an error.
const STDERR_TAIL: usize = 2000;

pub fn run(c: AgentCmd) -> anyhow::Result<ExitCode> {
    let token = read_token(c.token_file.as_deref())?;
    let tls = server_tls(&c)?;
    let listener = TcpListener::bind(c.listen).map_err(|e| {
        UsageError(format!(
            "--listen {}: cannot listen there: {e}; give a free port on an address of this machine",
            c.listen
        ))
    })?;
    let addr = listener.local_addr().unwrap_or(c.listen);
    if token.is_empty() && !addr.ip().is_loopback() {
        say!("throng: agent: warning: no --token-file: anyone who reaches {addr} can make this agent run a load test");
    }
    say!(
        "throng: agent listening on {addr} (throng {}{})",
        env!("CARGO_PKG_VERSION"),
        match (&tls, c.client_ca.is_some()) {
            (None, _) => ", plain TCP",
            (Some(_), false) => ", TLS",
            (Some(_), true) => ", TLS, coordinators with a certificate of --client-ca only",
        }
    );
    listener
        .set_nonblocking(true)
        .map_err(|e| anyhow::anyhow!("--listen {addr}: {e}"))?;
    let state = Arc::new(State {
        token,
        tls,
        busy: AtomicBool::new(false),
        served: AtomicU64::new(0),
        running: std::sync::Mutex::new(None),
        greeting: AtomicUsize::new(0),
    });
    while c.runs.is_none_or(|n| state.served.load(Ordering::SeqCst) < n) {
        let (stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => {
                say!("throng: agent: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        // Each connection on a thread of its own, so that a peer that says
        // nothing holds up no one; at most MAX_GREETING at once.
        if state.greeting.fetch_add(1, Ordering::SeqCst) >= MAX_GREETING {
            state.greeting.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let state2 = Arc::clone(&state);
        let spawned = std::thread::Builder::new().name("throng-agent".into()).spawn(move || {
            let _ = stream.set_nonblocking(false);
            let outcome = serve(stream, &state2);
            state2.greeting.fetch_sub(1, Ordering::SeqCst);
            match outcome {
                Ok(Served::Ran) => say!("throng: agent: run for {peer} finished"),
                Ok(Served::Resumed) => say!("throng: agent: {peer} reconnected: the run goes on there"),
                Ok(Served::Refused(why)) => say!("throng: agent: refused {peer}: {why}"),
                Err(e) => say!("throng: agent: {peer}: {e}"),
            }
        });
        if spawned.is_err() {
            state.greeting.fetch_sub(1, Ordering::SeqCst);
        }
    }
    // The last run's report is on its way: let it go out.
    while state.greeting.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(ExitCode::SUCCESS)
}

/// Most connections served at once (one of them running, the others
/// greeted and refused).
const MAX_GREETING: usize = 16;

/// What the connections share.
struct State {
    token: String,
    /// The TLS every connection speaks, when --tls-cert was given.
    tls: Option<Arc<throng_tls::rustls::ServerConfig>>,
    /// A run is under way (one at a time).
    busy: AtomicBool,
    /// Runs served.
    served: AtomicU64,
    /// The run under way: its name, and where a coordinator that
    /// reconnects hands its connection over.
    running: std::sync::Mutex<Option<(String, mpsc::Sender<Conn>)>>,
    /// Connections being served.
    greeting: AtomicUsize,
}

enum Served {
    Ran,
    Resumed,
    Refused(String),
}

/// The TLS configuration of --tls-cert/--tls-key/--client-ca; the files
/// read bounded, every error naming its flag.
fn server_tls(c: &AgentCmd) -> Result<Option<Arc<throng_tls::rustls::ServerConfig>>, UsageError> {
    let read = |flag: &str, path: &std::path::Path| {
        throng_plan::input::read_limited(path, throng_plan::input::MAX_PEM_BYTES)
            .map(|bytes| (path.display().to_string(), bytes))
            .map_err(|e| UsageError(format!("{flag} {}: {e}; give a PEM file", path.display())))
    };
    let (Some(cert), Some(key)) = (&c.tls_cert, &c.tls_key) else {
        return Ok(None);
    };
    let cert = read("--tls-cert", cert)?;
    let key = read("--tls-key", key)?;
    let ca = match &c.client_ca {
        Some(p) => Some(read("--client-ca", p)?),
        None => None,
    };
    let config = throng_tls::server_config_named(["--tls-cert", "--tls-key", "--client-ca"], &cert, &key, ca.as_ref())
        .map_err(|e| UsageError(e.to_string()))?;
    let mut config = (*config).clone();
    config.alpn_protocols = vec![super::secure::ALPN.to_vec()];
    Ok(Some(Arc::new(config)))
}

/// One connection, to its end.
fn serve(stream: TcpStream, state: &State) -> Result<Served, WireError> {
    let _ = stream.set_nodelay(true);
    let conn = match &state.tls {
        Some(config) => match super::secure::accept_tls(stream, Arc::clone(config), HANDSHAKE) {
            Ok(conn) => conn,
            Err(why) => return Ok(Served::Refused(why)),
        },
        None => Conn::Tcp(stream),
    };
    let outcome = serve_one(conn, state);
    if matches!(outcome, Ok(Served::Ran)) {
        state.served.fetch_add(1, Ordering::SeqCst);
    }
    outcome
}

/// One coordinator's connection: challenged, then (when no other run is
/// under way) its run.
fn serve_one(mut stream: Conn, state: &State) -> Result<Served, WireError> {
    let token = state.token.as_str();
    let _ = stream.set_write_timeout(Some(SILENCE));
    let refuse = |stream: &mut Conn, why: String| {
        let _ = send(stream, &Msg::Refused { reason: why.clone() });
        Ok(Served::Refused(why))
    };
    let nonce = super::secure::nonce().map_err(|e| WireError::Io(std::io::Error::other(e)))?;
    send(
        &mut stream,
        &Msg::Challenge {
            protocol: PROTOCOL,
            nonce: nonce.clone(),
        },
    )?;
    let resume = match recv_within(&mut stream, HANDSHAKE, MAX_HELLO)? {
        Msg::Hello {
            protocol,
            proof,
            resume,
        } => {
            if !token.is_empty() && proof.is_empty() {
                return refuse(
                    &mut stream,
                    "no token: this agent requires one; give `throng coordinate` the --token-file it was started \
                     with"
                        .into(),
                );
            }
            if !same_token(&proof, &super::secure::proof(token, &nonce)) && !token.is_empty() {
                return refuse(
                    &mut stream,
                    "wrong token: give `throng coordinate` the --token-file this agent was started with".into(),
                );
            }
            if protocol != PROTOCOL {
                return refuse(
                    &mut stream,
                    format!("protocol {protocol}, this agent speaks {PROTOCOL}: run the same throng version on both"),
                );
            }
            resume
        }
        other => return refuse(&mut stream, format!("expected a hello, got a {} message", other.name())),
    };
    if let Some(run_id) = resume {
        return hand_over(stream, state, &run_id);
    }
    if state.busy.swap(true, Ordering::SeqCst) {
        return refuse(
            &mut stream,
            format!(
                "busy: running another coordinator's test (or keeping the result of one whose coordinator vanished, \
                 for up to {} s after it ended); try again when it ends",
                KEEP_RESULT.as_secs()
            ),
        );
    }
    let outcome = run_orders(&mut stream, state);
    if let Ok(mut running) = state.running.lock() {
        *running = None;
    }
    state.busy.store(false, Ordering::SeqCst);
    outcome
}

/// A coordinator that reconnected: its connection goes to the run it
/// names, when that is the one under way.
fn hand_over(mut stream: Conn, state: &State, run_id: &str) -> Result<Served, WireError> {
    let running = state.running.lock().ok().and_then(|r| r.clone());
    let Some((_, tx)) = running.filter(|(id, _)| same_token(id, run_id)) else {
        let why = format!(
            "{}: it is not the run under way (if any), and no result of it is kept (its result was \
             collected, or dropped {} s after its part ended, or the agent restarted); start a new run with \
             `throng coordinate --agents ...`",
            super::NO_SUCH_RUN,
            KEEP_RESULT.as_secs()
        );
        let _ = send(&mut stream, &Msg::Refused { reason: why.clone() });
        return Ok(Served::Refused(why));
    };
    send(&mut stream, &welcome())?;
    tx.send(stream)
        .map_err(|_| WireError::Io(std::io::Error::other("the run ended meanwhile")))?;
    Ok(Served::Resumed)
}

fn welcome() -> Msg {
    Msg::Welcome {
        version: env!("CARGO_PKG_VERSION").to_string(),
        unix_ms: now_ms(),
        nofile: throng_engine::sys::fd_limits().1,
    }
}

/// Welcomes an authenticated coordinator and runs what it sends.
fn run_orders(stream: &mut Conn, state: &State) -> Result<Served, WireError> {
    let refuse = |stream: &mut Conn, why: String| {
        let _ = send(stream, &Msg::Refused { reason: why.clone() });
        Ok(Served::Refused(why))
    };
    send(stream, &welcome())?;
    let (command, segment, sequence, start_at, files, setup, run_id, resumable) = match wait_for_run(stream)? {
        Msg::Run {
            command,
            segment,
            sequence,
            start_at_unix_ms,
            files,
            setup,
            run_id,
            resumable,
        } => (
            command,
            segment,
            sequence,
            start_at_unix_ms,
            files,
            setup,
            run_id,
            resumable,
        ),
        Msg::Stop => return Ok(Served::Refused("the coordinator gave up before the run".into())),
        other => return refuse(stream, format!("expected a run, got a {} message", other.name())),
    };
    let dir = scratch_dir().map_err(WireError::Io)?;
    let outcome = match unpack(&command, &files, setup.as_ref(), &dir) {
        Ok(command) => {
            let (tx, resumes) = mpsc::channel();
            if let Ok(mut running) = state.running.lock()
                && !run_id.is_empty()
            {
                *running = Some((run_id, tx));
            }
            let part = Part {
                command: &command,
                segment: &segment,
                sequence: &sequence,
                start_at,
                resumable,
            };
            run_child(stream, &dir, &part, &resumes).map(|()| Served::Ran)
        }
        Err(why) => {
            let done = Msg::Done {
                exit_code: 2,
                result: None,
                error: why.clone(),
            };
            send(stream, &done).map(|()| Served::Refused(why))
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// The coordinator's first order after the welcome: it says Alive every
/// second while it prepares the run (greets the other agents, writes its
/// journal), so it is waited for while it says so, for [`PREPARE`] at most,
/// and is gone once silent for [`SILENCE`].
fn wait_for_run(stream: &mut Conn) -> Result<Msg, WireError> {
    let deadline = Instant::now() + PREPARE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WireError::Io(std::io::Error::other(format!(
                "the coordinator prepared its run for more than {} s after this agent's welcome (it said it was \
                 alive, but sent no run): given up; waiting for the next coordinator",
                PREPARE.as_secs()
            ))));
        }
        match recv(stream, SILENCE.min(left)) {
            Ok(Msg::Alive { .. }) => {}
            Ok(msg) => return Ok(msg),
            Err(WireError::Timeout(_)) if left > SILENCE => {
                return Err(WireError::Io(std::io::Error::other(format!(
                    "the coordinator said nothing for {} s after this agent's welcome (neither its run nor that it is \
                     alive): it is gone; waiting for the next one",
                    SILENCE.as_secs()
                ))));
            }
            Err(WireError::Timeout(_)) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes the shipped files into `dir`, points the command at them, and
/// checks it: a command that would read any other file is refused.
fn unpack(
    command: &[String],
    files: &[super::files::Shipped],
    setup: Option<&std::collections::HashMap<String, String>>,
    dir: &std::path::Path,
) -> Result<Vec<String>, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let (mut command, mut contents) = super::files::rewrite(command, files, dir)?;
    let captures = dir.join("setup.json");
    if let Some(vars) = setup {
        let json = serde_json::to_vec(vars).map_err(|e| format!("cannot write the setup's captures: {e}"))?;
        contents.push((captures.clone(), json));
    }
    for (path, bytes) in &contents {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot write a shipped file: {e}"))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
            .map_err(|e| format!("cannot write a shipped file: {e}"))?;
    }
    let parsed = super::command::check_command(&command).map_err(|e| e.0)?;
    super::files::only_in(&parsed, dir).map_err(|p| {
        format!("the command reads '{p}' on this agent's machine; a coordinator ships every file a command reads")
    })?;
    if let super::command::Coordinated::Run(run) = &parsed {
        // Every file the scenario names is a clean name beside it, so one
        // shipped (or missing): never one of this machine's.
        crate::commands::run::plan_files(run).map_err(|e| format!("{e:#}"))?;
        if setup.is_some() {
            command.push("--setup-captures".into());
            command.push(captures.display().to_string());
        }
    }
    Ok(command)
}

/// A private directory for the child's result and stderr.
fn scratch_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("throng-agent-{}-{n}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// What the child runs.
struct Part<'a> {
    command: &'a [String],
    segment: &'a str,
    sequence: &'a str,
    start_at: u64,
    /// Its coordinator keeps a journal: without it the part runs to its
    /// end and its result waits for a `--resume`.
    resumable: bool,
}

/// Runs the command as a child (its segment, its start), tells the
/// coordinator it started, says it is alive every second, passes a stop on,
/// and sends the result back.
fn run_child(
    stream: &mut Conn,
    dir: &std::path::Path,
    part: &Part<'_>,
    resumes: &mpsc::Receiver<Conn>,
) -> Result<(), WireError> {
    let Part {
        command,
        segment,
        sequence,
        start_at,
        resumable,
    } = *part;
    let result_path = dir.join("result.json");
    let stderr_path = dir.join("stderr.txt");
    let stderr = std::fs::File::create(&stderr_path).map_err(WireError::Io)?;
    let exe = std::env::current_exe().map_err(WireError::Io)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(command)
        .args(["--segment", segment, "--segment-sequence", sequence, "--start-at"])
        .arg(start_at.to_string())
        .arg("--json")
        .arg(&result_path)
        .arg("--quiet")
        .arg("--live-snapshots")
        .arg(dir.join("live.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    crate::commands::shared::die_with_this_process(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let error = format!("cannot start the run: {e}");
            send(
                stream,
                &Msg::Done {
                    exit_code: 1,
                    result: None,
                    error,
                },
            )?;
            return Ok(());
        }
    };
    let mut orders = match send(stream, &Msg::Started).and_then(|()| listen_for_stop(stream)) {
        Ok(orders) => orders,
        Err(e) => {
            // No coordinator to run it for: the run ends before it starts.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let (exit_code, gone) = watch_child(
        stream,
        &mut child,
        (&mut orders, resumes),
        (&dir.join("live.json"), resumable),
    );
    let error = if exit_code == 0 || exit_code == 99 {
        String::new()
    } else {
        stderr_tail(&stderr_path)
    };
    let result = read_result(&result_path);
    let (result, error) = match result {
        Ok(r) => (r, error),
        Err(why) => (
            None,
            format!("{error}{}{why}", if error.is_empty() { "" } else { "; " }),
        ),
    };
    let done = Msg::Done {
        exit_code,
        result,
        error,
    };
    if resumable {
        keep_until_collected(stream, &done, (&mut orders, resumes), gone.is_none())
    } else {
        if let Some(at) = gone {
            // The result waits for the coordinator, as long as it may take.
            match resumes.recv_timeout(RECONNECT.saturating_sub(at.elapsed())) {
                Ok(conn) => *stream = conn,
                Err(_) => {
                    say!("throng: agent: the coordinator did not come back; the run's result is dropped");
                }
            }
        }
        send(stream, &done)
    }
}

/// Sends the part's end (`done`) to its coordinator, and again to every one
/// that resumes the run, until one says it collected it; for
/// [`KEEP_RESULT`] at most. `connected`: the coordinator is still there.
fn keep_until_collected(
    stream: &mut Conn,
    done: &Msg,
    (orders, resumes): (&mut mpsc::Receiver<&'static str>, &mpsc::Receiver<Conn>),
    connected: bool,
) -> Result<(), WireError> {
    let deadline = Instant::now() + KEEP_RESULT;
    let mut sent = connected && send(stream, done).is_ok();
    let mut said = false;
    while Instant::now() < deadline {
        if sent {
            match orders.recv_timeout(Duration::from_millis(200)) {
                Ok(COLLECTED) => return Ok(()),
                // A stop for a part that ended changes nothing.
                Ok(why) if why != GONE => {}
                Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => sent = false,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            continue;
        }
        if !said {
            said = true;
            say!(
                "throng: agent: the part ended without its coordinator: keeping its result for up to {} s for a \
                 reconnect or `throng coordinate --resume`",
                KEEP_RESULT.as_secs()
            );
        }
        if orders.try_iter().any(|why| why == COLLECTED) {
            return Ok(());
        }
        if let Ok(conn) = resumes.recv_timeout(Duration::from_millis(200)) {
            *stream = conn;
            sent = send(stream, done).is_ok();
            match listen_for_stop(stream) {
                Ok(rx) => *orders = rx,
                Err(_) => sent = false,
            }
        }
    }
    say!(
        "throng: agent: nobody collected the run's result within {} s; it is dropped",
        KEEP_RESULT.as_secs()
    );
    Ok(())
}

/// Reads the coordinator's messages on another thread: a stop, its
/// collecting the result, or the coordinator gone (closed, garbage, or
/// silent for [`SILENCE`]) arrive on the channel; the collecting, the
/// connection closed and garbage end it.
fn listen_for_stop(stream: &Conn) -> Result<mpsc::Receiver<&'static str>, WireError> {
    let mut reader = stream.try_clone().map_err(WireError::Io)?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("throng-agent-rx".into())
        .spawn(move || {
            loop {
                match recv_within(&mut reader, SILENCE, MAX_HELLO) {
                    Ok(Msg::Alive { .. }) => {}
                    Ok(Msg::Stop) => {
                        // Still listening: the coordinator says when it
                        // collected the result.
                        if tx.send("the coordinator stopped the run").is_err() {
                            return;
                        }
                    }
                    Ok(Msg::Collected) => {
                        let _ = tx.send(COLLECTED);
                        return;
                    }
                    // A coordinator silent for a while (a slow teardown,
                    // a long merge) is gone for now, but may still say it
                    // collected the result.
                    Err(WireError::Timeout(_)) => {
                        if tx.send(GONE).is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(_) => {
                        let _ = tx.send(GONE);
                        return;
                    }
                }
            }
        })
        .map_err(WireError::Io)?;
    Ok(rx)
}

/// Waits for the child, saying alive every second and interrupting it on
/// a stop (killing it if it does not end within [`STOP_GRACE`] after). A
/// coordinator that is gone has [`RECONNECT`] to come back (a connection
/// from `resumes`) before the run is stopped; one that keeps a journal
/// (`resumable`) leaves the run to its end ([`ORPHANED`] at most). Returns
/// the child's exit code (-1 when it died of a signal), and since when the
/// coordinator is gone if it is.
fn watch_child(
    stream: &mut Conn,
    child: &mut Child,
    (orders, resumes): (&mut mpsc::Receiver<&'static str>, &mpsc::Receiver<Conn>),
    (live, resumable): (&std::path::Path, bool),
) -> (i32, Option<Instant>) {
    let orphaned = if resumable { ORPHANED } else { RECONNECT };
    let mut seq = 0u64;
    let mut last_live = None;
    let mut last_alive = Instant::now();
    let mut stopped: Option<Instant> = None;
    let mut gone: Option<Instant> = None;
    loop {
        if let Ok(conn) = resumes.try_recv() {
            *stream = conn;
            match listen_for_stop(stream) {
                Ok(rx) => {
                    say!("throng: agent: the coordinator is back: the run goes on");
                    *orders = rx;
                    gone = None;
                    // Everything so far, again: the coordinator keeps the latest.
                    last_live = None;
                }
                Err(_) => gone = gone.or(Some(Instant::now())),
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => return (status.code().unwrap_or(-1), gone),
            Ok(None) => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return (-1, gone);
            }
        }
        if stopped.is_none()
            && gone.is_none()
            && let Ok(why) = orders.try_recv()
        {
            if why == GONE {
                say!("throng: agent: {why}: {}", going_on(resumable));
                gone = Some(Instant::now());
            } else {
                say!("throng: agent: {why}: stopping the run");
                interrupt(child);
                stopped = Some(Instant::now());
            }
        }
        if stopped.is_none() && gone.is_some_and(|at| at.elapsed() > orphaned) {
            say!("throng: agent: the coordinator did not come back: stopping the run");
            interrupt(child);
            stopped = Some(Instant::now());
        }
        if stopped.is_some_and(|at| at.elapsed() > STOP_GRACE) {
            let _ = child.kill();
        }
        if gone.is_none() && last_alive.elapsed() >= Duration::from_secs(1) {
            seq += 1;
            last_alive = Instant::now();
            let msg = match fresh_snapshot(live, &mut last_live) {
                Some(figures) => Msg::Live { seq, figures },
                None => Msg::Alive { seq },
            };
            if send(stream, &msg).is_err() {
                say!("throng: agent: {GONE}: {}", going_on(resumable));
                gone = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the stop listener says when the coordinator's connection ended.
const GONE: &str = "the coordinator is gone";
/// What it says when the coordinator has the part's result.
const COLLECTED: &str = "the coordinator collected the result";

/// What happens to a run whose coordinator is gone.
fn going_on(resumable: bool) -> String {
    if resumable {
        format!(
            "the run goes on to its end (at most {} s more; its coordinator keeps a journal), its result kept for \
             a reconnect or `throng coordinate --resume`",
            ORPHANED.as_secs()
        )
    } else {
        format!(
            "the run goes on; waiting up to {} s for it to reconnect",
            RECONNECT.as_secs()
        )
    }
}

/// The run's latest snapshot when it changed since `last` (its time).
fn fresh_snapshot(path: &std::path::Path, last: &mut Option<std::time::SystemTime>) -> Option<String> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    if *last == Some(modified) {
        return None;
    }
    let limit = u64::from(super::MAX_FRAME) - 1024 * 1024;
    let bytes = throng_plan::input::read_limited(path, limit).ok()?;
    *last = Some(modified);
    String::from_utf8(bytes).ok()
}

fn interrupt(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill takes no pointers; the child is not reaped yet, so
        // the pid is still its.
        unsafe { libc::kill(pid, libc::SIGINT) };
    }
}

/// The child's result document, if it wrote one (at most a frame's worth).
fn read_result(path: &std::path::Path) -> Result<Option<String>, String> {
    let limit = u64::from(super::MAX_FRAME) - 1024 * 1024;
    match throng_plan::input::read_limited(path, limit) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "the result is not UTF-8".to_string()),
        Err(throng_plan::input::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(throng_plan::input::ReadError::Io(e)) => Err(format!("cannot read the result: {e}")),
        Err(_) => Err("the result is over 63 MiB, more than one message may carry".to_string()),
    }
}

/// The last lines of the child's stderr.
fn stderr_tail(path: &std::path::Path) -> String {
    use std::io::{Read as _, Seek as _};
    let mut text = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        // Only the end: a chatty run's stderr may be long.
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f.seek(std::io::SeekFrom::Start(len.saturating_sub(STDERR_TAIL as u64)));
        let _ = f.take(STDERR_TAIL as u64).read_to_end(&mut text);
    }
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}
