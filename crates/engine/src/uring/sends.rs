//! What each slot of the ring sends: the plan's one request, its pick from
//! several (`--targets` on one origin, `--body-lines`, more URLs), and with
//! `--trace-context` its own copy with the traceparent's ids written in
//! place.
//!
//! A send's bytes must not move while the kernel may still read them: the
//! plan's requests are never written, and a slot's traced copy is given
//! the capacity of the longest request once, so writing the next request
//! into it never reallocates.

use std::time::{Duration, Instant};

use crate::ctx::Ctx;
use crate::targets::Cursor;
use crate::trace::Traced;

/// Every slot's request, beside the slots (empty tables when the plan
/// sends one request untraced: a slot stays its size).
#[derive(Default)]
pub(super) struct Sends {
    /// With several requests, slot by slot: its place in the list and the
    /// entry it sends now.
    picked: Vec<(Cursor, usize)>,
    /// With trace context, slot by slot: the request as it sends it.
    traced: Vec<Traced>,
    /// The longest request the plan sends.
    longest: usize,
}

impl Sends {
    pub(super) fn new(ctx: &Ctx) -> Sends {
        let longest = ctx.pick.as_ref().map_or(ctx.spec.request.len(), |p| p.longest());
        Sends {
            longest,
            ..Sends::default()
        }
    }

    /// The longest request: a connection's socket options are set for it.
    pub(super) fn longest(&self) -> usize {
        self.longest
    }

    /// The request slot `i` sends now.
    #[inline]
    pub(super) fn get<'a>(&'a self, ctx: &'a Ctx, i: usize) -> &'a [u8] {
        if let Some(t) = self.traced.get(i) {
            return &t.bytes;
        }
        match (&ctx.pick, self.picked.get(i)) {
            (Some(p), Some(&(_, entry))) => p.request(entry),
            _ => &ctx.spec.request,
        }
    }

    /// Slot `i`'s next request: the next of several (counted started for
    /// its target), with new trace ids.
    pub(super) fn next(&mut self, ctx: &Ctx, i: usize) {
        let request: &[u8] = match &ctx.pick {
            Some(p) => {
                if self.picked.len() <= i {
                    self.picked.resize_with(i + 1, Default::default);
                }
                let (cursor, entry) = &mut self.picked[i];
                *entry = p.next(cursor);
                p.started(*entry);
                p.request(*entry)
            }
            None => &ctx.spec.request,
        };
        if let Some(tracer) = &ctx.spec.trace {
            let longest = self.longest;
            if self.traced.len() <= i {
                self.traced.resize_with(i + 1, || Traced {
                    bytes: Vec::with_capacity(longest),
                    ..Traced::default()
                });
            }
            let t = &mut self.traced[i];
            t.id = tracer.stamp_into(&mut t.bytes, request, ctx.pick.is_none());
        }
    }

    /// The trace id slot `i`'s request carries (None: untraced).
    pub(super) fn trace_id(&self, i: usize) -> Option<[u8; 16]> {
        self.traced.get(i).map(|t| t.id)
    }

    /// Slot `i`'s request ended at `now`: its response time and whether its
    /// status was expected, when one came (its target's figures).
    pub(super) fn ended(&self, ctx: &Ctx, i: usize, now: Instant, response: Option<(Duration, bool)>) {
        if let (Some(p), Some(&(_, entry))) = (&ctx.pick, self.picked.get(i)) {
            p.ended(&ctx.scenario, entry, now, response);
        }
    }
}
