use super::headers::parse_header;
use super::*;

fn args(url: &str) -> HttpArgs {
    HttpArgs {
        url: url.to_string(),
        cores: 2,
        ..HttpArgs::default()
    }
}

fn flag_of(e: PlanError) -> &'static str {
    match e {
        PlanError::Invalid { flag, .. } => flag,
    }
}

#[test]
fn defaults_are_wrk_like() {
    let p = HttpPlan::from_args(args("http://127.0.0.1:8080/x?y=1")).unwrap();
    assert_eq!(p.target.host, "127.0.0.1");
    assert_eq!(p.target.port, 8080);
    assert_eq!(p.target.path, "/x?y=1");
    assert_eq!(p.connections, 50);
    assert_eq!(p.threads, 2);
    assert_eq!(p.load, Load::Closed);
    assert_eq!(p.stop, Stop::Duration(DEFAULT_DURATION));
    assert!(p.keepalive);
    assert_eq!(p.method, "GET");
}

#[test]
fn io_uring_takes_http1_loops_and_http2_closed_loops_and_refuses_the_rest() {
    let uring = |url: &str, f: &dyn Fn(&mut HttpArgs)| {
        let mut a = args(url);
        a.io = IoModel::Uring;
        f(&mut a);
        HttpPlan::from_args(a)
    };
    let p = uring("http://127.0.0.1:8080/", &|a| a.no_keepalive = true).unwrap();
    assert_eq!((p.io, p.keepalive), (IoModel::Uring, false));
    // An open loop runs on the ring too.
    let open = uring("http://127.0.0.1:8080/", &|a| a.rate = Some(100.0)).unwrap();
    assert_eq!((open.io, open.load), (IoModel::Uring, Load::Open { rate: 100.0 }));
    // So does an HTTP/2 closed loop, h2c or over TLS.
    for url in ["http://127.0.0.1:8080/", "https://127.0.0.1:8443/"] {
        let h2 = uring(url, &|a| a.http2 = true).unwrap();
        assert_eq!((h2.io, h2.ring_refuses()), (IoModel::Uring, None), "{url}");
    }
    // HTTP/1.1 with several targets on one origin, or with trace context,
    // rides it; HTTP/2 with trace context does, with several targets not
    // (its ring loop sends one request).
    let lines = || Some(("b.txt".to_string(), b"a\nb\n".to_vec()));
    let h1 = uring("http://127.0.0.1:8080/", &|a| {
        a.body_lines = lines();
        a.trace_context = Some(Sampling::Sampled);
    })
    .unwrap();
    assert_eq!((h1.io, h1.ring_refuses()), (IoModel::Uring, None));
    let traced_h2 = uring("http://127.0.0.1:8080/", &|a| {
        a.http2 = true;
        a.trace_context = Some(Sampling::Sampled);
    })
    .unwrap();
    assert_eq!((traced_h2.io, traced_h2.ring_refuses()), (IoModel::Uring, None));
    let open_h2 = uring("http://127.0.0.1:8080/", &|a| {
        a.http2 = true;
        a.rate = Some(100.0);
    })
    .unwrap();
    assert_eq!((open_h2.io, open_h2.ring_refuses()), (IoModel::Uring, None));
    let new_conns_h2 = uring("http://127.0.0.1:8080/", &|a| {
        a.http2 = true;
        a.no_keepalive = true;
    })
    .unwrap();
    assert_eq!((new_conns_h2.io, new_conns_h2.ring_refuses()), (IoModel::Uring, None));
    type Change<'a> = &'a dyn Fn(&mut HttpArgs);
    let refused: [(&str, Change, &str); 3] = [
        (
            "http://127.0.0.1/",
            &|a| {
                a.http2 = true;
                a.body_lines = lines();
            },
            "several targets with --http2",
        ),
        ("http://127.0.0.1/", &|a| a.redirects = Some(2), "--redirects"),
        (
            "http://127.0.0.1/",
            &|a| a.reach.proxy = Some("http://127.0.0.1:3128".into()),
            "proxy",
        ),
    ];
    for (url, f, what) in refused {
        let e = uring(url, f).unwrap_err().to_string();
        assert!(
            e.contains("--io") && e.contains(what) && e.contains("--io epoll"),
            "{e}"
        );
    }
    // What was asked is always written (the default, auto, too); a result
    // from before auto, without it, ran epoll. Auto takes every plan, and
    // the one decision says which the ring carries.
    let auto = HttpPlan::from_args(args("http://127.0.0.1/")).unwrap();
    assert_eq!((auto.io, auto.ring_refuses()), (IoModel::Auto, None));
    assert!(serde_json::to_string(&auto).unwrap().contains("\"io\":\"auto\""));
    assert!(serde_json::to_string(&p).unwrap().contains("\"io\":\"uring\""));
    let mut old = serde_json::to_value(&auto).unwrap();
    old.as_object_mut().unwrap().remove("io");
    let old: HttpPlan = serde_json::from_value(old).unwrap();
    assert_eq!(old.io, IoModel::Epoll);
    // A body of any size rides the ring (its large sends are tracked to
    // their end): from empty to 1 MiB, with --io uring forced too.
    for n in [0, 16 * 1024, 16 * 1024 + 1, 1 << 20] {
        let mut a = args("http://127.0.0.1/");
        a.body = Some(("body".into(), vec![0; n]));
        assert_eq!(
            HttpPlan::from_args(a).unwrap().ring_refuses(),
            None,
            "a body of {n} bytes"
        );
        let forced = uring("http://127.0.0.1/", &|a| a.body = Some(("body".into(), vec![0; n])));
        assert_eq!(forced.map(|p| p.io).ok(), Some(IoModel::Uring), "a body of {n} bytes");
    }
    // TLS rides the ring too (rustls' records through its operations),
    // forced or by auto.
    let https = HttpPlan::from_args(args("https://127.0.0.1/")).unwrap();
    assert_eq!(https.ring_refuses(), None);
    let forced = uring("https://127.0.0.1/", &|_| {});
    assert_eq!(forced.map(|p| p.io).ok(), Some(IoModel::Uring));
}

