//! Server reflection: the descriptor pool of `throng grpc` without
//! `--proto`, asked of the server before the run.
//!
//! ```text
//!  grpc.reflection.v1 (then v1alpha when the server answers UNIMPLEMENTED)
//!   ServerReflectionInfo: file_containing_symbol(SERVICE)
//!     ──► FileDescriptorProtos (the service's file, usually with its imports)
//!   file_by_filename(IMPORT)... for imports still missing, a few rounds
//!     ──► DescriptorPool (prost-reflect)
//! ```
//!
//! Each round is one call (`throng_engine::grpc_call`): its requests in one
//! stream, the stream ended, the answers read. The reflection messages are
//! declared here with prost's derive (their `.proto` is grpc's
//! `reflection.proto`; only the fields throng uses).

use prost::Message as _;
use prost_reflect::DescriptorPool;
use prost_reflect::prost_types::FileDescriptorProto;
use throng_engine::grpc_call::{CallError, grpc_call};
use throng_plan::HttpPlan;
use throng_tls::rustls::ClientConfig;

use super::UsageError;

/// The reflection services, newest first.
const VERSIONS: [&str; 2] = ["grpc.reflection.v1", "grpc.reflection.v1alpha"];
/// Rounds of asking for imports still missing.
const ROUNDS: usize = 8;
/// Files a pool may take from a server.
const MAX_FILES: usize = 1000;
/// Bytes of one reflection answer.
const MAX_ANSWER: usize = 16 << 20;
/// gRPC's UNIMPLEMENTED and NOT_FOUND.
const UNIMPLEMENTED: u16 = 12;
const NOT_FOUND: i32 = 5;

