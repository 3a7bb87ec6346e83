//! gRPC messages of a scenario's `grpc:` steps: the `.proto` files
//! compiled once when the file is read, and each step's method kept with
//! the step, so that a call only encodes its message and decodes its reply.
//!
//! ```text
//!  proto: { files, import_paths } ── protox (files read through the
//!        caller, as the data file) ──► descriptor pool ── call: ──► Method
//!  Method::encode(JSON text) ──► one framed request message (5-byte prefix)
//!  Method::decode_last(framed reply) ──► the last message as JSON text
//!                                        (captures and checks read it)
//! ```

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor, SerializeOptions};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// The most `.proto` files one `proto:` may bring in, imports included.
pub const MAX_PROTO_FILES: usize = 256;

/// The largest `.proto` file (as the scenario file's own limit).
const MAX_PROTO_BYTES: usize = 4 << 20;

/// Definitions the `.proto` files of one pool may hold, imports included
/// (see [`definitions`]): compiling takes about 10 KB for each, so a
/// file's size alone does not bound the memory (300,000 empty messages are
/// 4 MB of text and 3 GB compiled).
pub const MAX_DEFINITIONS: usize = 50_000;

/// The definitions of a `.proto` text, counted before it is parsed: its
/// `{` and `;` (a message, an enum, a service, a field, an option…; those
/// in comments and strings count too, which errs on the safe side).
pub fn definitions(text: &str) -> usize {
    text.bytes().filter(|b| matches!(b, b'{' | b';')).count()
}

/// The refusal of `.proto` files with more than [`MAX_DEFINITIONS`];
/// `path` is the file where the count went past it.
pub fn too_many_definitions(path: &str) -> String {
    format!(
        "{path}: the .proto files hold more than {MAX_DEFINITIONS} definitions (messages, fields, options) with \
         their imports, more than throng compiles; give only the files the call needs"
    )
}

/// The largest encoded request message (as `throng grpc --data`).
const MAX_MESSAGE: usize = 64 << 20;

/// gRPC status names by code (0–16), as `--expect-code` and reports write them.
pub use throng_plan::GRPC_CODES;

/// A method of the compiled descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Method(MethodDescriptor);

impl Method {
    /// `pkg.Service/Method`.
    pub fn call(&self) -> String {
        format!("{}/{}", self.0.parent_service().full_name(), self.0.name())
    }

    /// The request path, `/pkg.Service/Method`.
    pub fn path(&self) -> String {
        format!("/{}", self.call())
    }

    /// True for a server-streaming method (a stream of replies).
    pub fn server_streaming(&self) -> bool {
        self.0.is_server_streaming()
    }

    /// True for a client-streaming method (a stream of requests; with
    /// [`Method::server_streaming`], bidirectional).
    pub fn client_streaming(&self) -> bool {
        self.0.is_client_streaming()
    }

    /// The input type's full name.
    pub fn input(&self) -> String {
        self.0.input().full_name().to_string()
    }

    /// The request message from JSON text (protobuf's JSON mapping),
    /// encoded and framed (uncompressed flag, 4-byte length).
    pub fn encode(&self, json: &str) -> Result<Vec<u8>, EncodeError> {
        let mut de = serde_json::Deserializer::from_str(json);
        let message = DynamicMessage::deserialize(self.0.input(), &mut de)
            .and_then(|m| de.end().map(|()| m))
            .map_err(|e| {
                // Where in the JSON text (rendered from the file) is no help.
                let text = e.to_string();
                let why = text.split(" at line ").next().unwrap_or_default().to_string();
                EncodeError::NotTheInput {
                    input: self.0.input().full_name().to_string(),
                    why,
                }
            })?;
        let len = message.encoded_len();
        if len > MAX_MESSAGE {
            return Err(EncodeError::TooLarge);
        }
        let mut framed = Vec::with_capacity(len + 5);
        framed.push(0);
        // At most MAX_MESSAGE, below u32::MAX.
        framed.extend_from_slice(&(len as u32).to_be_bytes());
        message.encode(&mut framed).map_err(EncodeError::Encode)?;
        Ok(framed)
    }

