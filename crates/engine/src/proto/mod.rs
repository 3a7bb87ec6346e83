//! The protocols the engine speaks, one module or folder each.

pub mod grpc;
pub mod http1;
pub(crate) mod http2;
pub(crate) mod http3;
pub(crate) mod line;
pub(crate) mod ws;
