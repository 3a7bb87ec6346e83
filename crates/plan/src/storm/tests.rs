use super::*;
use crate::http::DEFAULT_TIMEOUT;

fn args(target: &str) -> StormArgs {
    StormArgs {
        target: target.into(),
        connections: Some(100),
        cores: 2,
        ..StormArgs::default()
    }
}

#[test]
fn expect_is_compiled_once_and_round_trips() {
    let with = |re: &str| {
        StormPlan::from_args(StormArgs {
            steps: vec![StepArg::Send("PING\\r\\n".into()), StepArg::Expect(re.into())],
            ..args("tcp://127.0.0.1:9000")
        })
    };
    for bad in ["*", "(a", "a{2,1}", "[z-a]"] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.starts_with("--expect: '"), "{bad}: {e}");
        assert!(e.contains("is not a regular expression"), "{bad}: {e}");
        assert!(
            !e.contains('\n') && !e.contains("parse error"),
            "one line, the reason only: {e}"
        );
    }
    let e = with("*").unwrap_err().to_string();
    assert!(
        e.ends_with("'*' is not a regular expression: repetition operator missing expression"),
        "{e}"
    );
    let p = with("^\\+PONG").unwrap();
    let Some(Protocol::Lines { steps, .. }) = &p.protocol else {
        panic!("{:?}", p.protocol)
    };
    let LineStep::Expect(re) = &steps[1] else {
        panic!("{steps:?}")
    };
    assert!(re.regex().is_match(b"+PONG"));
    let json = serde_json::to_string(&steps).unwrap();
    assert_eq!(json, r#"[{"send":"PING\r\n"},{"expect":"^\\+PONG"}]"#);
    let back: Vec<LineStep> = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, steps);
    assert!(serde_json::from_str::<Vec<LineStep>>(r#"[{"expect":"*"}]"#).is_err());
}

#[test]
fn secret_sends_are_redacted_in_files_and_restored_from_orders() {
    let p = StormPlan::from_args(StormArgs {
        steps: vec![
            StepArg::SendSecret("AUTH hunter2\\r\\n".into()),
            StepArg::Expect("^\\+OK".into()),
            StepArg::Send("PING\\r\\n".into()),
        ],
        ..args("tcp://127.0.0.1:9000")
    })
    .unwrap();
    assert_eq!(p.line_secrets(), ["AUTH hunter2\r\n"]);
    let json = serde_json::to_string(&p).unwrap();
    assert!(!json.contains("hunter2"), "{json}");
    assert!(json.contains(r#"{"send_secret":"<redacted>"}"#), "{json}");
    assert!(!format!("{p:?}").contains("hunter2"));
    let mut back: StormPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back.line_secrets(), [""]);
    back.restore_line_secrets(&p.line_secrets()).unwrap();
    assert_eq!(back, p);
    assert!(back.restore_line_secrets(&[]).is_err());
    assert!(back.restore_line_secrets(&["a".into(), "b".into()]).is_err());
    let e = StormPlan::from_args(StormArgs {
        steps: vec![StepArg::SendSecret("pw\\q-hunter2".into())],
        ..args("tcp://127.0.0.1:9000")
    })
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("--send-secret: ") && !e.contains("hunter2"), "{e}");
}

#[test]
fn a_bad_target_with_a_password_is_quoted_without_it() {
    for t in [
        "nats://u:s3cr3t@127.0.0.1:99999",
        "tcp://u:s3cr3t@[::1",
        "tcp://u:s3cr3t@127.0.0.1",
    ] {
        let e = parse_target(t).unwrap_err().to_string();
        assert!(e.starts_with("TARGET: ") && !e.contains("s3cr3t"), "{e}");
    }
}

#[test]
fn targets_and_defaults() {
    let p = StormPlan::from_args(args("tcp://127.0.0.1:9000")).unwrap();
    assert_eq!(p.target.scheme, StormScheme::Tcp);
    assert_eq!(p.request, None);
    assert_eq!(p.hold, Duration::ZERO);
    assert_eq!(p.procs, Procs::Auto);
    assert_eq!(p.workers, 2);
    let p = StormPlan::from_args(args("https://localhost:8443/health?x=1")).unwrap();
    assert_eq!(p.request.as_ref().unwrap().path, "/health?x=1");
    assert!(p.tls.is_some());
    let bytes = String::from_utf8(p.request_bytes().unwrap()).unwrap();
    assert!(
        bytes.starts_with("GET /health?x=1 HTTP/1.1\r\nHost: localhost:8443\r\n"),
        "{bytes}"
    );
    let p = StormPlan::from_args(StormArgs {
        request: Some("none".into()),
        ..args("http://h:80/")
    })
    .unwrap();
    assert_eq!(p.request, None);
}

#[test]
fn sources() {
    assert_eq!(parse_sources("127.0.0.2-127.0.0.4").unwrap().len(), 3);
    let v = parse_sources("127.0.1.0/30").unwrap();
    assert_eq!(
        v,
        vec!["127.0.1.1".parse::<IpAddr>().unwrap(), "127.0.1.2".parse().unwrap()]
    );
    assert_eq!(parse_sources("::1").unwrap().len(), 1);
    assert!(parse_sources("127.0.0.9-127.0.0.1").is_err());
    assert!(parse_sources("10.0.0.0/8").is_err(), "too many");
    assert!(parse_sources("nope").unwrap_err().to_string().contains("--source"));
}

#[test]
fn errors_name_the_flag() {
    let flag = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
        PlanError::Invalid { flag, .. } => flag,
    };
    assert_eq!(
        flag(StormArgs {
            connections: None,
            ..args("tcp://h:1")
        }),
        "-n/--count"
    );
    assert_eq!(flag(args("ftp://h:1")), "TARGET");
    assert_eq!(flag(args("tcp://h")), "TARGET");
    assert_eq!(
        flag(StormArgs {
            rate: Some(0.0),
            ..args("tcp://h:1")
        }),
        "--rate"
    );
    assert_eq!(
        flag(StormArgs {
            request: Some("GET".into()),
            ..args("tcp://h:1")
        }),
        "--request"
    );
    assert_eq!(
        flag(StormArgs {
            procs: Some("0".into()),
            ..args("tcp://h:1")
        }),
        "--procs"
    );
    assert_eq!(
        flag(StormArgs {
            trigger_timeout: Some(Duration::from_secs(5)),
            ..args("tcp://h:1")
        }),
        "--trigger-timeout"
    );
    assert_eq!(
        flag(StormArgs {
            trigger: Some("true".into()),
            trigger_timeout: Some(Duration::ZERO),
            hold: Some(Duration::from_secs(1)),
            ..args("tcp://h:1")
        }),
        "--trigger-timeout"
    );
    let tls = TlsSettings {
        insecure: true,
        ..TlsSettings::default()
    };
    assert_eq!(
        flag(StormArgs {
            tls,
            ..args("tcp://h:1")
        }),
        "--cacert/--cert/--key/--insecure/--tls-*"
    );
}

