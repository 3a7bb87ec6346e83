//! `throng grpc`: unary and streaming calls as HTTP/2 requests.
//!
//! ```text
//!  --proto FILE (+ -I DIRS) ── protox ──► descriptor pool ── --call ──► method
//!  (no --proto: the server's reflection service ──► descriptor pool)
//!  --data JSON ── prost-reflect (the method's input type) ──► message bytes,
//!                 framed once (gRPC's 5-byte prefix) as the request body
//!  HttpPlan (POST https|http://HOST:PORT/pkg.Service/Method, HTTP/2,
//!            content-type application/grpc, te: trailers, metadata,
//!            grpc-timeout) + GrpcCall ──► the engine's HTTP/2 pool
//! ```
//!
//! The engine counts each call's `grpc-status` as its status; reports
//! name the codes. A server-streaming call is the same request; the engine
//! counts the messages of its reply and times the first and the last. A
//! client-streaming or bidirectional call's body is its messages
//! (crate::commands::grpc_stream), which the engine sends in order, paced
//! by `--stream-rate`, then half-closes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use throng_plan::{GRPC_CODES, GrpcCall, HttpArgs, HttpPlan, is_token};

use super::shared::{finish_runs, repeated};
use crate::args::{Format, GrpcCmd, RepeatArgs};
use crate::exit::UsageError;
use crate::progress::Display;

/// `plan.grpc.proto` when the descriptors came from the server.
const REFLECTED: &str = "server reflection";

/// `--timeout`'s default (as `throng http`'s).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

