//! The few facts and limits the engine reads from the OS.

use std::time::Duration;

use throng_result::{Environment, KernelSockets};

/// RLIMIT_NOFILE as (soft, hard).
pub fn fd_limits() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; RLIMIT_NOFILE is valid.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc == 0 {
        (lim.rlim_cur, lim.rlim_max)
    } else {
        (1024, 1024)
    }
}

/// Raises the soft descriptor limit to the hard limit; returns the new
/// (soft, hard). Failure leaves the limit as it was.
pub fn raise_fd_limit() -> (u64, u64) {
    let (soft, hard) = fd_limits();
    if soft < hard {
        let lim = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads the struct we own; raising soft up to hard
        // needs no privilege.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    fd_limits()
}

/// CPU time and peak memory of this process so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub system: Duration,
    /// Peak resident set size in bytes.
    pub max_rss: u64,
}

/// `getrusage(RUSAGE_SELF)`.
pub fn usage() -> Usage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Usage::default();
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Usage {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        // ru_maxrss survives execve: a throng started by a large process
        // (posix_spawn shares the parent's memory until the exec) would
        // report the parent's peak. VmHWM belongs to this image alone.
        max_rss: peak_rss().unwrap_or((ru.ru_maxrss as u64) * 1024),
    }
}

/// Peak resident memory of this program image (`VmHWM`), bytes.
fn peak_rss() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// CPU time used by the calling thread so far: (user, system).
pub fn thread_cpu() -> (Duration, Duration) {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Resident memory of this process right now, bytes (from /proc).
pub fn current_rss() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf is always safe to call.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// Logical cores available to this process.
pub fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// Host name, OS, cores and descriptor limits.
pub fn environment() -> Environment {
    let (soft, hard) = fd_limits();
    Environment {
        hostname: hostname(),
        os: uname(),
        cores: cores(),
        fd_limit_soft: soft,
        fd_limit_hard: hard,
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::from("unknown");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn uname() -> String {
    // SAFETY: utsname is plain old data; all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into the struct we own.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::from("unknown");
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&u.sysname), field(&u.release))
}

/// The kernel's TCP figures at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct KernelSample {
    /// `TCP: inuse` of /proc/net/sockstat (this network namespace).
    tcp_inuse: u64,
    /// `TCP: mem` (pages of socket buffers, machine-wide), as bytes.
    tcp_mem_bytes: u64,
    /// `Slab:` of /proc/meminfo, bytes.
    slab_bytes: u64,
}

fn kernel_sample() -> Option<KernelSample> {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let (tcp_inuse, mem_pages) = parse_sockstat(&sockstat)?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let slab_kb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("Slab:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())?;
    // SAFETY: sysconf is always safe to call.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    Some(KernelSample {
        tcp_inuse,
        tcp_mem_bytes: mem_pages.saturating_mul(page),
        slab_bytes: slab_kb.saturating_mul(1024),
    })
}

/// `TCP: inuse N orphan N tw N alloc N mem N` → (inuse, mem pages).
fn parse_sockstat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut words = line.split_whitespace();
    let (mut inuse, mut mem) = (None, None);
    while let (Some(k), Some(v)) = (words.next(), words.next()) {
        match k {
            "inuse" => inuse = v.parse().ok(),
            "mem" => mem = v.parse().ok(),
            _ => {}
        }
    }
    Some((inuse?, mem?))
}

/// How often [`KernelWatch`] samples: often enough to see a storm's
/// plateau, rarely enough to cost nothing (two small /proc reads).
const KERNEL_SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Samples the kernel's TCP sockets and slab memory on its own thread while
/// a storm runs (in this process or its worker processes), keeping the
/// start and the sample with the most sockets.
#[derive(Debug)]
pub struct KernelWatch {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Option<KernelSockets>>,
}

impl KernelWatch {
    /// Takes the first sample now; None where /proc cannot tell.
    pub fn start() -> Option<KernelWatch> {
        let first = kernel_sample()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("throng-kernel".into())
            .spawn(move || {
                let mut k = KernelSockets {
                    tcp_sockets_before: first.tcp_inuse,
                    tcp_sockets_peak: first.tcp_inuse,
                    tcp_buffer_bytes_peak: first.tcp_mem_bytes,
                    slab_growth_bytes: 0,
                };
                // Ends when told to or when the watch is dropped.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(KERNEL_SAMPLE_EVERY) {
                    let Some(s) = kernel_sample() else { continue };
                    if s.tcp_inuse > k.tcp_sockets_peak {
                        k.tcp_sockets_peak = s.tcp_inuse;
                        k.slab_growth_bytes = s.slab_bytes.saturating_sub(first.slab_bytes);
                    }
                    k.tcp_buffer_bytes_peak = k.tcp_buffer_bytes_peak.max(s.tcp_mem_bytes);
                }
                Some(k)
            })
            .ok()?;
        Some(KernelWatch { stop, thread })
    }

    /// Stops sampling; what it saw.
    pub fn finish(self) -> Option<KernelSockets> {
        let _ = self.stop.send(());
        self.thread.join().ok().flatten()
    }
}

