//! A criterion-free micro-benchmark of the state machine alone, against a
//! scripted server (no sockets): CPU per request/response cycle, and the
//! heap one idle connection holds. `cargo bench -p throng-http2`.
//!
//! Figures vary by machine; compare runs made on the same machine.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use throng_http2::{Conn, Event, Settings, frame, hpack};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes straight to the system allocator; the counter
// only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout contract passes through unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above; `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A response header block as nginx would send it (:status 200, server,
/// date, content-type, content-length).
fn response_block() -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_field(&mut block, b":status", b"200");
    hpack::encode_field(&mut block, b"server", b"nginx/1.26.3");
    hpack::encode_field(&mut block, b"date", b"Mon, 23 Nov 2026 02:00:00 GMT");
    hpack::encode_field(&mut block, b"content-type", b"text/plain");
    hpack::encode_field(&mut block, b"content-length", b"5");
    block
}

/// The server's side: optionally SETTINGS + ack, then for streams `first,
/// first+2, ...` HEADERS and a DATA "hello" with END_STREAM, into `b`.
fn server_bytes(b: &mut Vec<u8>, block: &[u8], first: u32, n: u32, handshake: bool) {
    b.clear();
    if handshake {
        frame::encode_settings(b, &[(frame::setting::MAX_CONCURRENT_STREAMS, 128)]);
        frame::encode_settings_ack(b);
    }
    for i in 0..n {
        let s = first + 2 * i;
        frame::encode_headers(b, s, block, false, frame::DEFAULT_MAX_FRAME_SIZE);
        frame::encode_data(b, s, b"hello", true);
    }
}

fn main() {
    let mut head = Vec::new();
    hpack::encode_request(
        &mut head,
        b"GET",
        b"http",
        b"127.0.0.1:8080",
        b"/hello",
        &[(b"user-agent", b"throng")],
    );

    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // binary too, unoptimized, where a smoke run is enough.
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full { 1 } else { 100 };
    // CPU: 10 streams in flight, 100,000 batches of 10 requests.
    let batches = 100_000u32 / scale;
    let mut conn = Conn::new(Settings::default());
    let mut ended = 0u64;
    let mut bytes = 0u64;
    let block = response_block();
    let mut inputs = Vec::new();
    server_bytes(&mut inputs, &block, 1, 0, true);
    conn.receive(&inputs, &mut |_| {}).unwrap();
    let t = Instant::now();
    for batch in 0..batches {
        let first = 1 + batch * 20;
        for _ in 0..10 {
            conn.start_request(&head, true).unwrap();
        }
        bytes += conn.pending_output().len() as u64;
        conn.consume_output(conn.pending_output().len());
        // The server's frames for this batch: copies of one encoded block,
        // as cheap as the read that would bring them.
        server_bytes(&mut inputs, &block, first, 10, false);
        conn.receive(&inputs, &mut |e| {
            if let Event::StreamEnd { .. } = e {
                ended += 1;
            }
        })
        .unwrap();
        conn.consume_output(conn.pending_output().len());
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(ended, batches as u64 * 10);
    let reqs = ended as f64;
    println!(
        "cycle: {ended} requests in {secs:.3} s: {:.0} ns per request (server frames written included), \
         {:.1} bytes sent per request",
        secs * 1e9 / reqs,
        bytes as f64 / reqs
    );

    // Memory: 10,000 connections, each after the handshake and one
    // request/response, then shrunk (idle).
    let n = 10_000 / scale as usize;
    let before = LIVE.load(Ordering::Relaxed);
    let mut conns = Vec::with_capacity(n);
    let vec_bytes = LIVE.load(Ordering::Relaxed) - before;
    for _ in 0..n {
        let mut c = Conn::new(Settings::default());
        c.consume_output(c.pending_output().len());
        server_bytes(&mut inputs, &block, 1, 0, true);
        c.receive(&inputs, &mut |_| {}).unwrap();
        c.start_request(&head, true).unwrap();
        server_bytes(&mut inputs, &block, 1, 1, false);
        c.receive(&inputs, &mut |_| {}).unwrap();
        c.consume_output(c.pending_output().len());
        c.shrink();
        conns.push(c);
    }
    let heap = LIVE.load(Ordering::Relaxed) - before - vec_bytes;
    println!(
        "memory: {n} idle connections hold {heap} heap bytes ({:.1} per connection) plus {} bytes of state each \
         (size_of::<Conn>())",
        heap as f64 / n as f64,
        std::mem::size_of::<Conn>()
    );

    drop(conns);

    // Busy: 10,000 connections, each with one request in flight (written,
    // not answered), after one earlier response, not shrunk.
    let before = LIVE.load(Ordering::Relaxed);
    let mut conns = Vec::with_capacity(n);
    let vec_bytes = LIVE.load(Ordering::Relaxed) - before;
    for _ in 0..n {
        let mut c = Conn::new(Settings::default());
        server_bytes(&mut inputs, &block, 1, 0, true);
        c.receive(&inputs, &mut |_| {}).unwrap();
        c.start_request(&head, true).unwrap();
        server_bytes(&mut inputs, &block, 1, 1, false);
        c.receive(&inputs, &mut |_| {}).unwrap();
        c.start_request(&head, true).unwrap();
        c.consume_output(c.pending_output().len());
        conns.push(c);
    }
    let heap = LIVE.load(Ordering::Relaxed) - before - vec_bytes;
    println!(
        "memory: {n} connections with a request in flight hold {heap} heap bytes ({:.1} per connection) \
         plus their state",
        heap as f64 / n as f64,
    );
}
