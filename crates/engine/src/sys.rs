//! The few facts and limits the engine reads from the OS.

use std::time::Duration;

use throng_result::Environment;

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
        let env = environment();
        assert!(env.cores >= 1);
        assert!(env.os.starts_with("Linux"));
    }
}