pub fn run(c: GrpcCmd) -> anyhow::Result<ExitCode> {
    let (service, method) = split_call(&c.call)?;
    if matches!(c.output.format, Format::Httperf) {
        return Err(UsageError(
            "--format httperf: httperf's view counts HTTP statuses; a gRPC run is shown as text, ab or json".into(),
        )
        .into());
    }
    match &c.proto {
        // Anything else that is there (a pipe, a device) is read through
        // the bounded reader, which says what is wrong with it.
        Some(proto) if !proto.exists() || proto.is_dir() => {
            let what = if proto.is_dir() { "a directory" } else { "no such file" };
            return Err(UsageError(format!(
                "--proto {}: {what}; give the .proto file's path",
                proto.display()
            ))
            .into());
        }
        None if !c.import_paths.is_empty() => {
            return Err(UsageError(
                "-I/--import-path: imports are looked up for --proto FILE; give --proto, or leave out -I to ask \
                 the server's reflection service"
                    .into(),
            )
            .into());
        }
        _ => {}
    }
    let json = match &c.data {
        Some(data) => {
            let (from, bytes) = super::http::read_data(data)?;
            let text = String::from_utf8(bytes)
                .map_err(|_| UsageError(format!("--data {from}: not UTF-8 text; give the message as JSON")))?;
            Some((from, text))
        }
        None => None,
    };
    let expect = match &c.expect_code {
        Some(list) => parse_codes(list).map_err(|e| UsageError(format!("--expect-code {list}: {e}")))?,
        None => vec![0],
    };
    if c.address.contains('/') || !c.address.contains(':') {
        return Err(UsageError(format!(
            "'{}': give the server as HOST:PORT, e.g. 127.0.0.1:50051 (no scheme: --plaintext chooses h2c)",
            c.address
        ))
        .into());
    }
    let mut headers = vec![
        "content-type: application/grpc".to_string(),
        "te: trailers".to_string(),
        format!("user-agent: throng/{}", env!("CARGO_PKG_VERSION")),
    ];
    for (i, m) in c.metadata.iter().enumerate() {
        headers.push(metadata(i + 1, m)?);
    }
    for key in &c.secret_metadata {
        if key.trim().is_empty() || !key.trim().bytes().all(is_token) {
            return Err(UsageError(format!(
                "--secret-metadata '{}': not a metadata key; give the key only, e.g. --secret-metadata x-api-key",
                key.escape_debug()
            ))
            .into());
        }
    }
    if let Some(d) = c.deadline {
        headers.push(format!("grpc-timeout: {}", grpc_timeout(d)?));
    }
    let gzip = c.grpc_encoding.as_deref() == Some("gzip");
    if gzip {
        headers.push("grpc-encoding: gzip".to_string());
        headers.push("grpc-accept-encoding: gzip".to_string());
    }
    let scheme = if c.plaintext { "http" } else { "https" };
    let mut plan = HttpPlan::from_args(HttpArgs {
        url: format!("{scheme}://{}/{}", c.address, c.call),
        connections: Some(c.connections.unwrap_or(1)),
        requests: c.requests,
        duration: c.duration,
        rate: c.rate,
        threads: c.threads,
        method: Some("POST".to_string()),
        headers,
        secret_headers: c.secret_metadata.clone(),
        // The message is encoded once the method's descriptor is known.
        body: Some((
            json.as_ref().map_or_else(|| "{}".to_string(), |(from, _)| from.clone()),
            Vec::new(),
        )),
        // A deadline past the default --timeout is the longer wait.
        timeout: c.timeout.or_else(|| c.deadline.map(|d| d.max(DEFAULT_TIMEOUT))),
        http2: true,
        streams: Some(c.streams.unwrap_or(50)),
        tls: super::tls::settings(&c.tls),
        cores: throng_engine::sys::cores(),
        ..HttpArgs::default()
    })?;
    let tls = match &plan.tls {
        Some(settings) => Some(super::tls::client_config(settings, Path::new(""), &[b"h2"])?),
        None => None,
    };
    let pool = match &c.proto {
        Some(proto) => compile(proto, &c.import_paths)?,
        None => super::grpc_reflect::pool(&plan, tls.clone(), service)?,
    };
    let method = find_method(&pool, service, method, &c.call)?;
    let server_streaming = method.is_server_streaming();
    let client_streaming = method.is_client_streaming();
    if c.expect_messages.is_some() && !server_streaming {
        let kind = if client_streaming { "client-streaming" } else { "unary" };
        return Err(UsageError(format!(
            "--expect-messages: {} is a {kind} method (one reply per call); leave it out, or call a \
             server-streaming method",
            c.call
        ))
        .into());
    }
    let json = json.as_ref().map(|(f, t)| (f.as_str(), t.as_str()));
    let stream_messages = if client_streaming {
        let (body, n) = super::grpc_stream::body(&method, json, c.stream_messages, c.stream_rate)?;
        plan.body = body.into();
        Some(n)
    } else {
        super::grpc_stream::refuse_flags(&c.call, c.stream_messages, c.stream_rate)?;
        plan.body = super::grpc_stream::encode(&method, json)?.into();
        None
    };
    if gzip {
        plan.body = super::grpc_stream::gzip_messages(&plan.body)?.into();
    }
    plan.grpc = Some(Box::new(GrpcCall {
        call: c.call.clone(),
        proto: c
            .proto
            .as_ref()
            .map_or_else(|| REFLECTED.to_string(), |p| p.display().to_string()),
        expect,
        deadline: c.deadline,
        server_streaming,
        expect_messages: c.expect_messages,
        client_streaming,
        stream_messages,
        stream_rate: c.stream_rate.filter(|_| client_streaming),
        encoding: gzip.then(|| "gzip".to_string()),
    }));
    super::export::check_outputs(&[
        ("--json", c.output.json.as_deref()),
        ("--html", c.output.html.as_deref()),
    ])?;
    let (exports, rows) = super::export::open_run(&c.output.export)?;
    let repeat = RepeatArgs {
        count: 1,
        settle: Duration::ZERO,
    };
    let runs = repeated(repeat, c.output.quiet, |control| {
        let display = Display::new(c.output.quiet);
        let result = throng_engine::run_http(&plan, tls.clone(), rows.as_ref(), control, &mut |p| display.tick(p));
        display.finish();
        result.context("the run could not start")
    })?;
    let (code, merged) = finish_runs(repeat, &runs, c.output.json.as_deref(), c.output.format)?;
    exports.write(&merged)?;
    if let Some(path) = &c.output.html {
        super::shared::write_html(path, &merged)?;
    }
    Ok(code.into())
}

/// `pkg.Service/Method` → (`pkg.Service`, `Method`).
fn split_call(call: &str) -> Result<(&str, &str), UsageError> {
    match call.split_once('/') {
        Some((s, m)) if !s.is_empty() && !m.is_empty() && !m.contains('/') => Ok((s, m)),
        _ => Err(UsageError(format!(
            "--call {call}: give the method as package.Service/Method, e.g. helloworld.Greeter/SayHello"
        ))),
    }
}

