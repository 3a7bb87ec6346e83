//! The schema identifiers documents carry.

/// The schema identifier written into, and required of, every document.
pub const SCHEMA: &str = "throng.result/v1";

/// The schema identifier of a [`ResultSet`](crate::ResultSet).
pub const SET_SCHEMA: &str = "throng.result-set/v1";
