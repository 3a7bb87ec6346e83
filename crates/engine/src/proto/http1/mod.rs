//! HTTP/1.1: the response reader (I/O-free, fuzzed in `tests/fuzz_http1.rs`)
//! and the exchange that drives it over a connection.

mod io;
mod reader;
mod stream;

pub(crate) use io::exchange;
pub use reader::{Feed, Keep, ParseError, ResponseReader};
pub(crate) use stream::{EndedEarly, exchange_stream};