/// Compiles the .proto file (and what it imports) into a descriptor pool.
fn compile(proto: &Path, imports: &[PathBuf]) -> anyhow::Result<DescriptorPool> {
    let dir = match proto.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut includes = vec![dir];
    includes.extend(imports.iter().cloned());
    let fail = |e: protox::Error| UsageError(format!("--proto {}: {}", proto.display(), describe(&e)));
    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(BoundedIncludes {
        dirs: includes,
        counted: std::cell::Cell::new(0),
    });
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    let name = proto.file_name().map_or_else(|| proto.to_path_buf(), PathBuf::from);
    compiler.include_imports(true);
    compiler.open_file(&name).map_err(fail)?;
    Ok(compiler.descriptor_pool())
}

/// The include directories (`--proto`'s own, then `-I`), each file read
/// through the one bounded reader (at most
/// [`throng_plan::input::MAX_PROTO_BYTES`]): protox's own resolver reads a
/// file whole, and an import of `/dev/zero` filled the memory. Each file's
/// definitions are counted before protox parses it: more than
/// [`throng_scenario::grpc::MAX_DEFINITIONS`] in all are refused (compiling
/// takes about 10 KB for each).
struct BoundedIncludes {
    dirs: Vec<PathBuf>,
    counted: std::cell::Cell<usize>,
}

impl protox::file::FileResolver for BoundedIncludes {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.dirs.iter().find_map(|dir| {
            let rel = path.strip_prefix(dir).ok()?;
            let parts: Option<Vec<&str>> = rel
                .components()
                .map(|c| match c {
                    std::path::Component::Normal(p) => p.to_str(),
                    _ => None,
                })
                .collect();
            parts.filter(|p| !p.is_empty()).map(|p| p.join("/"))
        })
    }

    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        use throng_plan::input::{MAX_PROTO_BYTES, ReadError, read_limited_text};
        for dir in &self.dirs {
            let path = dir.join(name);
            match read_limited_text(&path, MAX_PROTO_BYTES) {
                Ok(text) => {
                    let counted = self.counted.get() + throng_scenario::grpc::definitions(&text);
                    if counted > throng_scenario::grpc::MAX_DEFINITIONS {
                        return Err(protox::Error::new(std::io::Error::other(
                            throng_scenario::grpc::too_many_definitions(&path.display().to_string()),
                        )));
                    }
                    self.counted.set(counted);
                    return protox::file::File::from_source(name, &text);
                }
                Err(Err(e)) if e.is_not_found() => {}
                Err(Err(ReadError::Io(e))) => {
                    return Err(protox::Error::new(std::io::Error::new(
                        e.kind(),
                        format!("{}: cannot read it: {e}", path.display()),
                    )));
                }
                Err(Err(e)) => {
                    return Err(protox::Error::new(std::io::Error::other(format!(
                        "{}: {e} (a .proto file)",
                        path.display()
                    ))));
                }
                Err(Ok(at)) => {
                    return Err(protox::Error::new(std::io::Error::other(format!(
                        "{}: not UTF-8 text (byte {at}); save it as UTF-8",
                        path.display()
                    ))));
                }
            }
        }
        Err(protox::Error::file_not_found(name))
    }
}

/// A protox error with where it happened (`FILE:LINE:COL`) when it says.
fn describe(e: &protox::Error) -> String {
    use miette::Diagnostic as _;
    let at = e
        .labels()
        .and_then(|mut l| l.next())
        .and_then(|label| {
            let file = e.file()?;
            let source = e.source_code()?;
            let span = source.read_span(label.inner(), 0, 0).ok()?;
            Some(format!("{file}:{}:{}: ", span.line() + 1, span.column() + 1))
        })
        .unwrap_or_default();
    let hint = if e.is_file_not_found() {
        "; give the file's path, and -I DIR for the directories its imports are under"
    } else {
        "; fix the .proto file"
    };
    format!("{at}{e}{hint}")
}