#[test]
fn client_profiles() {
    let p = StormPlan::from_args(args("nats://127.0.0.1:4222")).unwrap();
    assert_eq!(p.client, ClientProfile::Lenient, "the default");
    assert_eq!(p.timeout, DEFAULT_TIMEOUT);
    assert_eq!(p.reconnect, None);
    let go = |extra: StormArgs| StormPlan::from_args(extra).unwrap();
    let p = go(StormArgs {
        client: Some("nats.go".into()),
        hold: Some(Duration::from_secs(10)),
        ..args("nats://127.0.0.1:4222")
    });
    assert_eq!(p.client, ClientProfile::NatsGo);
    assert_eq!(p.timeout, Duration::from_secs(2), "nats.go's DefaultTimeout");
    assert_eq!(
        p.reconnect,
        Some(Reconnect {
            wait: Duration::from_secs(2),
            jitter: Duration::from_millis(100),
            max: 60
        }),
        "nats.go reconnects by default"
    );
    assert!(p.describe().contains("as nats.go clients"), "{}", p.describe());
    let p = go(StormArgs {
        client: Some("nats.go".into()),
        hold: Some(Duration::from_secs(10)),
        timeout: Some(Duration::from_secs(5)),
        protocol: Some("nats".into()),
        ..args("tls://127.0.0.1:4222")
    });
    assert_eq!(p.timeout, Duration::from_secs(5), "an explicit --timeout wins");
    assert_eq!(p.reconnect.unwrap().jitter, Duration::from_secs(1), "TLS jitter");
    // Without --hold there is nothing to reconnect.
    assert_eq!(
        go(StormArgs {
            client: Some("nats.go".into()),
            ..args("nats://h:1")
        })
        .reconnect,
        None
    );
    let err = |a: StormArgs| StormPlan::from_args(a).unwrap_err().to_string();
    let e = err(StormArgs {
        client: Some("nats.go".into()),
        ..args("tcp://h:1")
    });
    assert!(e.contains("--client") && e.contains("NATS"), "{e}");
    let e = err(StormArgs {
        client: Some("nats.js".into()),
        ..args("nats://h:1")
    });
    assert!(e.contains("--client") && e.contains("lenient or nats.go"), "{e}");
}