#[test]
fn request_bytes_are_exact() {
    let mut a = args("http://example.test/a");
    a.headers = vec!["X-Test: 1".into()];
    a.no_keepalive = true;
    let p = HttpPlan::from_args(a).unwrap();
    let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    let ua = concat!("User-Agent: throng/", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        text,
        format!("GET /a HTTP/1.1\r\nHost: example.test\r\n{ua}\r\nX-Test: 1\r\nConnection: close\r\n\r\n")
    );
}

#[test]
fn body_implies_post_with_length_and_ipv6_authority() {
    let mut a = args("http://[::1]:9000/echo");
    a.body = Some(("b.json".into(), b"{}".to_vec()));
    let p = HttpPlan::from_args(a).unwrap();
    let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    assert!(
        text.starts_with("POST /echo HTTP/1.1\r\nHost: [::1]:9000\r\n"),
        "{text}"
    );
    assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
}

fn body_args(headers: &[&str], body: &'static [u8]) -> HttpArgs {
    let mut a = args("http://h/");
    a.headers = headers.iter().map(|h| h.to_string()).collect();
    a.body = Some(("b.txt".into(), body.to_vec()));
    a
}

fn message_of(e: PlanError) -> String {
    match e {
        PlanError::Invalid { message, .. } => message,
    }
}

#[test]
fn content_length_that_agrees_is_sent_once_and_one_that_does_not_is_refused() {
    let p = HttpPlan::from_args(body_args(&["Content-Length: 10"], b"0123456789")).unwrap();
    let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    assert_eq!(text.to_ascii_lowercase().matches("content-length").count(), 1, "{text}");
    assert!(text.ends_with("Content-Length: 10\r\n\r\n0123456789"), "{text}");

    let e = HttpPlan::from_args(body_args(&["content-length: 1"], b"0123456789")).unwrap_err();
    let m = message_of(e.clone());
    assert_eq!(flag_of(e), "-H/--header");
    assert!(m.contains("contradicts --body b.txt (10 bytes)"), "{m}");
    // Without a body: only 0 agrees.
    let mut a = args("http://h/");
    a.headers = vec!["Content-Length: 5".into()];
    assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "-H/--header");
    let mut a = args("http://h/");
    a.headers = vec!["Content-Length: 0".into()];
    let text = String::from_utf8(HttpPlan::from_args(a).unwrap().request_bytes().to_vec()).unwrap();
    assert!(!text.to_ascii_lowercase().contains("content-length"), "{text}");
}

#[test]
fn transfer_encoding_is_refused() {
    let e = HttpPlan::from_args(body_args(&["Transfer-Encoding: chunked"], b"x")).unwrap_err();
    let m = message_of(e.clone());
    assert_eq!(flag_of(e), "-H/--header");
    assert!(m.contains("does not chunk request bodies"), "{m}");
}