/// The method `service`/`method` of the pool.
fn find_method(pool: &DescriptorPool, service: &str, method: &str, call: &str) -> Result<MethodDescriptor, UsageError> {
    let Some(svc) = pool.get_service_by_name(service) else {
        let known: Vec<String> = pool.services().map(|s| s.full_name().to_string()).take(20).collect();
        return Err(UsageError(format!(
            "--call {call}: no service {service} in the descriptors (they define: {}); give the service's full \
             name, with its package",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let Some(m) = svc.methods().find(|m| m.name() == method) else {
        let known: Vec<String> = svc.methods().map(|m| m.name().to_string()).take(20).collect();
        return Err(UsageError(format!(
            "--call {call}: {service} has no method {method} (it has: {})",
            known.join(", ")
        )));
    };
    Ok(m)
}

/// `--expect-code`: names (`NOT_FOUND`) or numbers (`5`), comma-separated.
fn parse_codes(list: &str) -> Result<Vec<u16>, NotACode> {
    list.split(',')
        .map(str::trim)
        .map(|part| {
            let upper = part.to_ascii_uppercase();
            GRPC_CODES
                .iter()
                .position(|n| *n == upper)
                .and_then(|i| u16::try_from(i).ok())
                .or_else(|| part.parse::<u16>().ok().filter(|&c| usize::from(c) < GRPC_CODES.len()))
                .ok_or_else(|| NotACode(part.to_string()))
        })
        .collect()
}

/// A part of `--expect-code` that names no gRPC status code.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a gRPC status code; use names like OK,NOT_FOUND or 0-16")]
struct NotACode(String);

/// The `n`th `--metadata 'key: value'` as a request header line. Its value
/// may be a secret (a token, an API key): an error names the key, or the
/// flag's place when there is no well-formed key, never the value.
fn metadata(n: usize, m: &str) -> Result<String, UsageError> {
    let Some((key, value)) = m.split_once(':') else {
        return Err(UsageError(format!(
            "--metadata (the {}): no ':' between key and value; give it as 'key: value', e.g. --metadata 'x-user: 42'",
            ordinal(n)
        )));
    };
    let key = key.trim().to_ascii_lowercase();
    if key.is_empty() || !key.bytes().all(is_token) || key.len() > 256 {
        return Err(UsageError(format!(
            "--metadata (the {}): the key is empty or has characters a metadata key cannot have; give it as \
             'key: value', e.g. --metadata 'x-user: 42'",
            ordinal(n)
        )));
    }
    if key.starts_with("grpc-") || ["content-type", "te"].contains(&key.as_str()) {
        return Err(UsageError(format!(
            "--metadata '{key}: …': '{key}' is not a metadata key throng lets you set (grpc-*, content-type and \
             te are the protocol's); use another key"
        )));
    }
    Ok(format!("{key}: {}", value.trim()))
}

/// `1st`, `2nd`, `3rd`, `4th`…
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The `grpc-timeout` value: at most 8 digits and a unit (gRPC over HTTP/2).
fn grpc_timeout(d: Duration) -> Result<String, UsageError> {
    let ms = d.as_millis();
    if ms == 0 {
        return Err(UsageError("--deadline: give at least 1ms".into()));
    }
    Ok(if ms < 100_000_000 {
        format!("{ms}m")
    } else {
        format!("{}S", (d.as_secs()).min(99_999_999))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_by_name_and_number() {
        assert_eq!(parse_codes("OK, not_found,14").unwrap(), vec![0, 5, 14]);
        assert!(parse_codes("17").is_err());
        assert_eq!(
            parse_codes("OK,NOPE").unwrap_err().to_string(),
            "'NOPE' is not a gRPC status code; use names like OK,NOT_FOUND or 0-16"
        );
    }

    #[test]
    fn calls_and_metadata() {
        assert_eq!(split_call("a.B/C").unwrap(), ("a.B", "C"));
        assert!(split_call("a.B").is_err());
        assert!(split_call("a.B/C/D").is_err());
        assert_eq!(metadata(1, "X-User: 42").unwrap(), "x-user: 42");
        assert!(metadata(1, "grpc-timeout: 1S").is_err());
        // The value never shows in an error, however the line is malformed.
        for bad in [
            "authorization Bearer s3cr3t",
            "bad key: s3cr3t",
            "grpc-x: s3cr3t",
            ": s3cr3t",
        ] {
            let e = metadata(2, bad).unwrap_err().to_string();
            assert!(e.starts_with("--metadata") && !e.contains("s3cr3t"), "{e}");
        }
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(12), "12th");
        assert_eq!(ordinal(23), "23rd");
        assert_eq!(grpc_timeout(Duration::from_millis(250)).unwrap(), "250m");
        assert!(grpc_timeout(Duration::ZERO).is_err());
    }
}
