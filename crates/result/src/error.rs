//! What goes wrong reading, writing or merging results, and how a
//! message quotes what a file holds.

use throng_metrics::HistError;

use crate::schema::SCHEMA;

/// What went wrong reading, writing or merging results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultError {
    /// Not JSON, or not a throng result.
    #[error("not a throng result document: {}", short(&.0.to_string()))]
    Parse(#[from] serde_json::Error),
    /// Written by an incompatible throng.
    #[error(
        "schema '{}' is not supported; this throng reads throng.result/v1 and /v2 and throng.result-set/v1 and /v2, \
         writing '{SCHEMA}' (re-run with a matching throng version)",
        short(found)
    )]
    Schema {
        /// The document's schema.
        found: String,
    },
    /// JSON without a `schema` field: not a throng document at all.
    #[error("not a throng result document (it has no \"schema\" field); give a file written by --json")]
    NotAResult,
    /// A histogram in the document is damaged, or counts added up (a
    /// histogram's or a counter's, in a merge) pass 2^64.
    #[error("{}", hist_problem(.0))]
    Hist(#[from] HistError),
    /// Results of different kinds cannot be merged.
    #[error("cannot merge: {}", short(.0))]
    Incompatible(String),
    /// A number in the document is past a limit ([`limits`](crate::limits)).
    #[error(
        "'{}' {} (a result throng writes stays within the limits in docs/RESULTS.md; give an undamaged file written by --json)",
        short(field),
        short(problem)
    )]
    Limit {
        /// Where in the document, e.g. `measurements.series[3].second`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A [`HistError`] as a result error says it: an overflow names what
/// overflowed (counters overflow in a merge as well as histograms), anything
/// else is a damaged histogram.
fn hist_problem(e: &HistError) -> String {
    match e {
        HistError::Overflow(_) => e.to_string(),
        _ => format!("damaged histogram: {e}"),
    }
}

/// `text` on one line and at most [`SHORT_CHARS`] characters: error
/// messages quote what a file holds, and a file can hold anything.
pub fn short(text: &str) -> std::borrow::Cow<'_, str> {
    let one_line = !text.contains(['\n', '\r']);
    match text.char_indices().nth(SHORT_CHARS) {
        None if one_line => std::borrow::Cow::Borrowed(text),
        cut => {
            let end = cut.map_or(text.len(), |(i, _)| i);
            let mut s: String = text[..end].replace(['\n', '\r'], " ");
            if cut.is_some() {
                s.push('…');
            }
            std::borrow::Cow::Owned(s)
        }
    }
}

/// The most characters [`short`] keeps.
pub const SHORT_CHARS: usize = 300;