#[derive(Clone, PartialEq, prost::Message)]
struct ReflectionRequest {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(oneof = "Ask", tags = "3, 4, 7")]
    ask: Option<Ask>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Ask {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
    #[prost(string, tag = "7")]
    ListServices(String),
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReflectionResponse {
    #[prost(oneof = "Answer", tags = "4, 6, 7")]
    answer: Option<Answer>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Answer {
    #[prost(message, tag = "4")]
    Files(FileDescriptorResponse),
    #[prost(message, tag = "6")]
    Services(ListServiceResponse),
    #[prost(message, tag = "7")]
    Error(ErrorResponse),
}

#[derive(Clone, PartialEq, prost::Message)]
struct FileDescriptorResponse {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServiceResponse {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ErrorResponse {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// A scenario's `proto: { reflection: true }`: asks `target` (over
/// HTTP/2, TLS with `tls` for https) for `service`'s descriptors; `dir` is
/// the scenario file's (TLS files are relative to it). Errors name the
/// scenario's settings, not `throng grpc`'s flags.
pub fn for_scenario(
    target: &throng_scenario::BaseUrl,
    tls: Option<&throng_plan::TlsSettings>,
    dir: &std::path::Path,
    service: &str,
) -> Result<DescriptorPool, String> {
    let host = if target.host.contains(':') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    let scheme = if target.https { "https" } else { "http" };
    let plan = HttpPlan::from_args(throng_plan::HttpArgs {
        url: format!("{scheme}://{host}:{}/", target.port),
        connections: Some(1),
        requests: Some(1),
        http2: true,
        tls: tls.cloned().unwrap_or_default(),
        cores: 1,
        ..throng_plan::HttpArgs::default()
    })
    .map_err(|e| e.to_string())?;
    let config = match &plan.tls {
        Some(settings) => Some(super::tls::client_config(settings, dir, &[b"h2"]).map_err(|e| e.0)?),
        None => None,
    };
    pool(&plan, config, service).map_err(|e| {
        format!("{e:#}")
            .replace(
                "--plaintext for one without TLS",
                "an http:// target for one without TLS",
            )
            .replace("pass --proto FILE", "give proto: { files: [FILE.proto] }")
            .replace("--call: ", "")
    })
}

/// Asks the server for `service`'s descriptors and builds the pool.
pub fn pool(
    plan: &HttpPlan,
    tls: Option<std::sync::Arc<ClientConfig>>,
    service: &str,
) -> anyhow::Result<DescriptorPool> {
    let server = plan.target.authority();
    let ask = |version: &str, asks: Vec<Ask>| -> anyhow::Result<Result<Vec<Answer>, u16>> {
        let mut body = Vec::new();
        for a in asks {
            let m = ReflectionRequest {
                host: String::new(),
                ask: Some(a),
            }
            .encode_to_vec();
            // Reflection requests are names: far below 4 GiB.
            let len = u32::try_from(m.len()).unwrap_or(u32::MAX);
            body.push(0);
            body.extend_from_slice(&len.to_be_bytes());
            body.extend_from_slice(&m);
        }
        let path = format!("/{version}.ServerReflection/ServerReflectionInfo");
        let reply = grpc_call(plan, tls.clone(), &path, body.into(), MAX_ANSWER).map_err(|e| match e {
            CallError::Setup(e) => anyhow::Error::from(e),
            e => anyhow::anyhow!(
                "server reflection: {server}: {e}; is the gRPC server running there (--plaintext for one \
                 without TLS)? Or pass --proto FILE"
            ),
        })?;
        if reply.status != 0 {
            return Ok(Err(reply.status));
        }
        reply
            .messages
            .iter()
            .map(|m| {
                ReflectionResponse::decode(m.as_ref())
                    .ok()
                    .and_then(|r| r.answer)
                    .ok_or_else(|| {
                        // What the server serves, not a run that failed: exit 2.
                        anyhow::Error::from(UsageError(format!("server reflection: {server} answered with something that is not a reflection response; pass --proto FILE")))
                    })
            })
            .collect::<anyhow::Result<Vec<Answer>>>()
            .map(Ok)
    };
    // The first version the server implements.
    let mut found = None;
    for version in VERSIONS {
        match ask(version, vec![Ask::FileContainingSymbol(service.to_string())])? {
            Err(UNIMPLEMENTED) => continue,
            Err(code) => {
                return Err(UsageError(format!(
                    "server reflection: {server} answered {version} with {}; pass --proto FILE",
                    throng_plan::grpc_code_name(code)
                ))
                .into());
            }
            Ok(answers) => {
                found = Some((version, answers));
                break;
            }
        }
    }
    let Some((version, answers)) = found else {
        return Err(UsageError(format!(
            "{server} offers no server reflection (neither {} answered); pass --proto FILE with the service's \
             .proto file",
            VERSIONS.join(" nor ")
        ))
        .into());
    };
    let mut files: Vec<FileDescriptorProto> = Vec::new();
    take(&mut files, answers, |message| {
        // The service is not on the server: say which are.
        let offered = match ask(version, vec![Ask::ListServices(String::new())]) {
            Ok(Ok(answers)) => answers
                .into_iter()
                .filter_map(|a| match a {
                    Answer::Services(s) => Some(s.service),
                    _ => None,
                })
                .flatten()
                .map(|s| s.name)
                .filter(|n| !n.starts_with("grpc.reflection."))
                .take(20)
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        };
        let offered = if offered.is_empty() {
            "none".to_string()
        } else {
            offered
        };
        UsageError(format!(
            "--call: {server} has no service {service} ({message}; it offers: {offered}); give the service's full \
             name, with its package"
        ))
    })?;
    for _ in 0..ROUNDS {
        let missing = missing(&files);
        if missing.is_empty() {
            break;
        }
        if files.len() + missing.len() > MAX_FILES {
            return Err(UsageError(format!(
                "server reflection: {service} needs more than {MAX_FILES} .proto files; pass --proto FILE"
            ))
            .into());
        }
        let asks = missing.iter().map(|f| Ask::FileByFilename(f.clone())).collect();
        let answers = match ask(version, asks)? {
            Ok(a) => a,
            Err(code) => {
                return Err(UsageError(format!(
                    "server reflection: {server} answered a request for {} with {}; pass --proto FILE",
                    missing.join(", "),
                    throng_plan::grpc_code_name(code)
                ))
                .into());
            }
        };
        let before = files.len();
        take(&mut files, answers, |message| {
            UsageError(format!(
                "server reflection: {server} did not give the imported file(s) {} ({message}); pass --proto FILE",
                missing.join(", ")
            ))
        })?;
        if files.len() == before {
            break;
        }
    }
    let still = missing(&files);
    if !still.is_empty() {
        return Err(UsageError(format!(
            "server reflection: {server} did not give the imported file(s) {}; pass --proto FILE",
            still.join(", ")
        ))
        .into());
    }
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos(files).map_err(|e| {
        UsageError(format!(
            "server reflection: the descriptors {server} gave do not fit together ({e}); pass --proto FILE"
        ))
    })?;
    Ok(pool)
}

/// Adds the files of `answers` not yet in `files`; an error answer is
/// `on_error(its message)`.
fn take(
    files: &mut Vec<FileDescriptorProto>,
    answers: Vec<Answer>,
    on_error: impl FnOnce(String) -> UsageError,
) -> Result<(), UsageError> {
    for answer in answers {
        match answer {
            Answer::Files(f) => {
                for bytes in f.file_descriptor_proto {
                    let file = FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| {
                        UsageError(format!(
                            "server reflection: a file descriptor the server gave does not decode ({e}); pass \
                             --proto FILE"
                        ))
                    })?;
                    if !files.iter().any(|have| have.name == file.name) {
                        files.push(file);
                    }
                }
            }
            Answer::Error(e) => {
                let what = if e.error_code == NOT_FOUND {
                    "not found".to_string()
                } else {
                    format!("error {}", e.error_code)
                };
                let message = if e.error_message.is_empty() || e.error_message.eq_ignore_ascii_case(&what) {
                    what
                } else {
                    format!("{what}: {}", e.error_message)
                };
                return Err(on_error(message));
            }
            Answer::Services(_) => {}
        }
    }
    Ok(())
}

/// Imports named by `files` that none of them is.
fn missing(files: &[FileDescriptorProto]) -> Vec<String> {
    let mut out: Vec<String> = files
        .iter()
        .flat_map(|f| f.dependency.iter())
        .filter(|d| !files.iter().any(|f| f.name.as_deref() == Some(d.as_str())))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, deps: &[&str]) -> FileDescriptorProto {
        FileDescriptorProto {
            name: Some(name.to_string()),
            dependency: deps.iter().map(|d| d.to_string()).collect(),
            ..FileDescriptorProto::default()
        }
    }

    #[test]
    fn imports_missing_are_named_once_and_sorted() {
        let files = [
            file("a.proto", &["c.proto", "b.proto"]),
            file("b.proto", &["c.proto", "google/protobuf/empty.proto"]),
        ];
        assert_eq!(missing(&files), vec!["c.proto", "google/protobuf/empty.proto"]);
        assert!(missing(&[file("x.proto", &[])]).is_empty());
    }

    #[test]
    fn answers_add_new_files_and_errors_say_why() {
        let mut files = vec![file("a.proto", &[])];
        let answer = Answer::Files(FileDescriptorResponse {
            file_descriptor_proto: vec![
                file("a.proto", &[]).encode_to_vec(),
                file("b.proto", &["a.proto"]).encode_to_vec(),
            ],
        });
        take(&mut files, vec![answer], |_| UsageError("unexpected".into())).unwrap();
        assert_eq!(files.len(), 2, "a.proto is not taken twice");
        let error = Answer::Error(ErrorResponse {
            error_code: NOT_FOUND,
            error_message: "not found".into(),
        });
        let e = take(&mut files, vec![error], |m| UsageError(format!("said: {m}"))).unwrap_err();
        assert_eq!(e.0, "said: not found");
        let garbage = Answer::Files(FileDescriptorResponse {
            file_descriptor_proto: vec![vec![0xff, 0xff]],
        });
        let e = take(&mut files, vec![garbage], |_| UsageError("unexpected".into())).unwrap_err();
        assert!(e.0.contains("does not decode"), "{}", e.0);
    }
}