#[test]
fn control_characters_in_headers_are_refused() {
    for h in [
        "X-A: a\u{b}b",
        "X-A: a\u{c}",
        "X-A\u{b}: v",
        "X-A: \u{7f}",
        "X-A: a\rb",
        "X-A: a\u{0}",
    ] {
        let mut a = args("http://h/");
        a.headers = vec![h.to_string()];
        let e = HttpPlan::from_args(a).unwrap_err();
        let m = message_of(e.clone());
        assert_eq!(flag_of(e), "-H/--header", "{h:?}");
        assert!(
            !m.contains('\u{b}') && !m.contains('\r'),
            "the message shows it escaped: {m:?}"
        );
    }
    let mut a = args("http://h/");
    a.headers = vec!["X-A: a\tb".into()];
    assert_eq!(
        HttpPlan::from_args(a).unwrap().headers,
        [("X-A".to_string(), "a\tb".to_string())]
    );
}

#[test]
fn a_bad_header_is_named_but_its_value_never_shown() {
    for (h, shown) in [
        ("Authorization: Bearer s3cr3t\u{1}", "'Authorization: …'"),
        ("Cookie s3cr3t", "a header"),
        ("Bad Name: s3cr3t", "a header"),
        ("X-Key: s3cr3t\u{b}", "'X-Key: …'"),
    ] {
        let e = parse_header(h).unwrap_err().to_string();
        assert!(e.starts_with(&format!("-H/--header: {shown}: ")), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
    }
}

#[test]
fn secret_headers_are_redacted_and_named() {
    let mut a = args("http://h/");
    a.headers = vec![
        "Authorization: Bearer s3cret".into(),
        "X-Api-Key: k3y".into(),
        "Cookie: c=1".into(),
        "Accept: */*".into(),
    ];
    a.secret_headers = vec!["x-api-key".into()];
    let p = HttpPlan::from_args(a).unwrap();
    // What is sent keeps the values.
    let sent = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    assert!(sent.contains("Authorization: Bearer s3cret\r\n") && sent.contains("X-Api-Key: k3y"));
    let r = p.redacted();
    let json = serde_json::to_string(&r).unwrap();
    for secret in ["s3cret", "k3y", "c=1"] {
        assert!(!json.contains(secret), "{json}");
    }
    assert!(json.contains("*/*"), "{json}");
    assert_eq!(r.headers[0], ("Authorization".to_string(), REDACTED.to_string()));
    let note = p.redaction_note().unwrap();
    assert!(note.contains("Authorization, Cookie, X-Api-Key"), "{note}");
    let mut a = args("http://h/");
    a.secret_headers = vec!["Bad Name".into()];
    assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--secret-header");
}

#[test]
fn command_lines_are_redacted_word_by_word() {
    let cases = [
        (
            "http http://h/ -H 'Authorization: Bearer s3cret' -c {{c}}",
            "http http://h/ -H 'Authorization: <redacted>' -c {{c}}",
        ),
        (
            "http http://h/ -H \"X-Key: k 3y\" --secret-header x-key -H Accept:\\ all",
            "http http://h/ -H 'X-Key: <redacted>' --secret-header x-key -H Accept:\\ all",
        ),
        (
            "storm nats://u:pw@127.0.0.1:4222 -n 5 -H cookie:a=1",
            "storm 'nats://u:***@127.0.0.1:4222' -n 5 -H 'cookie: <redacted>'",
        ),
        ("run s.yaml --env A=1", "run s.yaml --env A=1"),
        (
            "storm tcp://h:6379 -n 5 --send-secret 'AUTH pw\\r\\n' --expect '^\\+OK' --send-secret=AUTH\\ pw2",
            "storm tcp://h:6379 -n 5 --send-secret '<redacted>' --expect '^\\+OK' '--send-secret=<redacted>'",
        ),
        (
            "http http://h/ -a u:pw --basic-auth=u:pw -x http://u:pw@p:3128 --proxy=http://u:pw@p:1",
            "http http://h/ -a '<redacted>' '--basic-auth=<redacted>' -x 'http://u:***@p:3128/' \
             '--proxy=http://u:***@p:1/'",
        ),
        (
            "http http://h/ --cookie sid=s3cret --cookie=b=2 -c 1",
            "http http://h/ --cookie '<redacted>' '--cookie=<redacted>' -c 1",
        ),
        (
            "http http://h/ --data 'user=a&password=s3cret' -T application/x-www-form-urlencoded",
            "http http://h/ --data '<redacted>' -T application/x-www-form-urlencoded",
        ),
        (
            "http http://h/ --data='{\"token\": \"s3cret\"}' -c 1",
            "http http://h/ '--data=<redacted>' -c 1",
        ),
        (
            "http http://h/ --remote-write http://p/w --remote-write-header 'X-Scope-OrgID: t1' \
             --remote-write-header='X-Api-Key: k3y' -c 1",
            "http http://h/ --remote-write http://p/w --remote-write-header '<redacted>' \
             '--remote-write-header=<redacted>' -c 1",
        ),
        // Where the body comes from is not the body: kept.
        (
            "http http://h/ --data @body.json --data=@- --data @'my file'",
            "http http://h/ --data @body.json --data=@- --data @'my file'",
        ),
    ];
    for (given, want) in cases {
        assert_eq!(redact_command(given), want, "{given}");
    }
}

#[test]
fn cookies_become_one_secret_cookie_header() {
    let mut a = args("http://h/");
    a.cookies = vec!["a=1".into(), "sid=s3cret".into()];
    let p = HttpPlan::from_args(a).unwrap();
    assert_eq!(p.headers, vec![("Cookie".to_string(), "a=1; sid=s3cret".to_string())]);
    let wire = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    assert!(wire.contains("\r\nCookie: a=1; sid=s3cret\r\n"), "{wire}");
    let json = serde_json::to_string(&p.redacted()).unwrap();
    assert!(!json.contains("s3cret"), "{json}");
    // After a -H Cookie's value, in the same header.
    let mut a = args("http://h/");
    a.headers = vec!["Cookie: x=0".into()];
    a.cookies = vec!["a=1".into()];
    assert_eq!(HttpPlan::from_args(a).unwrap().headers[0].1, "x=0; a=1");
    for bad in ["novalue", "=1", "a b=1", "a=1;b=2", "a=x\ny", "a=\u{e9}", "x;s3cret"] {
        let mut a = args("http://h/");
        a.cookies = vec!["ok=1".into(), bad.into()];
        let e = HttpPlan::from_args(a).unwrap_err();
        assert_eq!(flag_of(e.clone()), "--cookie", "{bad}");
        let msg = e.to_string();
        assert!(msg.contains("cookie 2"), "{msg}");
        let value = bad.split_once('=').map_or(bad, |(_, v)| v);
        if value.len() > 1 {
            assert!(!msg.contains(value), "the value is a secret: {msg}");
        }
    }
}

#[test]
fn redirects_default_to_none_and_are_bounded() {
    assert_eq!(HttpPlan::from_args(args("http://h/")).unwrap().redirects, 0);
    let mut a = args("http://h/");
    a.redirects = Some(5);
    assert_eq!(HttpPlan::from_args(a.clone()).unwrap().redirects, 5);
    let p = HttpPlan::from_args(a).unwrap();
    assert!(
        p.describe().ends_with(", following up to 5 redirects"),
        "{}",
        p.describe()
    );
    let mut a = args("http://h/");
    a.redirects = Some(MAX_REDIRECTS + 1);
    assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--redirects");
}

#[test]
fn url_credentials_become_authorization_and_leave_the_url() {
    let p = HttpPlan::from_args(args("http://al%40ce:s3cret@h:81/x")).unwrap();
    assert_eq!(p.target.url, "http://h:81/x");
    let sent = String::from_utf8(p.request_bytes().to_vec()).unwrap();
    assert!(sent.contains(&format!(
        "Authorization: {}\r\n",
        crate::reach::basic_authorization("al@ce", "s3cret")
    )));
    let json = serde_json::to_string(&p.redacted()).unwrap();
    assert!(!json.contains("s3cret") && !json.contains("Basic"), "{json}");
    let e = HttpPlan::from_args(args("http://u:s3cret@/x")).unwrap_err().to_string();
    assert!(!e.contains("s3cret") && e.contains("http://***@/x"), "{e}");
}

#[test]
fn a_body_over_the_limit_is_refused() {
    let mut a = args("http://h/");
    a.body = Some(("big".into(), vec![0u8; MAX_BODY_BYTES as usize + 1]));
    assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--body");
}

#[test]
fn closed_loop_trims_connections_and_threads() {
    let mut a = args("http://h/");
    a.requests = Some(3);
    a.threads = Some(8);
    let p = HttpPlan::from_args(a).unwrap();
    assert_eq!((p.connections, p.threads), (3, 3));
}

#[test]
fn errors_name_the_flag() {
    let cases: Vec<(HttpArgs, &str)> = vec![
        (args("not a url"), "URL"),
        (args("ftp://h/"), "URL"),
        (
            HttpArgs {
                rate: Some(0.0),
                ..args("http://h/")
            },
            "-r/--rate",
        ),
        (
            HttpArgs {
                connections: Some(0),
                ..args("http://h/")
            },
            "-c/--connections",
        ),
        (
            HttpArgs {
                requests: Some(0),
                ..args("http://h/")
            },
            "-n/--requests",
        ),
        (
            HttpArgs {
                duration: Some(Duration::ZERO),
                ..args("http://h/")
            },
            "-d/--duration",
        ),
        (
            HttpArgs {
                headers: vec!["nocolon".into()],
                ..args("http://h/")
            },
            "-H/--header",
        ),
        (
            HttpArgs {
                method: Some("GE T".into()),
                ..args("http://h/")
            },
            "-m/--method",
        ),
        (
            HttpArgs {
                timeout: Some(Duration::ZERO),
                ..args("http://h/")
            },
            "--timeout",
        ),
        (
            HttpArgs {
                threads: Some(0),
                ..args("http://h/")
            },
            "-t/--threads",
        ),
    ];
    for (a, flag) in cases {
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), flag);
    }
}

