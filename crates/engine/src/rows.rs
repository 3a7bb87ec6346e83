//! `--csv-requests`: one CSV row per request (per connection for storms),
//! streamed to disk, bounded.
//!
//! ```text
//!  worker 0: RowGuard ─► RowWriter ─► DIR/worker-0.csv ─┐   (BufWriter, no locks)
//!  worker N: RowGuard ─► RowWriter ─► DIR/worker-N.csv ─┼─ assemble ─► FILE
//!                                                       ┘   (header + each part, DIR removed)
//! ```
//!
//! A request's row is a [`RowGuard`] made when the request starts and
//! written when it drops, so every way a request can end — ok, any error,
//! cut off when the run is aborted — writes exactly one row. Rows are
//! written by the worker that ran the request into its own file (a
//! 64 KiB buffer, flushed as it fills): nothing is shared between workers,
//! and nothing is kept in memory. When the feature is off, a guard is an
//! empty `Option` checked once per request.
//!
//! Each worker may write its share of `--csv-requests-max` rows; past that,
//! rows are counted but not written, and the result says so in a note.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};

/// The header of a `--csv-requests` file.
pub const HEADER: &str = "start_us,worker,conn,outcome,status,schedule_lag_us,connect_us,tls_us,handshake_us,\
send_us,wait_us,receive_us,response_us,latency_us,bytes_sent,bytes_received,scenario,step,vu,iteration,redirects,trace_id";

/// The phases a row has a column for, in column order.
const COLUMNS: [Phase; 9] = [
    Phase::ScheduleLag,
    Phase::Connect,
    Phase::Tls,
    Phase::Handshake,
    Phase::Send,
    Phase::Wait,
    Phase::Receive,
    Phase::Response,
    Phase::Latency,
];

/// Rows per worker file buffer.
const BUFFER: usize = 64 * 1024;

/// Where and how many request rows to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLog {
    /// The CSV file.
    pub path: PathBuf,
    /// Rows written at most (over all workers); later requests are counted
    /// but not written.
    pub max_rows: u64,
}

/// How many rows a run wrote, and how many it left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounts {
    /// Rows in the file.
    pub written: u64,
    /// Requests past the limit, not written.
    pub skipped: u64,
}

impl RowCounts {
    /// The note a result carries when rows were left out.
    pub fn note(&self, log: &RequestLog) -> Option<String> {
        (self.skipped > 0).then(|| {
            format!(
                "--csv-requests {}: stopped at --csv-requests-max {} rows ({} written); {} later requests \
                 have no row (raise --csv-requests-max to keep them)",
                log.path.display(),
                log.max_rows,
                self.written,
                self.skipped
            )
        })
    }

    /// Adds another part's counts.
    pub fn add(&mut self, o: RowCounts) {
        self.written += o.written;
        self.skipped += o.skipped;
    }
}

/// A run's directory of per-worker parts, next to the final file (same
/// file system: the parts are concatenated, not copied across disks).
pub(crate) fn parts_dir(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "requests".into(), |n| n.to_string_lossy());
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    dir.join(format!(".{name}.parts-{}", std::process::id()))
}

/// Creates the parts directory, or says which path cannot be written.
pub(crate) fn prepare(log: &RequestLog) -> Result<PathBuf, CannotWrite> {
    // Fail before the run, not after it: the final file must be creatable.
    File::create(&log.path).map_err(|e| cannot_write(&log.path, e))?;
    let dir = parts_dir(&log.path);
    std::fs::create_dir_all(&dir).map_err(|e| cannot_write(&dir, e))?;
    Ok(dir)
}

/// `--csv-requests` names a file (or its parts' directory) this process
/// cannot write.
#[derive(Debug, thiserror::Error)]
#[error(
    "--csv-requests: cannot write '{}': {reason} (check the directory exists and is writable)",
    path.display()
)]
pub struct CannotWrite {
    /// The file or directory.
    pub path: PathBuf,
    /// The OS's error (part of the message, not a source: the cli prints
    /// an error's chain).
    pub reason: io::Error,
}

fn cannot_write(path: &Path, reason: io::Error) -> CannotWrite {
    CannotWrite {
        path: path.to_path_buf(),
        reason,
    }
}

/// The file worker `worker` writes its rows to.
pub(crate) fn part_path(dir: &Path, worker: u64) -> PathBuf {
    dir.join(format!("worker-{worker}.csv"))
}

