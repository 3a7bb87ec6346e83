//! `--io uring` leaves no descriptor behind: after runs that open a
//! connection per request, end on a stop, or fail every connect, this
//! process holds the descriptors it held before (its own test binary, so no
//! other test's sockets come and go meanwhile).

use std::time::{Duration, Instant};

use throng_engine::{Control, Progress, run_http};
use throng_lab::{LabConfig, LabServer};
use throng_plan::{HttpArgs, HttpPlan, IoModel};
use throng_result::RunResult;

/// Descriptors this process holds, less the lab server's side of its
/// connections (local port `lab_port`): those close when the lab sees ours
/// close, which a packet lost on a busy loopback can delay.
fn open_fds(lab_port: u16) -> usize {
    let entries = std::fs::read_dir("/proc/self/fd").expect("procfs");
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| local_port(fd) != Some(lab_port))
        .count()
}

/// What each descriptor is (for a failure's message).
fn describe(lab_port: u16) -> String {
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for e in std::fs::read_dir("/proc/self/fd").expect("procfs").flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if local_port(fd) == Some(lab_port) {
            continue;
        }
        let target = std::fs::read_link(e.path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let kind = if target.starts_with("socket:") {
            format!("socket, local port {:?}", local_port(fd))
        } else {
            target
        };
        *kinds.entry(kind).or_default() += 1;
    }
    format!("{kinds:?}")
}

/// The local port of socket `fd` (None: not an inet socket).
fn local_port(fd: i32) -> Option<u16> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into `addr`, which we own.
    let rc = unsafe { libc::getsockname(fd, (&raw mut addr).cast(), &raw mut len) };
    if rc != 0 {
        return None;
    }
    match i32::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: libc::sockaddr_in = unsafe { std::ptr::read((&raw const addr).cast()) };
            Some(u16::from_be(a.sin_port))
        }
        _ => None,
    }
}

fn run(url: String, args: HttpArgs) -> RunResult {
    let plan = HttpPlan::from_args(HttpArgs {
        url,
        cores: 2,
        io: IoModel::Uring,
        ..args
    })
    .expect("a valid plan");
    run_http(&plan, None, None, &Control::new(), &mut |_: &Progress| {}).expect("the run")
}

/// Waits (at most 5 s) for the descriptor count to come back to `before`.
fn settles_to(before: usize, lab_port: u16) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = open_fds(lab_port);
        if now <= before || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn uring_runs_leave_no_descriptor_behind() {
    let lab = LabServer::start(&LabConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        threads: 1,
        stall: None,
        tls: None,
    })
    .expect("lab server");
    let url = format!("http://{}/", lab.addr());
    let port = lab.addr().port();
    // A first run warms what stays for the process (the stamps primer's
    // thread, the runtime's pieces).
    let r = run(
        url.clone(),
        HttpArgs {
            requests: Some(10),
            connections: Some(2),
            ..HttpArgs::default()
        },
    );
    assert!(r.measurements.requests.is_balanced());
    let before = open_fds(port);

    for _ in 0..3 {
        let r = run(
            url.clone(),
            HttpArgs {
                requests: Some(300),
                connections: Some(6),
                threads: Some(2),
                no_keepalive: true,
                ..HttpArgs::default()
            },
        );
        let m = &r.measurements;
        // A SYN lost on a busy loopback fails a request as timeout.connect.
        assert!(
            m.requests.ok + m.requests.error("timeout.connect") == 300,
            "{:?}",
            m.requests
        );
        let r = run(
            url.clone(),
            HttpArgs {
                duration: Some(Duration::from_millis(300)),
                connections: Some(8),
                threads: Some(2),
                ..HttpArgs::default()
            },
        );
        assert!(r.measurements.requests.ok > 0 && r.measurements.requests.is_balanced());
    }
    // Nothing listens here: every connect is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let refused = format!("http://{}/", closed.local_addr().expect("its address"));
    drop(closed);
    let r = run(
        refused,
        HttpArgs {
            requests: Some(40),
            connections: Some(4),
            ..HttpArgs::default()
        },
    );
    assert_eq!(
        r.measurements.requests.error("refused"),
        r.measurements.requests.attempted
    );

    let after = settles_to(before, port);
    assert_eq!(
        after,
        before,
        "descriptors left open by --io uring runs: {}",
        describe(port)
    );
}