#[test]
fn http2_is_for_http_targets_and_round_trips() {
    let p = StormPlan::from_args(StormArgs {
        http2: true,
        ..args("https://h:8443/x")
    })
    .unwrap();
    assert_eq!(p.http, HttpVersion::Http2);
    assert!(p.describe().contains("one GET /x each over HTTP/2"), "{}", p.describe());
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains(r#""http":"h2""#), "{json}");
    assert_eq!(
        serde_json::from_str::<StormPlan>(&json).unwrap().http,
        HttpVersion::Http2
    );
    let none = StormPlan::from_args(StormArgs {
        http2: true,
        request: Some("none".into()),
        ..args("http://h:80/")
    })
    .unwrap();
    assert!(
        none.describe().contains("HTTP/2 handshakes only"),
        "{}",
        none.describe()
    );
    // HTTP/1.1 plans serialize as before.
    let plain = StormPlan::from_args(args("http://h:80/")).unwrap();
    assert!(!serde_json::to_string(&plain).unwrap().contains(r#""http":"#));
    let flag = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
        PlanError::Invalid { flag, .. } => flag,
    };
    assert_eq!(
        flag(StormArgs {
            http2: true,
            ..args("tls://h:1")
        }),
        "--http2"
    );
    assert_eq!(
        flag(StormArgs {
            http2: true,
            steps: vec![StepArg::Send("x".into())],
            ..args("http://h:1/")
        }),
        "--http2"
    );
}

#[test]
fn http3_is_for_https_targets_without_proxy_or_sources() {
    let p = StormPlan::from_args(StormArgs {
        http3: true,
        ..args("https://h:8443/x")
    })
    .unwrap();
    assert_eq!(p.http, HttpVersion::Http3);
    assert!(p.describe().contains("one GET /x each over HTTP/3"), "{}", p.describe());
    let json = serde_json::to_string(&p).unwrap();
    assert_eq!(
        serde_json::from_str::<StormPlan>(&json).unwrap().http,
        HttpVersion::Http3
    );
    let refused = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
        PlanError::Invalid { flag, message } => format!("{flag}: {message}"),
    };
    for (a, flag, says) in [
        (
            StormArgs {
                http3: true,
                ..args("http://h:1/")
            },
            "--http3",
            "https://",
        ),
        (
            StormArgs {
                http3: true,
                http2: true,
                ..args("https://h:1/")
            },
            "--http2/--http3",
            "one of them",
        ),
        (
            StormArgs {
                http3: true,
                source: Some("127.0.0.2-127.0.0.3".into()),
                ..args("https://h:1/")
            },
            "--source",
            "UDP socket",
        ),
        (
            StormArgs {
                http3: true,
                reach: crate::reach::ReachArgs {
                    proxy: Some("http://127.0.0.1:3128".into()),
                    ..Default::default()
                },
                ..args("https://h:1/")
            },
            "--http3",
            "proxy",
        ),
    ] {
        let e = refused(a);
        assert!(e.starts_with(flag) && e.contains(says), "{e}");
    }
}

#[test]
fn websocket_targets_steps_and_files() {
    let p = StormPlan::from_args(StormArgs {
        steps: vec![
            StepArg::Send("hi\\n".into()),
            StepArg::Expect("^hi".into()),
            StepArg::SendBinary {
                path: "@f.bin".into(),
                bytes: vec![0, 255, 7],
            },
        ],
        ping_every: Some(Duration::from_secs(5)),
        ..args("wss://example.test/chat?room=1")
    })
    .unwrap();
    assert_eq!(p.target.scheme, StormScheme::Wss);
    assert_eq!(p.target.port, 443);
    assert!(p.tls.is_some(), "wss is TLS");
    assert!(p.request.is_none(), "the upgrade is the request");
    let Some(Protocol::WebSocket(ws)) = &p.protocol else {
        panic!("{:?}", p.protocol);
    };
    assert_eq!(ws.path, "/chat?room=1");
    assert_eq!(ws.host, "example.test");
    assert_eq!(ws.ping_every, Some(Duration::from_secs(5)));
    assert_eq!(ws.steps[0], WsStep::Text("hi\n".into()));
    // The bytes travel in the plan (to a storm's parts) as base64.
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"bytes\":\"AP8H\""), "{json}");
    let back: StormPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);

    let ws = StormPlan::from_args(args("ws://127.0.0.1:8080")).unwrap();
    assert_eq!(ws.target.port, 8080);
    let Some(Protocol::WebSocket(w)) = &ws.protocol else {
        panic!("{:?}", ws.protocol);
    };
    assert_eq!((w.path.as_str(), w.host.as_str()), ("/", "127.0.0.1:8080"));
}

