//! throng's importers: tests people already have — curl commands from a
//! runbook, HAR recordings from a browser — turned into a scenario file a
//! user can read and edit, then run with `throng run`.
//!
//! ```text
//!  input text ─► curl::parse / har::parse ─► Flow (origin, steps with their
//!                                             recorded responses)
//!                                  │ infer::captures: a value an earlier
//!                                  │   response gave, sent again later, becomes
//!                                  │   a capture and a {{variable}}
//!                                  │ secrets::hide: credentials become
//!                                  │   {{env.NAME}} placeholders (never copied)
//!                                  ▼
//!                            yaml::write ─► the scenario, a comment per step
//! ```
//!
//! Importing is pure: text in, text out; the caller reads the input (with
//! a size limit) and writes the scenario. Nothing here touches the network.

mod curl;
mod har;
mod infer;
mod model;
mod openapi;
mod postman;
mod secrets;
mod yaml;

pub use model::ImportError;

/// The largest input an importer reads: a HAR of a long session is tens
/// of megabytes; more is refused rather than held.
pub const MAX_INPUT: usize = 256 * 1024 * 1024;

/// What to import from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One or more curl command lines.
    Curl,
    /// An HTTP Archive (HAR 1.2), as browsers' developer tools save it.
    Har,
    /// A Postman collection (v2.1 or v2.0).
    Postman,
    /// An OpenAPI 3 document (3.0 or 3.1, JSON or YAML).
    Openapi,
}

impl Kind {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Curl => "curl",
            Kind::Har => "har",
            Kind::Postman => "postman",
            Kind::Openapi => "openapi",
        }
    }
}

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The origin to keep (`https://host:port`) when the input has several;
    /// None: the first request's. For OpenAPI: the target (with its base
    /// path), instead of the document's servers.
    pub origin: Option<String>,
    /// The scenario's name.
    pub scenario: Option<String>,
    /// Where the input came from (for the comments): its file name.
    pub source: String,
}

/// An imported scenario.
#[derive(Debug)]
pub struct Imported {
    /// The scenario file's text.
    pub yaml: String,
    /// Environment variables the scenario reads, each with what it stands
    /// for: the user sets them before `throng run`.
    pub env: Vec<(String, String)>,
    /// What was left out or changed, one line each.
    pub notes: Vec<String>,
    /// Requests imported.
    pub steps: usize,
}

/// Imports `input` (the text of a `kind` file).
pub fn import(kind: Kind, input: &str, options: &Options) -> Result<Imported, ImportError> {
    let mut flow = match kind {
        Kind::Curl => curl::parse(input)?,
        Kind::Har => har::parse(input)?,
        Kind::Postman => postman::parse(input)?,
        Kind::Openapi => openapi::parse(input, options.origin.as_deref())?,
    };
    flow.keep_origin(options.origin.as_deref())?;
    if flow.insecure && flow.origin().is_some_and(|o| o.scheme == "http") {
        flow.notes
            .push("-k/--insecure has no effect on an http:// target: left out".into());
    }
    infer::captures(&mut flow);
    let mut env = std::mem::take(&mut flow.env);
    env.extend(secrets::hide(&mut flow));
    let steps = flow.steps.len();
    let name = options.scenario.clone().unwrap_or_else(|| kind.name().to_string());
    let yaml = yaml::write(&flow, &name, kind, &options.source);
    Ok(Imported {
        yaml,
        env,
        notes: flow.notes,
        steps,
    })
}