fn raw(at: &str, url: &str) -> RawTarget {
    RawTarget {
        at: at.into(),
        url: url.into(),
        ..RawTarget::default()
    }
}

fn entries(p: &HttpPlan) -> Vec<String> {
    let t = p.request_table().unwrap();
    (0..t.len())
        .map(|i| String::from_utf8(t.get(i).to_vec()).unwrap())
        .collect()
}

#[test]
fn several_targets_render_once_each_with_their_headers_and_bodies() {
    let mut a = args("http://h/a");
    a.headers = vec!["X-All: 1".into(), "X-Over: global".into()];
    a.content_type = Some("text/plain".into());
    a.targets = vec![
        RawTarget {
            method: Some("PUT".into()),
            headers: vec!["x-over: mine".into(), "Authorization: Bearer t0k".into()],
            body: Some(("b.txt".into(), b"hey".to_vec())),
            ..raw("t:2", "http://h/b?q=1")
        },
        raw("URL 3", "http://h/a"),
    ];
    let p = HttpPlan::from_args(a).unwrap();
    let e = entries(&p);
    assert_eq!(e.len(), 3);
    assert!(e[0].starts_with("GET /a HTTP/1.1\r\n"), "{}", e[0]);
    assert!(
        e[0].contains("X-Over: global\r\nContent-Type: text/plain\r\n"),
        "{}",
        e[0]
    );
    assert!(e[1].starts_with("PUT /b?q=1 HTTP/1.1\r\n"), "{}", e[1]);
    assert!(!e[1].contains("global") && e[1].contains("x-over: mine"), "{}", e[1]);
    assert!(e[1].ends_with("Content-Length: 3\r\n\r\nhey"), "{}", e[1]);
    // Names: methods differ, so they lead; the same path twice gets #N.
    let names: Vec<&str> = p.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["GET /a #1", "PUT /b?q=1", "GET /a #3"]);
    // A target's secret header is redacted like -H's.
    assert!(p.secret_headers.contains(&"authorization".to_string()));
    assert_eq!(p.request_bytes(), p.request_table().unwrap().bytes(0));
    let json = serde_json::to_string(&p.redacted()).unwrap();
    assert!(!json.contains("t0k"), "{json}");
}