    /// The last whole message of a framed reply body, as JSON text (every
    /// field, default values included, named as protobuf's JSON mapping
    /// names them: lowerCamelCase). None when the body has no whole
    /// message, a compressed one, or one that is not the output type.
    pub fn decode_last(&self, body: &[u8]) -> Option<String> {
        let mut rest = body;
        let mut last = None;
        while rest.len() >= 5 {
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            if rest[0] != 0 || rest.len() - 5 < len {
                break;
            }
            last = Some(&rest[5..5 + len]);
            rest = &rest[5 + len..];
        }
        let message = DynamicMessage::decode(self.0.output(), last?).ok()?;
        let options = SerializeOptions::new().skip_default_fields(false);
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::new(&mut out);
        message.serialize_with_options(&mut ser, &options).ok()?;
        String::from_utf8(out).ok()
    }
}

/// Compiles `files` (and what they import) into a descriptor pool; `read`
/// reads a file by its path as written (relative to the scenario), and
/// each file and import is looked up in `import_paths`, then in the
/// directory of each of `files`.
pub fn compile(
    files: &[String],
    import_paths: &[String],
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<DescriptorPool, ProtoError> {
    let mut dirs: Vec<String> = import_paths
        .iter()
        .map(|d| d.trim_end_matches('/').to_string())
        .collect();
    for f in files {
        let dir = f.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let names: Vec<String> = files
        .iter()
        .map(|f| f.rsplit_once('/').map_or(f.as_str(), |(_, n)| n).to_string())
        .collect();
    let sources = Sources::default();
    let mut absent = BTreeSet::new();
    let mut counted = 0;
    // protox asks its resolver for one file at a time and needs it to
    // live as long as the compiler; the caller's reader does not, so each
    // round reads what the last one asked for and compiles again.
    for _ in 0..=MAX_PROTO_FILES {
        let mut chain = ChainFileResolver::new();
        chain.add(GoogleFileResolver::new());
        chain.add(sources.clone());
        let mut compiler = protox::Compiler::with_file_resolver(chain);
        compiler.include_imports(true);
        let error = match compiler.open_files(&names) {
            Ok(_) => return Ok(compiler.descriptor_pool()),
            Err(e) => e,
        };
        let wanted: Vec<String> = sources
            .asked
            .borrow_mut()
            .drain(..)
            .filter(|n| !sources.files.borrow().contains_key(n) && !absent.contains(n))
            .collect();
        if wanted.is_empty() || !(error.is_file_not_found()) {
            return Err(describe(&error, &dirs));
        }
        for name in wanted {
            if sources.files.borrow().len() >= MAX_PROTO_FILES {
                return Err(ProtoError::TooManyFiles);
            }
            let mut found = None;
            for d in &dirs {
                let path = if d.is_empty() {
                    name.clone()
                } else {
                    format!("{d}/{name}")
                };
                match read(&path) {
                    Ok(text) => {
                        found = Some((path, text));
                        break;
                    }
                    // Not there: the next directory may have it.
                    Err(e)
                        if {
                            let e = e.to_ascii_lowercase();
                            e.contains("no such file") || e.contains("not found")
                        } => {}
                    // There, but not readable (too large, not text, no
                    // permission): that is the answer, not "not found".
                    Err(reason) => return Err(ProtoError::Unreadable { path, reason }),
                }
            }
            match found {
                Some((path, text)) if text.len() > MAX_PROTO_BYTES => {
                    return Err(ProtoError::TooLarge { path });
                }
                Some((path, text)) => {
                    counted += definitions(&text);
                    if counted > MAX_DEFINITIONS {
                        return Err(ProtoError::TooManyDefinitions { path });
                    }
                    sources.files.borrow_mut().insert(name, text);
                }
                None => {
                    absent.insert(name);
                }
            }
        }
    }
    Err(ProtoError::TooManyFiles)
}

/// Why `.proto` files do not compile into descriptors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// A file is there but cannot be read (too large, not text, no
    /// permission): the reader's reason.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The path as looked up.
        path: String,
        /// What the reader said.
        reason: String,
    },
    /// More files with their imports than throng compiles.
    #[error("more than {MAX_PROTO_FILES} .proto files with their imports; give fewer")]
    TooManyFiles,
    /// A file larger than a `.proto` file is.
    #[error(
        "{path} is larger than {} MiB, which is not a .proto file to compile; check the path",
        MAX_PROTO_BYTES >> 20
    )]
    TooLarge {
        /// The path.
        path: String,
    },
    /// More definitions than throng compiles.
    #[error("{}", too_many_definitions(path))]
    TooManyDefinitions {
        /// The file that went over.
        path: String,
    },
    /// A file or import found in none of the directories.
    #[error(
        "{at}{text}; looked in {} (relative to the scenario file): give the file's path, and import_paths for the \
         directories its imports are under",
        looked.join(", ")
    )]
    NotFound {
        /// `FILE: ` or `FILE:LINE:COL: ` when protox says where, else empty.
        at: String,
        /// protox's message.
        text: String,
        /// The directories looked in (`.` for the scenario's).
        looked: Vec<String>,
    },
    /// protox refused a file.
    #[error("{at}{text}; fix the .proto file")]
    Invalid {
        /// `FILE: ` or `FILE:LINE:COL: ` when protox says where, else empty.
        at: String,
        /// protox's message.
        text: String,
    },
}