/// Writes the header and every worker's part, in worker order, into the
/// final file; removes the parts.
pub(crate) fn assemble(log: &RequestLog, dir: &Path, workers: &[u64]) -> Result<(), CannotWrite> {
    let out = File::create(&log.path).map_err(|e| cannot_write(&log.path, e))?;
    let mut out = BufWriter::with_capacity(BUFFER, out);
    let fail = |e: io::Error| cannot_write(&log.path, e);
    writeln!(out, "{HEADER}").map_err(fail)?;
    for &w in workers {
        let part = part_path(dir, w);
        match File::open(&part) {
            Ok(mut f) => {
                io::copy(&mut f, &mut out).map_err(fail)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(cannot_write(&part, e)),
        }
        let _ = std::fs::remove_file(&part);
    }
    out.flush().map_err(fail)?;
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

/// Where a scenario file's `setup:` or `teardown:` flow (`label`) writes
/// its rows before they join the final file ([`splice_once`]).
pub(crate) fn once_path(path: &Path, label: &str) -> PathBuf {
    let mut p = parts_dir(path).into_os_string();
    p.push(format!(".{label}.csv"));
    PathBuf::from(p)
}

/// Puts the rows of a `setup:` flow (`before`) in front of the load's in
/// the final file, and a `teardown:` flow's (`after`) behind them: one
/// header, rows in the order they ran. The side files are removed.
pub(crate) fn splice_once(log: &RequestLog, before: Option<&Path>, after: Option<&Path>) -> Result<(), CannotWrite> {
    if before.is_none() && after.is_none() {
        return Ok(());
    }
    let mut joined = log.path.clone().into_os_string();
    joined.push(format!(".joining-{}", std::process::id()));
    let joined = PathBuf::from(joined);
    let fail = |e: io::Error| cannot_write(&joined, e);
    let mut out = BufWriter::with_capacity(BUFFER, File::create(&joined).map_err(fail)?);
    writeln!(out, "{HEADER}").map_err(fail)?;
    for part in before.into_iter().chain([log.path.as_path()]).chain(after) {
        match File::open(part) {
            Ok(f) => {
                // Each part starts with the header: skip it.
                let mut rows = io::BufReader::new(f);
                let mut header = Vec::new();
                io::BufRead::read_until(&mut rows, b'\n', &mut header).map_err(fail)?;
                io::copy(&mut rows, &mut out).map_err(fail)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(cannot_write(part, e)),
        }
    }
    out.flush().map_err(fail)?;
    drop(out);
    for side in before.into_iter().chain(after) {
        let _ = std::fs::remove_file(side);
    }
    std::fs::rename(&joined, &log.path).map_err(|e| cannot_write(&log.path, e))
}

/// One worker's row file.
pub(crate) struct RowWriter {
    out: BufWriter<File>,
    worker: u64,
    left: u64,
    counts: RowCounts,
    error: Option<io::Error>,
}

impl RowWriter {
    /// Opens worker `worker`'s part in `dir`; it may write `budget` rows.
    pub(crate) fn create(dir: &Path, worker: u64, budget: u64) -> io::Result<RowWriter> {
        Ok(RowWriter {
            out: BufWriter::with_capacity(BUFFER, File::create(part_path(dir, worker))?),
            worker,
            left: budget,
            counts: RowCounts::default(),
            error: None,
        })
    }

    fn write(&mut self, row: &Row<'_>) {
        if self.left == 0 {
            self.counts.skipped += 1;
            return;
        }
        self.left -= 1;
        self.counts.written += 1;
        if self.error.is_none()
            && let Err(e) = row.write_to(self.worker, &mut self.out)
        {
            self.error = Some(e);
        }
    }

    /// Flushes the part; its counts, or the first write error.
    pub(crate) fn finish(&mut self) -> io::Result<RowCounts> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.counts)
    }
}

/// How a row's unit of work ended.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    Ok,
    Failed(ErrorClass),
}

/// A scenario request's place in the run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Labels<'a> {
    pub scenario: &'a str,
    pub step: &'a str,
    pub vu: u64,
    pub iteration: u64,
}

/// One request's (or storm connection's) row, filled as it goes.
#[derive(Debug)]
pub(crate) struct Row<'a> {
    start_us: u64,
    conn: Option<u64>,
    outcome: Option<Outcome>,
    status: u16,
    phases: [Option<u64>; COLUMNS.len()],
    bytes_sent: u64,
    bytes_received: u64,
    labels: Option<Labels<'a>>,
    /// Redirects followed to its final response.
    redirects: u32,
    /// The trace id its traceparent carried (`--trace-context`).
    trace: Option<[u8; 16]>,
}