#[test]
fn body_lines_make_one_request_per_line_and_errors_say_where() {
    let mut a = args("http://h/p");
    a.body_lines = Some(("l.txt".into(), b"one\ntwo\r\n\nthree".to_vec()));
    let p = HttpPlan::from_args(a).unwrap();
    let e = entries(&p);
    assert_eq!(e.len(), 3);
    assert!(e.iter().all(|r| r.starts_with("POST /p ")));
    assert!(e[1].ends_with("Content-Length: 3\r\n\r\ntwo"), "{}", e[1]);
    assert_eq!(p.body_lines.as_ref().map(|b| b.count), Some(3));
    assert!(p.targets.is_empty(), "one target: no per-target figures");

    let mut a = args("http://h/a");
    a.targets = vec![RawTarget {
        headers: vec!["nocolon".into()],
        ..raw("f.txt:4", "http://h/b")
    }];
    let e = HttpPlan::from_args(a).unwrap_err().to_string();
    assert!(e.starts_with("--targets: f.txt:4: a header: no ':'"), "{e}");
    let mut a = args("");
    a.targets = vec![raw("f.txt:9", "ftp://h/")];
    let e = HttpPlan::from_args(a).unwrap_err().to_string();
    assert!(e.starts_with("--targets: f.txt:9: scheme 'ftp'"), "{e}");
    assert_eq!(flag_of(HttpPlan::from_args(args("")).unwrap_err()), "URL");
}

