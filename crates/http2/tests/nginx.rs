//! throng-http2 against a real nginx speaking h2c (prior knowledge), driven
//! by a plain blocking `std::net::TcpStream` loop: 1,000 GETs over one
//! connection with 10 streams in flight, then a 1 MB POST (our send window
//! waits for nginx's credit) and a 1 MB download (nginx waits for ours).

// Helpers outside #[test] functions: a failed setup step should panic.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, block};
use throng_http2::{ErrorCode, Settings, StreamId};

const BIG: usize = 1 << 20;

struct Nginx {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its worker, then itself.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Nginx {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn big_body() -> Vec<u8> {
    (0..BIG).map(|i| (i % 251) as u8).collect()
}

/// nginx with an h2c port (`/hello`, `/big`, `/upload`) and a plain port
/// that `/upload` proxies to, answering with the length of the body it got.
fn start_nginx() -> Nginx {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!("nginx is not installed: run ./scripts/test.sh, which installs it (Debian package nginx-light)")
        });
    let dir = std::env::temp_dir().join(format!("throng-http2-nginx-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/big.bin"), big_body()).unwrap();
    let (port, echo) = (free_port(), free_port());
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\ndaemon off;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 100000;\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;\n\
           uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           server {{\n    listen 127.0.0.1:{port} http2;\n    http2_max_concurrent_streams 10;\n\
             client_max_body_size 2m;\n\
             location = /hello {{ default_type text/plain; return 200 \"hello\"; }}\n\
             location = /big {{ alias {d}/www/big.bin; }}\n\
             location = /upload {{ proxy_pass http://127.0.0.1:{echo}/length; }}\n  }}\n\
           server {{\n    listen 127.0.0.1:{echo};\n    client_max_body_size 2m;\n\
             location = /length {{ default_type text/plain; return 200 \"$content_length\"; }}\n  }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new(bin)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start nginx");
    let nginx = Nginx { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in [port, echo] {
        let addr = SocketAddr::from(([127, 0, 0, 1], p));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not listen on {addr} within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    nginx
}

#[test]
fn nginx_h2c_gets_post_and_download() {
    let nginx = start_nginx();
    let mut c = Client::connect(
        nginx.addr(),
        Settings {
            max_concurrent_streams: 10,
            ..Settings::default()
        },
    );

    // 1,000 GETs, at most 10 in flight, one pre-encoded header block.
    let get = block(
        b"GET",
        b"127.0.0.1",
        b"/hello",
        &[(b"user-agent", b"throng-http2-test")],
    );
    let mut started = Vec::new();
    let mut max_in_flight = 0;
    let mut completed = 0;
    while completed < 1000 {
        while started.len() < 1000 && c.conn.can_start_request() {
            started.push(c.conn.start_request(&get, true).unwrap());
        }
        max_in_flight = max_in_flight.max(c.conn.open_streams());
        c.flush();
        c.read();
        completed = started.iter().filter(|&&s| c.done(s)).count();
    }
    assert_eq!(started.len(), 1000);
    assert_eq!(started.last(), Some(&1999), "stream ids are consecutive odd numbers");
    assert_eq!(max_in_flight, 10);
    assert_eq!(c.conn.peer_settings().max_concurrent_streams, 10);
    let ok = started
        .iter()
        .filter(|s| {
            let r = &c.responses[s];
            r.status == 200 && r.body == b"hello" && r.ended && r.reset.is_none()
        })
        .count();
    assert_eq!(ok, 1000);
    // 1,000 responses of 5 bytes: well inside both windows, yet each was counted.
    assert_eq!(c.conn.open_streams(), 0);

    // A 1 MB POST: sixteen times nginx's initial stream window, so it only
    // completes if WINDOW_UPDATEs from nginx reopen our send window.
    let body = big_body();
    let post = block(
        b"POST",
        b"127.0.0.1",
        b"/upload",
        &[(b"content-length", BIG.to_string().as_bytes())],
    );
    let id = c.conn.start_request(&post, false).unwrap();
    let mut sent = 0;
    while !c.done(id) {
        if sent < body.len() {
            sent += c.conn.send_data(id, &body[sent..], true).unwrap();
        }
        c.flush();
        c.read();
    }
    assert_eq!(sent, BIG);
    assert!(
        c.window_updates > 0,
        "the POST completed without any WINDOW_UPDATE from nginx"
    );
    let r = &c.responses[&id];
    assert_eq!((r.status, r.reset), (200, None));
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        BIG.to_string(),
        "nginx got the whole body"
    );

    // A 1 MB download: sixteen times our stream window; it completes only if
    // we give credit back as data arrives.
    let id = c
        .conn
        .start_request(&block(b"GET", b"127.0.0.1", b"/big", &[]), true)
        .unwrap();
    while !c.done(id) {
        c.flush();
        c.read();
    }
    let r = &c.responses[&id];
    assert_eq!((r.status, r.reset), (200, None));
    assert_eq!(r.body.len(), BIG);
    assert!(r.body == body, "the downloaded bytes differ from the file");

    // A graceful close: our GOAWAY goes out; nothing is left in flight.
    c.conn.go_away(ErrorCode::NO_ERROR);
    c.flush();
    assert_eq!(c.conn.open_streams(), 0);
    assert_eq!(c.goaway, None);
    // nginx indexes nothing in our table: an idle connection's only memory is its state.
    assert_eq!(c.conn.hpack_table_size(), 0);
    c.conn.shrink();

    // A lean connection, as a load generator holding many would use: no
    // HPACK dynamic table (nginx sends no size update; none is needed),
    // quarter-size windows. The download needs 64 stream credits.
    let lean = Settings {
        header_table_size: 0,
        initial_window_size: 16_384,
        connection_window: 65_535,
        max_header_list_size: 4096,
        ..Settings::default()
    };
    let mut c = Client::connect(nginx.addr(), lean);
    let ids: Vec<StreamId> = (0..10).map(|_| c.conn.start_request(&get, true).unwrap()).collect();
    let big = c
        .conn
        .start_request(&block(b"GET", b"127.0.0.1", b"/big", &[]), true)
        .unwrap();
    while !ids.iter().chain([&big]).all(|&s| c.done(s)) {
        c.flush();
        c.read();
    }
    for s in &ids {
        let r = &c.responses[s];
        assert_eq!((r.status, r.body.as_slice(), r.reset), (200, &b"hello"[..], None));
    }
    let r = &c.responses[&big];
    assert_eq!((r.status, r.reset, r.body.len()), (200, None, BIG));
    assert!(r.body == body, "the downloaded bytes differ from the file");
}
