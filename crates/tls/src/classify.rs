//! TLS failures by name: `tls.<name>` in throng's error taxonomy.

use rustls::{AlertDescription, CertificateError, Error};

/// The taxonomy name (without the `tls.` prefix) of a rustls error: the
/// alert's name when the peer sent one, the reason this side refused the
/// peer's certificate when it did (each reason its own name, so that a
/// report says why: expired, wrong name, unknown issuer, …).
pub fn failure_class(e: &Error) -> &'static str {
    match e {
        Error::AlertReceived(a) => alert_name(*a),
        Error::InvalidCertificate(c) => certificate_class(c),
        Error::NoCertificatesPresented => "certificate_required",
        Error::PeerIncompatible(_) => "peer_incompatible",
        Error::PeerMisbehaved(_) => "peer_misbehaved",
        Error::InappropriateMessage { .. } | Error::InappropriateHandshakeMessage { .. } => "unexpected_message",
        Error::InvalidMessage(_) => "invalid_message",
        Error::DecryptError => "decrypt_error",
        Error::HandshakeNotComplete => "handshake_not_complete",
        Error::UnsupportedNameType => "unsupported_name_type",
        _ => "other",
    }
}

/// Why this side refused the peer's certificate.
fn certificate_class(c: &CertificateError) -> &'static str {
    use webpki::Error as W;
    match c {
        CertificateError::UnknownIssuer => "unknown_ca",
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "certificate_expired",
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => "certificate_not_yet_valid",
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "certificate_name_mismatch"
        }
        CertificateError::Revoked => "certificate_revoked",
        CertificateError::BadSignature => "bad_certificate_signature",
        CertificateError::BadEncoding => "certificate_malformed",
        CertificateError::UnhandledCriticalExtension => "certificate_unknown_critical_extension",
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "certificate_invalid_purpose"
        }
        #[allow(deprecated)]
        CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "certificate_unsupported_algorithm"
        }
        CertificateError::Other(other) => match other.0.downcast_ref::<W>() {
            Some(W::CaUsedAsEndEntity) => "ca_used_as_end_entity",
            Some(W::EndEntityUsedAsCa) => "end_entity_used_as_ca",
            Some(W::PathLenConstraintViolated) => "certificate_path_too_long",
            Some(W::NameConstraintViolation) => "certificate_name_constraint_violated",
            Some(W::UnsupportedCertVersion) => "certificate_unsupported_version",
            Some(
                W::MaximumSignatureChecksExceeded | W::MaximumPathBuildCallsExceeded | W::MaximumPathDepthExceeded,
            ) => "certificate_chain_too_complex",
            Some(W::EmptyEkuExtension) => "certificate_invalid_purpose",
            _ => "certificate_invalid",
        },
        _ => "certificate_invalid",
    }
}

/// The webpki error rustls passed through as its own (a certificate's
/// basic constraints, path length, name constraints), if that is what `e`
/// carries.
pub(crate) fn webpki_error(e: &Error) -> Option<&webpki::Error> {
    match e {
        Error::InvalidCertificate(CertificateError::Other(other)) => other.0.downcast_ref::<webpki::Error>(),
        _ => None,
    }
}

/// The TLS failure carried by an I/O error from tokio-rustls, if any.
pub fn io_failure_class(e: &std::io::Error) -> Option<&'static str> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>())
        .map(failure_class)
}

fn alert_name(a: AlertDescription) -> &'static str {
    use AlertDescription as A;
    match a {
        A::CloseNotify => "close_notify",
        A::UnexpectedMessage => "unexpected_message",
        A::BadRecordMac => "bad_record_mac",
        A::RecordOverflow => "record_overflow",
        A::HandshakeFailure => "handshake_failure",
        A::BadCertificate => "bad_certificate",
        A::UnsupportedCertificate => "unsupported_certificate",
        A::CertificateRevoked => "certificate_revoked",
        A::CertificateExpired => "certificate_expired",
        A::CertificateUnknown => "certificate_unknown",
        A::IllegalParameter => "illegal_parameter",
        A::UnknownCA => "unknown_ca",
        A::AccessDenied => "access_denied",
        A::DecodeError => "decode_error",
        A::DecryptError => "decrypt_error",
        A::ProtocolVersion => "protocol_version",
        A::InsufficientSecurity => "insufficient_security",
        A::InternalError => "internal_error",
        A::InappropriateFallback => "inappropriate_fallback",
        A::UserCanceled => "user_canceled",
        A::NoRenegotiation => "no_renegotiation",
        A::MissingExtension => "missing_extension",
        A::UnsupportedExtension => "unsupported_extension",
        A::UnrecognisedName => "unrecognized_name",
        A::BadCertificateStatusResponse => "bad_certificate_status_response",
        A::UnknownPSKIdentity => "unknown_psk_identity",
        A::CertificateRequired => "certificate_required",
        A::NoApplicationProtocol => "no_application_protocol",
        _ => "alert",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            failure_class(&Error::AlertReceived(AlertDescription::UnknownCA)),
            "unknown_ca"
        );
        assert_eq!(
            failure_class(&Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            "unknown_ca"
        );
        assert_eq!(
            failure_class(&Error::InvalidCertificate(CertificateError::Expired)),
            "certificate_expired"
        );
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            Error::AlertReceived(AlertDescription::CertificateRequired),
        );
        assert_eq!(io_failure_class(&io), Some("certificate_required"));
        assert_eq!(io_failure_class(&std::io::Error::other("x")), None);
    }

    #[test]
    fn every_certificate_refusal_has_its_reason() {
        let webpki = |e: webpki::Error| {
            Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(std::sync::Arc::new(e))))
        };
        assert_eq!(
            failure_class(&webpki(webpki::Error::CaUsedAsEndEntity)),
            "ca_used_as_end_entity"
        );
        assert_eq!(
            failure_class(&webpki(webpki::Error::EndEntityUsedAsCa)),
            "end_entity_used_as_ca"
        );
        assert_eq!(failure_class(&webpki(webpki::Error::BadDer)), "certificate_invalid");
        assert_eq!(
            webpki_error(&webpki(webpki::Error::CaUsedAsEndEntity)),
            Some(&webpki::Error::CaUsedAsEndEntity)
        );
        assert_eq!(webpki_error(&Error::DecryptError), None);
        for (e, name) in [
            (CertificateError::NotValidYet, "certificate_not_yet_valid"),
            (CertificateError::BadSignature, "bad_certificate_signature"),
            (CertificateError::BadEncoding, "certificate_malformed"),
            (CertificateError::InvalidPurpose, "certificate_invalid_purpose"),
            (CertificateError::ApplicationVerificationFailure, "certificate_invalid"),
        ] {
            assert_eq!(failure_class(&Error::InvalidCertificate(e)), name);
        }
        // Only what the peer said is a bad_certificate.
        assert_eq!(
            failure_class(&Error::AlertReceived(AlertDescription::BadCertificate)),
            "bad_certificate"
        );
    }
}
