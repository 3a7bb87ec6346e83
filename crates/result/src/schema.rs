//! The schema identifiers documents carry.

/// The schema identifier written into every document. Version 2 names a
/// histogram's figures with their unit (`p99_us`, `mean_us`); version 1
/// named them bare (`p99`, `mean`).
pub const SCHEMA: &str = "throng.result/v2";

/// The schema identifier of a [`ResultSet`](crate::ResultSet).
pub const SET_SCHEMA: &str = "throng.result-set/v2";

/// Result schemas a reader accepts. Only a histogram's `hdr` is read back,
/// never its figures, so a version 1 document reads the same; once read it
/// is a version 2 document (and is written as one).
pub(crate) const READ_SCHEMAS: [&str; 2] = [SCHEMA, "throng.result/v1"];

/// Result set schemas a reader accepts (see [`READ_SCHEMAS`]).
pub(crate) const READ_SET_SCHEMAS: [&str; 2] = [SET_SCHEMA, "throng.result-set/v1"];
