//! The connections the lab serves (plain TCP or TLS) and what every
//! server and fault writes to them.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection the lab serves: plain TCP or TLS over TCP.
pub(crate) trait LabStream: AsyncRead + AsyncWrite + Unpin {
    /// The TCP socket underneath.
    fn tcp(&self) -> &TcpStream;
    /// True for TLS (plaintext may be buffered above the socket).
    fn is_tls(&self) -> bool;
}

impl LabStream for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
    fn is_tls(&self) -> bool {
        false
    }
}

impl LabStream for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
    fn is_tls(&self) -> bool {
        true
    }
}

pub(crate) async fn write_filler<S: LabStream>(stream: &mut S, mut n: u64) -> io::Result<()> {
    static FILL: [u8; 16 * 1024] = [b'x'; 16 * 1024];
    while n > 0 {
        let k = usize::try_from(n).unwrap_or(usize::MAX).min(FILL.len());
        stream.write_all(&FILL[..k]).await?;
        n -= k as u64;
    }
    Ok(())
}
