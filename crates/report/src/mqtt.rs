//! The report of a `throng mqtt` run: the plan, connections, messages and
//! their acknowledgements, each subscriber's books (received, lost,
//! duplicated, out of order), the phase table (`delivery` first among the
//! pub/sub phases) and the generator's cost.

use std::io::{self, Write};

use throng_metrics::PubSub;
use throng_plan::MqttPlan;
use throng_result::{RunResult, per_second};

use crate::format::pct;
use crate::sections::{write_errors, write_generator, write_phase_table};

/// Subscribers listed one by one when some lost messages (the rest in the
/// totals).
const SHOWN: usize = 10;

/// The report of a pub/sub run.
pub(crate) fn write_mqtt(r: &RunResult, p: &MqttPlan, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    writeln!(w, "throng mqtt {} --topic {}", p.target.url, p.topic)?;
    writeln!(w, "  {}", p.describe())?;
    if r.interrupted {
        writeln!(w, "  interrupted: the run was stopped before its end")?;
    }
    for note in &r.notes {
        writeln!(w, "  note: {note}")?;
    }
    writeln!(w)?;
    let c = &m.connections;
    writeln!(
        w,
        "  {:<14}{} attempted, {} established, {} failed",
        "connections",
        c.attempted,
        c.ok,
        c.failed()
    )?;
    write_errors(w, &c.errors)?;
    if m.closed_by_peer > 0 {
        let codes: Vec<String> = m.close_codes.iter().map(|(k, n)| format!("{k}={n}")).collect();
        writeln!(
            w,
            "  {:<14}{} connections closed by the broker before the end{}",
            "closed",
            m.closed_by_peer,
            if codes.is_empty() {
                String::new()
            } else {
                format!(" (DISCONNECT reason codes: {})", codes.join(" "))
            }
        )?;
    }
    let q = &m.requests;
    writeln!(
        w,
        "  {:<14}{} published ({:.1}/s), {} ok, {} failed ({:.2}%){}",
        "messages",
        q.attempted,
        per_second(q.ok, r.duration_s),
        q.ok,
        q.failed(),
        pct(q.failed(), q.attempted),
        if m.dropped > 0 {
            format!(", {} dropped (due while the window was full)", m.dropped)
        } else {
            String::new()
        }
    )?;
    write_errors(w, &q.errors)?;
    if let Some(b) = &m.pubsub {
        write_books(b, w)?;
    }
    writeln!(w)?;
    crate::scenario::report::write_thresholds(r, w)?;
    write_phase_table(m, w)?;
    writeln!(w)?;
    write_generator(r, q.attempted, "messages", w, 14)
}

/// The books: what subscribers should have received and what came.
fn write_books(b: &PubSub, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "  {:<14}{} expected, {} received, {} lost ({:.2}%), {} duplicated, {} out of order",
        "deliveries",
        b.expected,
        b.received,
        b.lost,
        pct(b.lost, b.expected),
        b.duplicated,
        b.out_of_order
    )?;
    if b.refused > 0 {
        writeln!(
            w,
            "  {:<14}{} messages the broker refused (their acknowledgement's failure code): no subscriber expects them",
            "refused", b.refused
        )?;
    }
    if b.unacknowledged > 0 {
        writeln!(
            w,
            "  {:<14}{} acknowledged, {} refused, {} unacknowledged (no acknowledgement by the end)",
            "acks", b.acknowledged, b.refused, b.unacknowledged
        )?;
    }
    if b.foreign > 0 {
        writeln!(
            w,
            "  {:<14}{} deliveries were not this run's messages (a retained message of an earlier run, other \
             clients' traffic): not counted",
            "foreign", b.foreign
        )?;
    }
    let short: Vec<_> = b.subscribers.iter().filter(|s| s.lost > 0).collect();
    for s in short.iter().take(SHOWN) {
        writeln!(
            w,
            "    subscriber {:<8}{} of {} received, {} lost",
            s.subscriber, s.received, s.expected, s.lost
        )?;
    }
    if short.len() > SHOWN {
        writeln!(
            w,
            "    … and {} more subscribers that lost messages",
            short.len() - SHOWN
        )?;
    }
    if !b.balanced() {
        writeln!(w, "  the books do not balance: received + lost differs from expected")?;
    }
    Ok(())
}