impl Row<'_> {
    /// The connection (attempt) this unit used.
    pub(crate) fn conn(&mut self, id: u64) {
        self.conn = Some(id);
    }

    /// A phase's duration.
    pub(crate) fn phase(&mut self, phase: Phase, d: Duration) {
        if let Some(i) = COLUMNS.iter().position(|&p| p == phase) {
            self.phases[i] = Some(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        }
    }

    /// It ended well. The first outcome set is the row's: a storm's
    /// connection is ok once established, whatever its request does.
    pub(crate) fn ok(&mut self) {
        self.outcome.get_or_insert(Outcome::Ok);
    }

    /// It failed (see [`Row::ok`] on which outcome counts).
    pub(crate) fn failed(&mut self, class: ErrorClass) {
        self.outcome.get_or_insert(Outcome::Failed(class));
    }

    /// The response's status and the bytes on the wire.
    pub(crate) fn reply(&mut self, status: u16, sent: u64, received: u64) {
        self.status = status;
        self.bytes_sent = sent;
        self.bytes_received = received;
    }

    /// The redirects it followed (its other columns are the final exchange's).
    pub(crate) fn redirects(&mut self, hops: u32) {
        self.redirects = hops;
    }

    /// The trace id its `traceparent` carried.
    pub(crate) fn trace(&mut self, id: [u8; 16]) {
        self.trace = Some(id);
    }

    fn write_to(&self, worker: u64, w: &mut impl Write) -> io::Result<()> {
        let outcome: Cow<'_, str> = match self.outcome {
            Some(Outcome::Ok) => Cow::Borrowed("ok"),
            Some(Outcome::Failed(c)) => c.name(),
            None => Cow::Borrowed("interrupted"),
        };
        write!(w, "{},{worker},", self.start_us)?;
        if let Some(c) = self.conn {
            write!(w, "{c}")?;
        }
        write!(w, ",{outcome},")?;
        if self.status != 0 {
            write!(w, "{}", self.status)?;
        }
        for p in self.phases {
            match p {
                Some(us) => write!(w, ",{us}")?,
                None => w.write_all(b",")?,
            }
        }
        write!(w, ",{},{}", self.bytes_sent, self.bytes_received)?;
        match &self.labels {
            Some(l) => write!(
                w,
                ",{},{},{},{}",
                csv_field(l.scenario),
                csv_field(l.step),
                l.vu,
                l.iteration
            )?,
            None => w.write_all(b",,,,")?,
        }
        write!(w, ",{},", self.redirects)?;
        if let Some(id) = &self.trace {
            w.write_all(throng_metrics::hex(id).as_bytes())?;
        }
        writeln!(w)
    }
}

/// A CSV field, quoted when it must be (RFC 4180).
fn csv_field(text: &str) -> Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", text.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(text)
    }
}

/// A unit of work's row: written when dropped, however the unit ended.
/// Empty (and free) when the run writes no rows.
pub(crate) struct RowGuard<'a> {
    writer: Option<&'a RefCell<RowWriter>>,
    row: Option<Box<Row<'a>>>,
}

impl<'a> RowGuard<'a> {
    /// A row for a unit starting at `start`, written to `writer` (none: no
    /// row); `origin` is the run's start.
    #[inline]
    pub(crate) fn new(writer: Option<&'a RefCell<RowWriter>>, origin: Instant, start: Instant) -> Self {
        let row = writer.map(|_| {
            Box::new(Row {
                start_us: u64::try_from(start.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX),
                conn: None,
                outcome: None,
                status: 0,
                phases: [None; COLUMNS.len()],
                bytes_sent: 0,
                bytes_received: 0,
                labels: None,
                redirects: 0,
                trace: None,
            })
        });
        RowGuard { writer, row }
    }

    /// The same, with a scenario request's labels.
    pub(crate) fn labelled(
        writer: Option<&'a RefCell<RowWriter>>,
        origin: Instant,
        start: Instant,
        labels: Labels<'a>,
    ) -> Self {
        let mut g = Self::new(writer, origin, start);
        if let Some(r) = g.row.as_mut() {
            r.labels = Some(labels);
        }
        g
    }

    /// The row to fill, when rows are written.
    #[inline]
    pub(crate) fn row(&mut self) -> Option<&mut Row<'a>> {
        self.row.as_deref_mut()
    }
}

impl Drop for RowGuard<'_> {
    fn drop(&mut self) {
        if let (Some(row), Some(w)) = (self.row.take(), self.writer) {
            w.borrow_mut().write(&row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_every_column() {
        let mut row = Row {
            start_us: 1500,
            conn: None,
            outcome: None,
            status: 0,
            phases: [None; COLUMNS.len()],
            bytes_sent: 0,
            bytes_received: 0,
            labels: None,
            redirects: 0,
            trace: None,
        };
        let mut out = Vec::new();
        row.write_to(3, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "1500,3,,interrupted,,,,,,,,,,,0,0,,,,,0,\n");
        assert_eq!(text.trim_end().split(',').count(), HEADER.split(',').count());

        row.conn(7);
        row.phase(Phase::Connect, Duration::from_micros(42));
        row.failed(ErrorClass::CheckFailed);
        row.ok();
        row.reply(500, 80, 120);
        row.labels = Some(Labels {
            scenario: "a,b",
            step: "login",
            vu: 4,
            iteration: 9,
        });
        let mut out = Vec::new();
        row.write_to(0, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "1500,0,7,check_failed,500,,42,,,,,,,,80,120,\"a,b\",login,4,9,0,\n"
        );
        row.redirects(2);
        row.trace([0xab; 16]);
        let mut out = Vec::new();
        row.write_to(0, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with(&format!(",login,4,9,2,{}\n", "ab".repeat(16))), "{text}");
    }
}