/// A protox error, with the `.proto` file's name, and what to do.
fn describe(e: &protox::Error, dirs: &[String]) -> ProtoError {
    use miette::Diagnostic as _;
    // FILE:LINE:COL when the error points into a file.
    let at = e
        .labels()
        .and_then(|mut l| l.next())
        .and_then(|label| {
            let source = e.source_code()?;
            let span = source.read_span(label.inner(), 0, 0).ok()?;
            Some(format!("{}:{}:{}: ", e.file()?, span.line() + 1, span.column() + 1))
        })
        .unwrap_or_default();
    let file = if at.is_empty() {
        e.file().map(|f| format!("{f}: ")).unwrap_or_default()
    } else {
        at
    };
    let text = e.to_string();
    if e.is_file_not_found() {
        let looked = dirs
            .iter()
            .map(|d| if d.is_empty() { "." } else { d.as_str() }.to_string())
            .collect();
        ProtoError::NotFound { at: file, text, looked }
    } else {
        ProtoError::Invalid { at: file, text }
    }
}

/// Files read so far, by import name; and the names protox asked for.
#[derive(Clone, Default)]
struct Sources {
    files: Rc<RefCell<HashMap<String, String>>>,
    asked: Rc<RefCell<Vec<String>>>,
}

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.files.borrow().get(name) {
            Some(text) => File::from_source(name, text),
            None => {
                self.asked.borrow_mut().push(name.to_string());
                Err(protox::Error::file_not_found(name))
            }
        }
    }
}

/// The unary or server-streaming method `pkg.Service/Method` of `pool`.
pub fn find_method(pool: &DescriptorPool, call: &str) -> Result<Method, CallError> {
    let (service, method) = split_call(call)?;
    let Some(svc) = pool.get_service_by_name(service) else {
        return Err(CallError::NoService {
            call: call.to_string(),
            service: service.to_string(),
            known: pool.services().map(|s| s.full_name().to_string()).take(20).collect(),
        });
    };
    let Some(m) = svc.methods().find(|m| m.name() == method) else {
        return Err(CallError::NoMethod {
            call: call.to_string(),
            service: service.to_string(),
            method: method.to_string(),
            known: svc.methods().map(|m| m.name().to_string()).take(20).collect(),
        });
    };
    Ok(Method(m))
}

