//! Reading documents: a run's result or a result set, from a reader or
//! a path, checked within [`limits`].

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ResultError;
use crate::limits;
use crate::run::RunResult;
use crate::schema::{READ_SCHEMAS, READ_SET_SCHEMAS, SCHEMA, SET_SCHEMA};

impl RunResult {
    /// Reads a document, checking its schema and its numbers ([`limits`]).
    pub fn from_reader(r: impl Read) -> Result<RunResult, ResultError> {
        let value: serde_json::Value = serde_json::from_reader(r)?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(schema) if READ_SCHEMAS.contains(&schema) => single(value),
            Some(other) => Err(ResultError::Schema {
                found: other.to_string(),
            }),
            None => Err(ResultError::Schema {
                found: "(none)".to_string(),
            }),
        }
    }
}

/// One result document of a schema this throng reads, checked against the
/// [`limits`], as a current (version 2) run.
fn single(value: serde_json::Value) -> Result<RunResult, ResultError> {
    limits::check_histograms(&value)?;
    let mut run: RunResult = serde_json::from_value(value)?;
    limits::check_run(&run, "")?;
    run.schema = SCHEMA.to_string();
    Ok(run)
}

/// Several runs of the same plan, one after another (`--repeat N`): each
/// run's full result, in the order they ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultSet {
    /// Always [`SET_SCHEMA`].
    pub schema: String,
    /// The runs.
    pub runs: Vec<RunResult>,
}

impl ResultSet {
    /// A set of `runs`.
    pub fn new(runs: Vec<RunResult>) -> ResultSet {
        ResultSet {
            schema: SET_SCHEMA.to_string(),
            runs,
        }
    }

    /// Writes pretty JSON.
    pub fn to_writer(&self, mut w: impl Write) -> Result<(), ResultError> {
        serde_json::to_writer_pretty(&mut w, self)?;
        w.write_all(b"\n")?;
        Ok(())
    }

    /// The runs added up ([`RunResult::merge_sequential`]).
    pub fn merged(&self) -> Result<RunResult, ResultError> {
        RunResult::merge_sequential(&self.runs)
    }
}

/// What a result file holds: one run, or a set of runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Document {
    /// A result document (`throng.result/v2`, or v1 read as v2).
    Single(Box<RunResult>),
    /// A result set (`throng.result-set/v2`, or v1 read as v2).
    Set(ResultSet),
}

impl Document {
    /// Reads either kind, checking the schema of the document and of every
    /// run in a set, and every number against [`limits`]; a set must hold
    /// at least one run.
    pub fn from_reader(r: impl Read) -> Result<Document, ResultError> {
        let value: serde_json::Value = serde_json::from_reader(r)?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(schema) if READ_SCHEMAS.contains(&schema) => Ok(Document::Single(Box::new(single(value)?))),
            Some(schema) if READ_SET_SCHEMAS.contains(&schema) => {
                limits::check_histograms(&value)?;
                let mut set: ResultSet = serde_json::from_value(value)?;
                for (i, run) in set.runs.iter().enumerate() {
                    limits::check_run(run, &format!("runs[{i}]."))?;
                }
                if set.runs.is_empty() {
                    return Err(ResultError::Incompatible("the result set holds no runs".to_string()));
                }
                if let Some(bad) = set.runs.iter().find(|r| !READ_SCHEMAS.contains(&r.schema.as_str())) {
                    return Err(ResultError::Schema {
                        found: bad.schema.clone(),
                    });
                }
                set.schema = SET_SCHEMA.to_string();
                for run in &mut set.runs {
                    run.schema = SCHEMA.to_string();
                }
                Ok(Document::Set(set))
            }
            Some(other) => Err(ResultError::Schema {
                found: other.to_string(),
            }),
            None => Err(ResultError::NotAResult),
        }
    }

    /// Its runs: one for a single result.
    pub fn into_runs(self) -> Vec<RunResult> {
        match self {
            Document::Single(r) => vec![*r],
            Document::Set(s) => s.runs,
        }
    }
}

/// Reads a result document or a result set: its runs ([`Document`]).
pub fn runs_from_reader(r: impl Read) -> Result<Vec<RunResult>, ResultError> {
    Document::from_reader(r).map(Document::into_runs)
}

/// Reads the file at `path`: a result document or a result set
/// ([`runs_from_reader`]).
pub fn load_runs(path: &Path) -> Result<Vec<RunResult>, ResultError> {
    load(path).map(Document::into_runs)
}

/// Reads the file at `path` ([`Document::from_reader`]).
pub fn load(path: &Path) -> Result<Document, ResultError> {
    let file = std::fs::File::open(path)?;
    Document::from_reader(std::io::BufReader::new(file))
}
