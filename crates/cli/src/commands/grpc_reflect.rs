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

use crate::exit::UsageError;

/// The reflection services, newest first.
const VERSIONS: [&str; 2] = ["grpc.reflection.v1", "grpc.reflection.v1alpha"];
/// Rounds of asking for imports still missing.
const ROUNDS: usize = 8;
/// Files a pool may take from a server.
const MAX_FILES: usize = 1000;
/// Length-delimited fields (messages, strings) the answers of a pool may
/// hold, at every depth, counted before they are decoded: an empty
/// message type is 2 bytes on the wire and a kilobyte and more decoded,
/// so the answer's size alone does not bound the memory.
const MAX_ELEMENTS: u64 = 200_000;
/// Deepest nesting of messages counted.
const MAX_DEPTH: u8 = 32;
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
    let reflection = Reflection {
        plan,
        tls,
        server: &server,
        elements: std::cell::Cell::new(0),
    };
    let ask = |version: &str, asks: Vec<Ask>| reflection.ask(version, asks);
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
    let mut files = Files::default();
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
        let missing = missing(&files.list);
        if missing.is_empty() {
            break;
        }
        if files.list.len() + missing.len() > MAX_FILES {
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
        let before = files.list.len();
        take(&mut files, answers, |message| {
            UsageError(format!(
                "server reflection: {server} did not give the imported file(s) {} ({message}); pass --proto FILE",
                missing.join(", ")
            ))
        })?;
        if files.list.len() == before {
            break;
        }
    }
    let still = missing(&files.list);
    if !still.is_empty() {
        return Err(UsageError(format!(
            "server reflection: {server} did not give the imported file(s) {}; pass --proto FILE",
            still.join(", ")
        ))
        .into());
    }
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos(files.list).map_err(|e| {
        UsageError(format!(
            "server reflection: the descriptors {server} gave do not fit together ({e}); pass --proto FILE"
        ))
    })?;
    Ok(pool)
}

/// One server's reflection service, asked in as many rounds as it takes.
struct Reflection<'a> {
    plan: &'a HttpPlan,
    tls: Option<std::sync::Arc<ClientConfig>>,
    server: &'a str,
    /// What the answers so far held (MAX_ELEMENTS), across rounds.
    elements: std::cell::Cell<u64>,
}

impl Reflection<'_> {
    /// Asks `asks` of the server's reflection service `version`: its
    /// answers, or the gRPC status it gave instead.
    fn ask(&self, version: &str, asks: Vec<Ask>) -> anyhow::Result<Result<Vec<Answer>, u16>> {
        let (plan, server, elements) = (self.plan, self.server, &self.elements);
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
        let reply = grpc_call(plan, self.tls.clone(), &path, body.into(), MAX_ANSWER).map_err(|e| match e {
            CallError::Setup(e) => anyhow::Error::from(e),
            // It answered, but not as a gRPC server does.
            CallError::Protocol(e) => UsageError(format!(
                "server reflection: {server}: {e}; is it a gRPC server? Or pass --proto FILE"
            ))
            .into(),
            e => anyhow::anyhow!(
                "server reflection: {server}: {e}; is the gRPC server running there (--plaintext for one \
                 without TLS)? Or pass --proto FILE"
            ),
        })?;
        if reply.status != 0 {
            return Ok(Err(reply.status));
        }
        let not_reflection = || {
            UsageError(format!(
                "server reflection: {server} answered with something that is not a reflection response; pass \
                 --proto FILE"
            ))
        };
        let mut answers = Vec::new();
        for m in &reply.messages {
            // Counted before anything is decoded from it.
            let mut count = Count {
                elements: elements.get(),
                files: 0,
            };
            if !count.walk(m, 0) {
                return Err(not_reflection().into());
            }
            elements.set(count.elements);
            if count.elements > MAX_ELEMENTS || count.files > MAX_FILES as u64 {
                return Err(UsageError(format!(
                    "server reflection: {server} answered with more than {MAX_FILES} files or {MAX_ELEMENTS} \
                     definitions, more than throng reads from a server; pass --proto FILE"
                ))
                .into());
            }
            let answer = ReflectionResponse::decode(m.as_ref())
                .ok()
                .and_then(|r| r.answer)
                .ok_or_else(not_reflection)?;
            answers.push(answer);
        }
        Ok(Ok(answers))
    }
}

/// The files taken from a server, and their names (each taken once).
#[derive(Default)]
struct Files {
    list: Vec<FileDescriptorProto>,
    names: std::collections::HashSet<Option<String>>,
}

/// What a reflection answer holds, counted on the wire before it is
/// decoded (prost decodes a repeated field whole, whatever its count).
struct Count {
    /// Length-delimited fields, at every depth (see [`MAX_ELEMENTS`]).
    elements: u64,
    /// `file_descriptor_proto` entries.
    files: u64,
}

