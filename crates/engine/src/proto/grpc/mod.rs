//! gRPC over HTTP/2: a call is a stream of the HTTP/2 pool (or of a VU's
//! own connection, crate::proto::http2) whose body is framed messages and
//! whose status is `grpc-status`. Here, what is gRPC's own: the reply
//! judged as it arrives (`frame`, I/O-free), and one call outside a run
//! (`call`: server reflection before `throng grpc` starts).

pub mod call;
pub(crate) mod frame;