#[test]
fn http2_and_http3_take_several_targets_and_redirects() {
    let two = |a: HttpArgs| HttpArgs {
        // Beside the URL.
        targets: vec![RawTarget {
            at: "URL 2".into(),
            url: "https://b.test:8443/y".into(),
            ..RawTarget::default()
        }],
        connections: Some(2),
        ..a
    };
    for (h2, h3) in [(true, false), (false, true)] {
        let base = HttpArgs {
            http2: h2,
            http3: h3,
            ..args("https://a.test/x")
        };
        let p = HttpPlan::from_args(two(base.clone())).unwrap();
        assert_eq!((p.request_table().unwrap().len(), p.origins().len()), (2, 2));
        let p = HttpPlan::from_args(HttpArgs {
            redirects: Some(3),
            ..base
        })
        .unwrap();
        assert_eq!(p.redirects, 3);
    }
}

#[test]
fn http2_and_streams_are_validated() {
    let p = HttpPlan::from_args(HttpArgs {
        http2: true,
        streams: Some(10),
        ..args("https://example.test/")
    })
    .unwrap();
    assert_eq!((p.http, p.streams), (HttpVersion::Http2, 10));
    assert_eq!(p.http.alpn(), "h2");
    assert!(
        p.describe().ends_with("HTTP/2, up to 10 streams per connection"),
        "{}",
        p.describe()
    );
    let json = serde_json::to_string(&p.redacted()).unwrap();
    assert!(
        json.contains(r#""http":"h2""#) && json.contains(r#""streams":10"#),
        "{json}"
    );
    let back: HttpPlan = serde_json::from_str(&json).unwrap();
    assert_eq!((back.http, back.streams), (HttpVersion::Http2, 10));

    let h1 = HttpPlan::from_args(args("http://example.test/")).unwrap();
    assert_eq!((h1.http, h1.streams), (HttpVersion::Http1, 1));
    // HTTP/1.1 plans are written as before (no new fields), and files
    // written before the fields existed read back as HTTP/1.1.
    let json = serde_json::to_string(&h1).unwrap();
    assert!(!json.contains("\"http\":") && !json.contains("streams"), "{json}");
    let back: HttpPlan = serde_json::from_str(&json).unwrap();
    assert_eq!((back.http, back.streams), (HttpVersion::Http1, 1));

    for (a, flag) in [
        (
            HttpArgs {
                streams: Some(2),
                ..args("http://x/")
            },
            "--streams",
        ),
        (
            HttpArgs {
                http2: true,
                streams: Some(0),
                ..args("http://x/")
            },
            "--streams",
        ),
        (
            HttpArgs {
                http2: true,
                streams: Some(MAX_STREAMS + 1),
                ..args("http://x/")
            },
            "--streams",
        ),
        (
            HttpArgs {
                http3: true,
                ..args("http://x/")
            },
            "--http3",
        ),
        (
            HttpArgs {
                http2: true,
                connections: Some(1000),
                streams: Some(MAX_STREAMS),
                ..args("http://x/")
            },
            "--streams",
        ),
    ] {
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), flag);
    }

    // HTTP/3 over https, closed or open loop, with streams.
    let p = HttpPlan::from_args(HttpArgs {
        http3: true,
        streams: Some(8),
        rate: Some(100.0),
        ..args("https://x:8443/")
    })
    .unwrap();
    assert_eq!((p.http, p.streams), (HttpVersion::Http3, 8));
    let e = HttpPlan::from_args(HttpArgs {
        http3: true,
        ..args("http://x:8443/a")
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("https://x:8443/a"), "{e}");
    let mut a = HttpArgs {
        http3: true,
        ..args("https://x/")
    };
    a.tls.version = Some(crate::tls::TlsVersion::Tls12);
    assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--tls-version");
}

#[test]
fn plan_round_trips_through_json() {
    let mut a = args("http://h:81/");
    a.rate = Some(250.0);
    a.duration = Some(Duration::from_secs(90));
    let p = HttpPlan::from_args(a).unwrap();
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.contains("\"1m30s\""), "{text}");
    let back: HttpPlan = serde_json::from_str(&text).unwrap();
    assert_eq!(back, p);
}
