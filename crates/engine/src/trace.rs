//! `--trace-context`: a new `traceparent` on every HTTP request.
//!
//! ```text
//!  plan: the request rendered once, its traceparent a placeholder
//!     │ Tracer::stamp (per request)
//!     ▼
//!  the task's own copy of the request (made once for a plan of one
//!  request, copied per request from the table of several) ── the ids
//!  written over the placeholder ── written to the socket
//! ```
//!
//! No allocation per request once a task's copy has its size; the ids come
//! from a per-worker SplitMix64 seeded from the process's random keys.
//! A scenario renders each request anyway: it adds [`Tracer::value`], under
//! the iteration's [`Tracer::trace_id`].

use std::cell::RefCell;
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

use throng_metrics::{Recorder, SlowEnd};

use throng_plan::{Rng, TraceContext, traceparent_at, write_ids};

/// A task's request as it is sent, and the trace id it carries.
#[derive(Default)]
pub(crate) struct Traced {
    pub(crate) bytes: Vec<u8>,
    pub(crate) id: [u8; 16],
    /// Its parent (span) id (HTTP/2 requests write both in their block).
    pub(crate) parent: [u8; 8],
}

/// A worker's trace-id source and what the plan asks of it.
#[derive(Debug)]
pub(crate) struct Tracer {
    flags: [u8; 2],
    /// Slowest requests the worker keeps.
    pub(crate) keep: usize,
    /// The placeholder's offset in the plan's one request (None: a plan
    /// of several, searched in each).
    at: Option<usize>,
    rng: RefCell<Rng>,
}

impl Tracer {
    /// A tracer for a worker of a plan whose one request is `request`
    /// (empty for a plan of several).
    pub(crate) fn new(t: TraceContext, request: &[u8]) -> Tracer {
        // Random keys per RandomState (the OS's, then varied per call):
        // workers and processes draw distinct streams.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id().into());
        Tracer {
            flags: *t.flags(),
            keep: usize::try_from(t.slowest).unwrap_or(usize::MAX),
            at: traceparent_at(request),
            rng: RefCell::new(Rng::new(h.finish())),
        }
    }

    /// A new trace id (never all zeros) and parent id (never zero).
    pub(crate) fn ids(&self) -> ([u8; 16], [u8; 8]) {
        let mut rng = self.rng.borrow_mut();
        let (a, b, p) = (rng.next_u64(), rng.next_u64(), rng.next_u64());
        let mut trace = [0u8; 16];
        trace[..8].copy_from_slice(&a.to_be_bytes());
        trace[8..].copy_from_slice(&(if a == 0 && b == 0 { 1 } else { b }).to_be_bytes());
        (trace, p.max(1).to_be_bytes())
    }

    /// New ids in the task's `traced`; with `block` (an HTTP/2 plan's one
    /// header block, its placeholder's ids at `.1`), its copy there with
    /// them written over (copied when its length differs: once).
    pub(crate) fn stamp_block<'a>(
        &self,
        traced: &'a mut Option<Box<Traced>>,
        block: Option<(&[u8], Option<usize>)>,
    ) -> &'a Traced {
        let t = traced.get_or_insert_with(Box::default);
        (t.id, t.parent) = self.ids();
        if let Some((src, at)) = block {
            if t.bytes.len() != src.len() {
                t.bytes.clear();
                t.bytes.extend_from_slice(src);
            }
            if let Some(at) = at {
                write_ids(&mut t.bytes, at, &t.id, &t.parent, &self.flags);
            }
        }
        t
    }

    /// Writes `traced`'s ids over the placeholder's at `at` in `buf`.
    pub(crate) fn write(&self, buf: &mut [u8], at: usize, traced: &Traced) {
        write_ids(buf, at, &traced.id, &traced.parent, &self.flags);
    }

    /// The trace flags sent (two hex digits).
    pub(crate) fn flags(&self) -> &[u8; 2] {
        &self.flags
    }

    /// A new trace id (a scenario iteration's).
    pub(crate) fn trace_id(&self) -> [u8; 16] {
        self.ids().0
    }

    /// A `traceparent` value under `trace_id` with a new parent (span) id,
    /// for a request rendered on its own (a scenario's).
    pub(crate) fn value(&self, trace_id: &[u8; 16]) -> String {
        let (_, parent) = self.ids();
        throng_plan::traceparent_value(trace_id, &parent, &self.flags)
    }

    /// Sets `headers`' traceparent to one under `trace_id` with a new span
    /// id: a redirect's hop, in the trace of the request it follows.
    pub(crate) fn restamp(&self, headers: &mut Vec<(String, String)>, trace_id: &[u8; 16]) {
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(throng_plan::TRACEPARENT));
        headers.push((throng_plan::TRACEPARENT.to_string(), self.value(trace_id)));
    }

    /// Offers a traced request that started (its latency's origin) at
    /// `origin` and ended at `end` to the worker's slowest.
    pub(crate) fn offer(&self, rec: &mut Recorder, origin: Instant, end: Instant, how: SlowEnd, id: [u8; 16]) {
        rec.slow(self.keep, origin, end.saturating_duration_since(origin), how, id);
    }

    /// Makes `traced` the request to send: `request` with new ids (`one`:
    /// the plan's one request, copied once).
    pub(crate) fn stamp<'a>(&self, traced: &'a mut Option<Box<Traced>>, request: &[u8], one: bool) -> &'a Traced {
        let t = traced.get_or_insert_with(Box::default);
        t.id = self.stamp_into(&mut t.bytes, request, one);
        t
    }

    /// Writes `request` with new ids into `buf`; its trace id.
    pub(crate) fn stamp_into(&self, buf: &mut Vec<u8>, request: &[u8], one: bool) -> [u8; 16] {
        let at = if one {
            if buf.len() != request.len() {
                buf.clear();
                buf.extend_from_slice(request);
            }
            self.at
        } else {
            buf.clear();
            buf.extend_from_slice(request);
            traceparent_at(request)
        };
        let (trace, parent) = self.ids();
        if let Some(at) = at {
            write_ids(buf, at, &trace, &parent, &self.flags);
        }
        trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_plan::{HttpArgs, HttpPlan, Sampling};

    #[test]
    fn each_request_gets_new_well_formed_ids() {
        let plan = HttpPlan::from_args(HttpArgs {
            url: "http://127.0.0.1:9/".into(),
            requests: Some(1),
            cores: 1,
            trace_context: Some(Sampling::Sampled),
            ..HttpArgs::default()
        })
        .unwrap();
        let request = plan.request_bytes();
        let t = Tracer::new(plan.trace.unwrap(), &request);
        let mut buf = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100 {
            let id = t.stamp_into(&mut buf, &request, true);
            let text = String::from_utf8(buf.clone()).unwrap();
            let line = text.lines().find(|l| l.starts_with("traceparent: ")).unwrap();
            let v = &line["traceparent: ".len()..];
            assert_eq!(v.len(), 55, "{v}");
            assert_eq!(&v[..3], "00-");
            assert_eq!(&v[3..35], throng_metrics::hex(&id));
            assert_ne!(&v[3..35], "0".repeat(32));
            assert_ne!(&v[36..52], "0".repeat(16));
            assert_eq!(&v[52..], "-01");
            assert!(seen.insert(v.to_string()), "a traceparent repeated: {v}");
        }
        assert_eq!(buf.len(), request.len(), "same length as the plan's request");
    }
}