/// How often [`MemoryWatch`] samples: each sample walks the page tables
/// of every process of the storm (`smaps_rollup`), ~0.1 ms per 40 MB.
const MEMORY_SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The proportional set size of this process and its children, summed,
/// in bytes: each page shared by several of them (the program's own, its
/// libraries) is divided among them, so the sum counts it once, where a
/// sum of RSS counts it once per process. None where /proc cannot tell.
pub fn tree_pss() -> Option<u64> {
    let mut total = pss_of("self")?;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Some(total);
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for pid in children.split_whitespace() {
            // A child that just ended has no smaps_rollup any more.
            total = total.saturating_add(pss_of(pid).unwrap_or(0));
        }
    }
    Some(total)
}

/// `Pss:` of /proc/PID/smaps_rollup, in bytes.
fn pss_of(pid: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    parse_pss(&text)
}

fn parse_pss(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Pss:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Samples [`tree_pss`] on its own thread while a storm runs, keeping the
/// largest sum seen.
#[derive(Debug)]
pub struct MemoryWatch {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<u64>,
}

impl MemoryWatch {
    /// Takes the first sample now; None where /proc cannot tell.
    pub fn start() -> Option<MemoryWatch> {
        let first = tree_pss()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("throng-memory".into())
            .spawn(move || {
                let mut peak = first;
                // Ends when told to or when the watch is dropped.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(MEMORY_SAMPLE_EVERY) {
                    peak = peak.max(tree_pss().unwrap_or(0));
                }
                peak
            })
            .ok()?;
        Some(MemoryWatch { stop, thread })
    }

    /// Stops sampling; the largest sum seen.
    pub fn finish(self) -> Option<u64> {
        let last = tree_pss().unwrap_or(0);
        let _ = self.stop.send(());
        self.thread.join().ok().map(|peak| peak.max(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_plausible() {
        let (soft, hard) = raise_fd_limit();
        assert_eq!(soft, hard);
        let u = usage();
        assert!(u.max_rss > 0);
        assert!(current_rss() > 0);
        let hwm = peak_rss().expect("Linux has VmHWM");
        assert!(hwm >= current_rss() / 2 && hwm == u.max_rss.max(hwm), "{hwm} vs {u:?}");
        let w = KernelWatch::start().expect("Linux has sockstat and meminfo");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        std::thread::sleep(KERNEL_SAMPLE_EVERY * 3);
        let k = w.finish().unwrap();
        // Other tests open sockets too: at least the listener and the two ends.
        assert!(k.tcp_sockets_peak >= k.tcp_sockets_before, "{k:?}");
        assert!(k.tcp_sockets_peak >= 3, "{k:?}");
        let env = environment();
        assert!(env.cores >= 1);
        assert!(env.os.starts_with("Linux"));
    }

    #[test]
    fn pss_is_read_and_watched() {
        let text = "55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss: 9000 kB\nPss: 4321 kB\nPss_Dirty: 10 kB\n";
        assert_eq!(parse_pss(text), Some(4321 * 1024));
        assert_eq!(parse_pss("Rss: 1 kB\n"), None);
        assert_eq!(parse_pss("Pss: lots kB\n"), None);
        let own = tree_pss().expect("Linux has smaps_rollup");
        assert!(
            own > 0 && own <= current_rss().max(peak_rss().unwrap_or(0)) * 2,
            "{own}"
        );
        let w = MemoryWatch::start().unwrap();
        assert!(w.finish().unwrap() > 0);
    }

    #[test]
    fn sockstat_lines_give_inuse_and_mem() {
        let text = "sockets: used 13\nTCP: inuse 7 orphan 0 tw 2 alloc 9 mem 88\nUDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat(text), Some((7, 88)));
        assert_eq!(parse_sockstat("TCP: inuse 7 orphan 0\n"), None);
        assert_eq!(parse_sockstat("UDP: inuse 1 mem 2\n"), None);
        assert_eq!(parse_sockstat(""), None);
    }
}