/// Most messages a client-streaming call of a step may send.
pub const MAX_STREAM_MESSAGES: u64 = 100_000;

/// `pkg.Service/Method` → (`pkg.Service`, `Method`).
pub fn split_call(call: &str) -> Result<(&str, &str), CallError> {
    match call.split_once('/') {
        Some((s, m)) if !s.is_empty() && !m.is_empty() && !m.contains('/') => Ok((s, m)),
        _ => Err(CallError::NotACall { call: call.to_string() }),
    }
}

/// Why a `call:` names no method a `grpc:` step can call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// Not `package.Service/Method`.
    #[error("'{call}': give the method as package.Service/Method, e.g. helloworld.Greeter/SayHello")]
    NotACall {
        /// The call as written.
        call: String,
    },
    /// The descriptors define no such service.
    #[error(
        "'{call}': no service {service} in the .proto files (they define: {}); give the service's full name, \
         with its package",
        if known.is_empty() { "none".to_string() } else { known.join(", ") }
    )]
    NoService {
        /// The call as written.
        call: String,
        /// The service it names.
        service: String,
        /// The services there are (at most 20).
        known: Vec<String>,
    },
    /// The service has no such method.
    #[error("'{call}': {service} has no method {method} (it has: {})", known.join(", "))]
    NoMethod {
        /// The call as written.
        call: String,
        /// The service.
        service: String,
        /// The method it names.
        method: String,
        /// The service's methods (at most 20).
        known: Vec<String>,
    },
}

/// Why a request message cannot be encoded.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The JSON is not the method's input type (protobuf's JSON mapping).
    #[error("not a {input} message: {why}")]
    NotTheInput {
        /// The input type's full name.
        input: String,
        /// What the JSON mapping said (without a position in the rendered text).
        why: String,
    },
    /// Over the largest message a step sends.
    #[error("the encoded message is larger than 64 MiB")]
    TooLarge,
    /// prost could not encode it.
    #[error("cannot encode the message: {0}")]
    Encode(prost::EncodeError),
}

/// Asks a scenario's target for a service's descriptors (server
/// reflection, `proto: { reflection: true }`): its target, its TLS
/// settings (https), the service's full name.
pub type Reflect<'a> =
    dyn Fn(&crate::base_url::BaseUrl, Option<&throng_plan::TlsSettings>, &str) -> Result<DescriptorPool, String> + 'a;

/// A gRPC status by name (`NOT_FOUND`, any case) or number (`5`).
pub fn parse_code(text: &str) -> Result<u16, NotACode> {
    let upper = text.trim().to_ascii_uppercase();
    GRPC_CODES
        .iter()
        .position(|n| *n == upper)
        .and_then(|i| u16::try_from(i).ok())
        .or_else(|| upper.parse::<u16>().ok().filter(|&c| usize::from(c) < GRPC_CODES.len()))
        .ok_or_else(|| NotACode(text.to_string()))
}

