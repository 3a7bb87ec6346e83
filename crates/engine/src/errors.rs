//! OS errors → the error taxonomy.

use std::io;

use throng_metrics::ErrorClass;

/// Where in a unit of work an error happened: a timeout's class depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Opening the connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Sending the request or reading the response.
    Exchange,
}

/// The taxonomy class of an I/O error.
pub fn classify(e: &io::Error, stage: Stage) -> ErrorClass {
    if let Some(tls) = throng_tls::io_failure_class(e) {
        return ErrorClass::Tls(tls);
    }
    // A WebSocket byte stream's framing broken by the server.
    if e.get_ref()
        .is_some_and(|inner| inner.is::<crate::proto::ws::frame::FrameError>())
    {
        return ErrorClass::WsProtocol;
    }
    let timeout = match stage {
        Stage::Connect => ErrorClass::TimeoutConnect,
        Stage::Tls => ErrorClass::TimeoutTls,
        Stage::Exchange => ErrorClass::TimeoutResponse,
    };
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => ErrorClass::Refused,
        Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => ErrorClass::Reset,
        Some(libc::EMFILE | libc::ENFILE) => ErrorClass::FdUnavailable,
        Some(libc::EADDRNOTAVAIL) => ErrorClass::AddrUnavailable,
        Some(libc::ETIMEDOUT) => timeout,
        Some(n) => ErrorClass::Other(errno_name(n)),
        None => match e.kind() {
            // A TLS peer that closes mid-handshake.
            io::ErrorKind::UnexpectedEof if stage == Stage::Tls => ErrorClass::Tls("handshake_eof"),
            io::ErrorKind::UnexpectedEof => ErrorClass::Eof,
            io::ErrorKind::TimedOut => timeout,
            io::ErrorKind::ConnectionRefused => ErrorClass::Refused,
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => ErrorClass::Reset,
            _ => ErrorClass::Other("unknown"),
        },
    }
}

/// The symbolic name of a Linux errno (`ENETUNREACH`), or `EUNKNOWN`.
pub fn errno_name(n: i32) -> &'static str {
    usize::try_from(n)
        .ok()
        .and_then(|i| ERRNO_NAMES.get(i))
        .filter(|s| !s.is_empty())
        .copied()
        .unwrap_or("EUNKNOWN")
}

/// Linux errno names by number (from asm-generic/errno*.h).
const ERRNO_NAMES: [&str; 134] = [
    "",
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_common_errors() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(classify(&os(libc::ECONNREFUSED), Stage::Connect), ErrorClass::Refused);
        assert_eq!(classify(&os(libc::EPIPE), Stage::Exchange), ErrorClass::Reset);
        assert_eq!(classify(&os(libc::EMFILE), Stage::Connect), ErrorClass::FdUnavailable);
        assert_eq!(
            classify(&os(libc::EADDRNOTAVAIL), Stage::Connect),
            ErrorClass::AddrUnavailable
        );
        assert_eq!(
            classify(&os(libc::ETIMEDOUT), Stage::Connect),
            ErrorClass::TimeoutConnect
        );
        assert_eq!(
            classify(&os(libc::ENETUNREACH), Stage::Connect),
            ErrorClass::Other("ENETUNREACH")
        );
        assert_eq!(errno_name(-1), "EUNKNOWN");
        assert_eq!(errno_name(libc::EHOSTUNREACH), "EHOSTUNREACH");
    }
}