impl Count {
    /// Walks `bytes` as a message at `depth` (0: the ReflectionResponse),
    /// counting; a length-delimited field that parses as a message is
    /// walked in turn (a string that happens to is counted too, which only
    /// errs on the safe side). False when `bytes` is not a message. Stops
    /// early past the limits.
    fn walk(&mut self, mut bytes: &[u8], depth: u8) -> bool {
        use prost::encoding::{WireType, decode_key, decode_varint};
        while !bytes.is_empty() {
            if self.elements > MAX_ELEMENTS || self.files > MAX_FILES as u64 {
                return true;
            }
            let Ok((field, wire)) = decode_key(&mut bytes) else {
                return false;
            };
            let skip = match wire {
                WireType::Varint => match decode_varint(&mut bytes) {
                    Ok(_) => 0,
                    Err(_) => return false,
                },
                WireType::SixtyFourBit => 8,
                WireType::ThirtyTwoBit => 4,
                WireType::LengthDelimited => match decode_varint(&mut bytes) {
                    Ok(n) if n <= bytes.len() as u64 => {
                        // At most the slice's length.
                        let (inner, rest) = bytes.split_at(n as usize);
                        self.elements += 1;
                        // ReflectionResponse.file_descriptor_response (4),
                        // its file_descriptor_proto (1).
                        if depth == 1 && field == 1 {
                            self.files += 1;
                        }
                        if depth < MAX_DEPTH && !inner.is_empty() {
                            let before = (self.elements, self.files);
                            if !self.walk(inner, depth + 1) {
                                // Not a message: a string or bytes, one element.
                                (self.elements, self.files) = before;
                            }
                        }
                        bytes = rest;
                        0
                    }
                    _ => return false,
                },
                // Groups are not in descriptors.
                _ => return false,
            };
            if skip > bytes.len() {
                return false;
            }
            bytes = &bytes[skip..];
        }
        true
    }
}

/// Adds the files of `answers` not yet in `files` (at most [`MAX_FILES`]);
/// an error answer is `on_error(its message)`.
fn take(
    files: &mut Files,
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
                    if files.names.insert(file.name.clone()) {
                        if files.list.len() == MAX_FILES {
                            return Err(UsageError(format!(
                                "server reflection: the server gave more than {MAX_FILES} .proto files; pass --proto \
                                 FILE"
                            )));
                        }
                        files.list.push(file);
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
        let mut files = Files::default();
        take(
            &mut files,
            vec![Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: vec![file("a.proto", &[]).encode_to_vec()],
            })],
            |_| UsageError("unexpected".into()),
        )
        .unwrap();
        let answer = Answer::Files(FileDescriptorResponse {
            file_descriptor_proto: vec![
                file("a.proto", &[]).encode_to_vec(),
                file("b.proto", &["a.proto"]).encode_to_vec(),
            ],
        });
        take(&mut files, vec![answer], |_| UsageError("unexpected".into())).unwrap();
        assert_eq!(files.list.len(), 2, "a.proto is not taken twice");
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

    /// A ReflectionResponse of `files` (their encodings).
    fn answer(files: &[Vec<u8>]) -> Vec<u8> {
        ReflectionResponse {
            answer: Some(Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: files.to_vec(),
            })),
        }
        .encode_to_vec()
    }

    #[test]
    fn answers_are_counted_before_they_are_decoded() {
        let real = answer(&[
            file("a.proto", &["b.proto"]).encode_to_vec(),
            file("b.proto", &[]).encode_to_vec(),
        ]);
        let mut c = Count { elements: 0, files: 0 };
        assert!(c.walk(&real, 0));
        // The response's field 4, two files, their names, a.proto's import.
        assert_eq!((c.files, c.elements), (2, 6));
        // Many empty message types in one file: 2 bytes each on the wire.
        let mut many = Vec::new();
        for _ in 0..MAX_ELEMENTS + 1 {
            many.extend_from_slice(&[0x22, 0x00]);
        }
        let mut c = Count { elements: 0, files: 0 };
        assert!(c.walk(&answer(&[many]), 0));
        assert!(c.elements > MAX_ELEMENTS);
        // Many tiny files.
        let tiny: Vec<Vec<u8>> = (0..=MAX_FILES)
            .map(|i| file(&format!("{i}"), &[]).encode_to_vec())
            .collect();
        let mut c = Count { elements: 0, files: 0 };
        assert!(c.walk(&answer(&tiny), 0));
        assert!(c.files > MAX_FILES as u64);
        // Not a message at all.
        let mut c = Count { elements: 0, files: 0 };
        assert!(!c.walk(&[0xff, 0xff, 0xff], 0));
    }

    #[test]
    fn more_files_than_the_limit_are_refused_and_names_are_kept_once() {
        let mut files = Files::default();
        let tiny: Vec<Vec<u8>> = (0..=MAX_FILES)
            .map(|i| file(&format!("{i}"), &[]).encode_to_vec())
            .collect();
        let same: Vec<Vec<u8>> = (0..5000).map(|_| file("same.proto", &[]).encode_to_vec()).collect();
        take(
            &mut files,
            vec![Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: same,
            })],
            |_| UsageError("unexpected".into()),
        )
        .unwrap();
        assert_eq!(files.list.len(), 1);
        let e = take(
            &mut files,
            vec![Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: tiny,
            })],
            |_| UsageError("unexpected".into()),
        )
        .unwrap_err();
        assert!(e.0.contains("more than 1000"), "{}", e.0);
    }
}
