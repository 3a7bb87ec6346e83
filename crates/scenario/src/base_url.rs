//! Where a scenario's requests go. A leaf: the scenario file's types and
//! gRPC reflection both name it, and it names neither.

use serde::{Deserialize, Serialize};
use throng_plan::HttpVersion;

/// Where requests go: scheme, host, port and a base path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseUrl {
    /// As written, or as `--target` or the environment gave it.
    pub url: String,
    /// `http` or `https`.
    pub https: bool,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Prefix of every request's path (no trailing slash).
    pub base_path: String,
    /// Where the URL came from when the file does not spell it out:
    /// `--target`, or the file's `target:` as written (`{{env.BASE}}`),
    /// filled in from the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The protocol its VUs speak (`http:`; HTTP/1.1 unless the target is
    /// written `{ url, http: 2 }` or `3`).
    #[serde(default, skip_serializing_if = "HttpVersion::is_http1")]
    pub http: HttpVersion,
}