#[test]
fn websocket_flags_that_do_not_fit_name_themselves() {
    let err = |a: StormArgs| StormPlan::from_args(a).unwrap_err().to_string();
    let e = err(StormArgs {
        ping_every: Some(Duration::from_secs(1)),
        ..args("tcp://h:1")
    });
    assert!(e.contains("--ping-every") && e.contains("ws://"), "{e}");
    let e = err(StormArgs {
        steps: vec![StepArg::SendBinary {
            path: "@x".into(),
            bytes: vec![1],
        }],
        ..args("tcp://h:1")
    });
    assert!(e.contains("--send-binary"), "{e}");
    let e = err(StormArgs {
        steps: vec![StepArg::SendBinary {
            path: "@x".into(),
            bytes: vec![0; MAX_BINARY + 1],
        }],
        ..args("ws://h:1")
    });
    assert!(e.contains("--send-binary") && e.contains("at most"), "{e}");
    let e = err(StormArgs {
        request: Some("GET /".into()),
        ..args("ws://h:1")
    });
    assert!(e.contains("--request"), "{e}");
    let e = err(StormArgs {
        protocol: Some("nats".into()),
        ..args("ws://h:1")
    });
    assert!(e.contains("--protocol"), "{e}");
    let e = err(StormArgs {
        steps: vec![StepArg::SendSecret("x".into())],
        ..args("ws://h:1")
    });
    assert!(e.contains("--send-secret"), "{e}");
}

#[test]
fn websocket_url_credentials_become_the_upgrades_authorization_and_stay_out_of_files() {
    let p = StormPlan::from_args(args("ws://al%40ce:p%3Ass@127.0.0.1:9000/chat")).unwrap();
    let Some(Protocol::WebSocket(ws)) = &p.protocol else {
        panic!("{:?}", p.protocol)
    };
    let basic = crate::basic_authorization("al@ce", "p:ss");
    assert_eq!(ws.authorization.as_ref().map(SecretText::expose), Some(basic.as_str()));
    assert_eq!(p.ws_authorization().as_deref(), Some(basic.as_str()));
    let json = serde_json::to_string(&p).unwrap();
    let debug = format!("{p:?}");
    for text in [&json, &debug] {
        assert!(
            !text.contains("p%3Ass") && !text.contains("p:ss") && !text.contains(&basic[6..]),
            "{text}"
        );
    }
    // A storm part's orders carry it apart and put it back.
    let mut back: StormPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back.ws_authorization(), None);
    back.restore_ws_authorization(p.ws_authorization().as_deref());
    assert_eq!(back.ws_authorization(), p.ws_authorization());
    // A user alone is `user:`, as for HTTP; no userinfo, no header.
    let user = StormPlan::from_args(args("wss://bob@127.0.0.1:9443/")).unwrap();
    assert_eq!(user.ws_authorization(), Some(crate::basic_authorization("bob", "")));
    let none = StormPlan::from_args(args("ws://127.0.0.1:9000/")).unwrap();
    assert_eq!(none.ws_authorization(), None);
}

#[test]
fn the_ring_carries_tcp_and_tls_storms_and_refuses_the_rest_by_name() {
    use crate::IoModel;
    for target in [
        "tcp://127.0.0.1:9000",
        "http://127.0.0.1:9000/",
        "tls://127.0.0.1:9000",
        "https://127.0.0.1:9000/",
    ] {
        let p = StormPlan::from_args(StormArgs {
            io: IoModel::Uring,
            ..args(target)
        })
        .unwrap();
        assert_eq!((p.io, p.ring_refuses()), (IoModel::Uring, None), "{target}");
    }
    assert_eq!(
        StormPlan::from_args(args("tcp://127.0.0.1:9000")).unwrap().io,
        IoModel::Auto
    );
    for (target, extra, what) in [
        ("nats://127.0.0.1:4222", None, "NATS"),
        ("ws://127.0.0.1:9000/", None, "WebSocket"),
        ("http://127.0.0.1:9000/", Some("http2"), "HTTP/2"),
    ] {
        let a = StormArgs {
            http2: extra == Some("http2"),
            ..args(target)
        };
        // auto: epoll for it, without an error.
        let auto = StormPlan::from_args(a.clone()).unwrap();
        assert!(
            auto.ring_refuses().unwrap().contains(what),
            "{target}: {:?}",
            auto.ring_refuses()
        );
        let e = StormPlan::from_args(StormArgs {
            io: IoModel::Uring,
            ..a
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--io") && e.contains(what) && e.contains("--io epoll"),
            "{target}: {e}"
        );
    }
    // Results written before storms had --io read back as epoll.
    let p = StormPlan::from_args(args("tcp://127.0.0.1:9000")).unwrap();
    let mut json = serde_json::to_value(&p).unwrap();
    json.as_object_mut().unwrap().remove("io");
    let back: StormPlan = serde_json::from_value(json).unwrap();
    assert_eq!(back.io, IoModel::Epoll);
}