/// A text that names no gRPC status code (as written).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a gRPC status code; use names like OK, NOT_FOUND or numbers 0-16")]
pub struct NotACode(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = r#"
syntax = "proto3";
package t;
import "common.proto";
message Req { string name = 1; int32 count = 2; t.common.Tag tag = 3; }
message Rep { string message = 1; int32 sleep_ms = 2; }
service S { rpc Call(Req) returns (Rep); rpc Watch(Req) returns (stream Rep); rpc Up(stream Req) returns (Rep); }
"#;
    const COMMON: &str = r#"syntax = "proto3"; package t.common; message Tag { string key = 1; }"#;

    fn read(path: &str) -> Result<String, String> {
        match path {
            "protos/t.proto" => Ok(PROTO.into()),
            "inc/common.proto" => Ok(COMMON.into()),
            _ => Err("no such file".into()),
        }
    }

    #[test]
    fn compiles_with_imports_and_round_trips_messages() {
        let pool = compile(&["protos/t.proto".into()], &["inc".into()], &read).unwrap();
        let m = find_method(&pool, "t.S/Call").unwrap();
        assert_eq!(m.path(), "/t.S/Call");
        assert!(!m.server_streaming());
        assert!(find_method(&pool, "t.S/Watch").unwrap().server_streaming());
        let framed = m.encode(r#"{"name": "a", "tag": {"key": "k"}}"#).unwrap();
        assert_eq!(framed[0], 0);
        assert_eq!(
            u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize,
            framed.len() - 5
        );
        assert!(
            m.encode(r#"{"nope": 1}"#)
                .unwrap_err()
                .to_string()
                .starts_with("not a t.Req message: ")
        );
        // A reply of two messages: the last one, every field named.
        let rep = |text: &[u8]| {
            let mut f = vec![0, 0, 0, 0, (text.len() + 2) as u8, 10, text.len() as u8];
            f.extend_from_slice(text);
            f
        };
        let mut body = rep(b"first");
        body.extend(rep(b"last"));
        assert_eq!(m.decode_last(&body).unwrap(), r#"{"message":"last","sleepMs":0}"#);
        // A message cut off: the last whole one.
        body.truncate(body.len() - 1);
        assert_eq!(m.decode_last(&body).unwrap(), r#"{"message":"first","sleepMs":0}"#);
        assert!(m.decode_last(&[1, 0, 0, 0, 0]).is_none());
    }

    #[test]
    fn refuses_what_it_cannot_call() {
        let pool = compile(&["protos/t.proto".into()], &["inc".into()], &read).unwrap();
        let said = |call: &str| find_method(&pool, call).unwrap_err().to_string();
        assert_eq!(
            said("t.S/Nope"),
            "'t.S/Nope': t.S has no method Nope (it has: Call, Watch, Up)"
        );
        assert_eq!(
            said("t.X/Call"),
            "'t.X/Call': no service t.X in the .proto files (they define: t.S); give the service's full name, with \
             its package"
        );
        assert!(find_method(&pool, "t.S/Up").unwrap().client_streaming());
        assert_eq!(
            said("Call"),
            "'Call': give the method as package.Service/Method, e.g. helloworld.Greeter/SayHello"
        );
        assert_eq!(
            parse_code("17").unwrap_err().to_string(),
            "'17' is not a gRPC status code; use names like OK, NOT_FOUND or numbers 0-16"
        );
        let missing = compile(&["protos/t.proto".into()], &[], &read).unwrap_err();
        assert!(matches!(missing, ProtoError::NotFound { .. }), "{missing}");
        assert!(
            missing.to_string().contains("common.proto")
                && missing.to_string().ends_with(
                    "; looked in protos (relative to the scenario file): give the file's path, and import_paths for \
                     the directories its imports are under"
                ),
            "{missing}"
        );
        assert_eq!(
            compile(&["protos/t.proto".into()], &["inc".into()], &|_| Err(
                "no permission".into()
            ))
            .unwrap_err(),
            ProtoError::Unreadable {
                path: "inc/t.proto".into(),
                reason: "no permission".into()
            }
        );
        assert!(compile(&["nope.proto".into()], &[], &read).is_err());
        let huge = |_: &str| Ok("/".repeat(MAX_PROTO_BYTES + 1));
        assert_eq!(
            compile(&["h.proto".into()], &[], &huge).unwrap_err().to_string(),
            "h.proto is larger than 4 MiB, which is not a .proto file to compile; check the path"
        );
        assert_eq!(parse_code("not_found"), Ok(5));
        assert_eq!(parse_code("14"), Ok(14));
        assert!(parse_code("17").is_err());
    }
}
