//! Client configurations.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, SupportedKxGroup, aws_lc_rs};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use throng_plan::TlsSettings;

use crate::error::TlsError;

pub use throng_plan::{TlsGroup as Group, TlsVersion};

fn kx(group: Group) -> &'static dyn SupportedKxGroup {
    match group {
        Group::X25519 => aws_lc_rs::kx_group::X25519,
        Group::Secp256r1 => aws_lc_rs::kx_group::SECP256R1,
        Group::Secp384r1 => aws_lc_rs::kx_group::SECP384R1,
        Group::X25519MlKem768 => aws_lc_rs::kx_group::X25519MLKEM768,
    }
}

/// The client configuration a plan's TLS settings ask for — the one builder
/// `http`, `storm` and `run` share. The files the settings name are read
/// here, relative to `dir` (the working directory for flags, the scenario
/// file's directory for a `tls:` block).
pub fn client_config_for(settings: &TlsSettings, dir: &Path, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsError> {
    if settings.insecure && settings.cacert.is_some() {
        return Err(TlsError::Config(
            "--insecure skips verification, so --cacert would be ignored; give one or the other".into(),
        ));
    }
    let read = |flag: &'static str, name: &Option<String>| -> Result<Option<(String, Vec<u8>)>, TlsError> {
        let Some(name) = name else { return Ok(None) };
        let path = dir.join(name);
        let shown = path.display().to_string();
        match throng_plan::input::read_limited(&path, throng_plan::input::MAX_PEM_BYTES) {
            Ok(bytes) => Ok(Some((shown, bytes))),
            Err(e) => Err(TlsError::Read {
                flag,
                path: shown,
                problem: e,
            }),
        }
    };
    client_config(&ClientOptions {
        cacert: read("--cacert", &settings.cacert)?,
        cert: read("--cert", &settings.cert)?,
        key: read("--key", &settings.key)?,
        insecure: settings.insecure,
        resume: settings.resume,
        groups: settings.groups.clone(),
        version: settings.version,
        alpn: alpn.iter().map(|p| p.to_vec()).collect(),
    })
}

/// What the user asked of the client side of TLS. PEM inputs come as
/// (path, bytes) so that errors can name the file.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// `--cacert`: trust these CAs instead of the system's.
    pub cacert: Option<(String, Vec<u8>)>,
    /// `--cert`: client certificate chain (mTLS).
    pub cert: Option<(String, Vec<u8>)>,
    /// `--key`: the client certificate's private key.
    pub key: Option<(String, Vec<u8>)>,
    /// `--insecure`: verify nothing: neither the certificate chain nor the
    /// handshake's signature (as curl -k, oha and wrk do).
    pub insecure: bool,
    /// `--tls-resume`: resume sessions (tickets or IDs) instead of full handshakes.
    pub resume: bool,
    /// `--tls-groups`: key-exchange groups to offer, in order (empty: rustls' default).
    pub groups: Vec<Group>,
    /// `--tls-version`: only this version (None: 1.2 and 1.3).
    pub version: Option<TlsVersion>,
    /// ALPN protocols to offer, in order.
    pub alpn: Vec<Vec<u8>>,
}

/// The crypto provider with the chosen groups, and TLS 1.3's
/// AES-128-GCM-SHA256 preferred as browsers do: its key schedule runs on
/// SHA-256, which CPUs accelerate, where AES-256-GCM-SHA384 (rustls' first
/// choice) hashes with SHA-512 in software — a tenth of a client's
/// handshake cost here.
pub(crate) fn provider(groups: &[Group]) -> Arc<CryptoProvider> {
    let mut p = aws_lc_rs::default_provider();
    if !groups.is_empty() {
        p.kx_groups = groups.iter().map(|g| kx(*g)).collect();
    }
    p.cipher_suites.sort_by_key(|s| match s.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => 2,
        _ => 3,
    });
    Arc::new(p)
}

static ONLY_TLS12: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
static ONLY_TLS13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

pub(crate) fn versions(v: Option<TlsVersion>) -> &'static [&'static rustls::SupportedProtocolVersion] {
    match v {
        None => rustls::DEFAULT_VERSIONS,
        Some(TlsVersion::Tls12) => &ONLY_TLS12,
        Some(TlsVersion::Tls13) => &ONLY_TLS13,
    }
}

pub(crate) fn certs(
    flag: &'static str,
    (path, pem): &(String, Vec<u8>),
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |problem: String| TlsError::Pem {
        flag,
        path: path.clone(),
        problem,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string()));
    }
    Ok(certs)
}

pub(crate) fn key(flag: &'static str, (path, pem): &(String, Vec<u8>)) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsError::Pem {
        flag,
        path: path.clone(),
        problem: format!("holds no usable private key: PKCS#8, SEC1 (EC) or PKCS#1 (RSA) in PEM form ({e})"),
    })
}

/// Builds the client configuration.
pub fn client_config(o: &ClientOptions) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider(&o.groups);
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions(o.version))
        .map_err(|e| TlsError::Config(format!("--tls-version/--tls-groups: {e}")))?;

    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(Arc::clone(&provider))))
    } else {
        let mut roots = RootCertStore::empty();
        let mut given = Vec::new();
        match &o.cacert {
            Some(c) => {
                for cert in certs("--cacert", c)? {
                    roots.add(cert.clone()).map_err(|e| TlsError::Pem {
                        flag: "--cacert",
                        path: c.0.clone(),
                        problem: format!("a certificate is not a usable trust anchor ({e})"),
                    })?;
                    given.push(cert);
                }
            }
            None => {
                let native = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(native.certs);
                if added == 0 {
                    return Err(TlsError::Config(
                        "no system CA certificates found (install ca-certificates); pass --cacert FILE, or --insecure to skip verification".to_string(),
                    ));
                }
            }
        }
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CacertVerifier::new(roots, given, &provider)?))
    };

    let mut config = match (&o.cert, &o.key) {
        (Some(c), Some(k)) => builder.with_client_cert_resolver(Arc::new(ClientCert(certified_key(&provider, c, k)?))),
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(TlsError::Config(
                "--cert needs --key (the certificate's private key)".into(),
            ));
        }
        (None, Some(_)) => return Err(TlsError::Config("--key needs --cert (the client certificate)".into())),
    };
    config.alpn_protocols.clone_from(&o.alpn);
    if !o.resume {
        // A storm measures full handshakes unless told otherwise.
        config.resumption = Resumption::disabled();
    }
    Ok(Arc::new(config))
}

/// The client certificate chain and its key, after checking that the key
/// is the certificate's: their public keys are compared directly (as
/// OpenSSL does), so an X.509 v1 certificate — what `openssl x509 -req`
/// makes without extensions, and what servers accept — works, where
/// rustls' own check would refuse to parse it.
fn certified_key(
    provider: &CryptoProvider,
    cert: &(String, Vec<u8>),
    key_pem: &(String, Vec<u8>),
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = certs("--cert", cert)?;
    let signing = provider
        .key_provider
        .load_private_key(key("--key", key_pem)?)
        .map_err(|e| TlsError::Pem {
            flag: "--key",
            path: key_pem.0.clone(),
            problem: format!("the key cannot sign TLS handshakes ({e}); give an RSA, ECDSA or Ed25519 key"),
        })?;
    let cert_spki = chain
        .first()
        .and_then(|c| subject_public_key_info(c))
        .ok_or_else(|| TlsError::Pem {
            flag: "--cert",
            path: cert.0.clone(),
            problem: "its first certificate is not an X.509 certificate (no subject public key found)".into(),
        })?;
    // None: the provider cannot say (then the handshake decides).
    if let Some(key_spki) = signing.public_key()
        && key_spki.as_ref() != cert_spki
    {
        return Err(TlsError::Config(format!(
            "--cert/--key: {} is not the private key of the certificate in {} (their public keys differ); \
             give the key the certificate was made for",
            key_pem.0, cert.0
        )));
    }
    Ok(Arc::new(CertifiedKey::new(chain, signing)))
}

/// The DER of a certificate's SubjectPublicKeyInfo, found by walking the
/// outer fields (RFC 5280 4.1): any version, no extension parsed.
fn subject_public_key_info(cert: &[u8]) -> Option<&[u8]> {
    const SEQUENCE: u8 = 0x30;
    const VERSION: u8 = 0xa0; // [0] EXPLICIT, absent in v1
    let certificate = Der::first(cert).filter(|e| e.tag == SEQUENCE)?;
    let tbs = Der::first(certificate.content).filter(|e| e.tag == SEQUENCE)?;
    let mut rest = tbs.content;
    if rest.first() == Some(&VERSION) {
        rest = Der::first(rest)?.rest;
    }
    // serialNumber, signature, issuer, validity, subject.
    for _ in 0..5 {
        rest = Der::first(rest)?.rest;
    }
    Der::first(rest).filter(|e| e.tag == SEQUENCE).map(|e| e.whole)
}

/// One DER element at the start of a byte string.
struct Der<'a> {
    tag: u8,
    /// Its content.
    content: &'a [u8],
    /// The whole element: tag, length and content.
    whole: &'a [u8],
    /// What follows it.
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    fn first(der: &'a [u8]) -> Option<Der<'a>> {
        let (&tag, after_tag) = der.split_first()?;
        let (&first, after) = after_tag.split_first()?;
        let (len, body) = if first < 0x80 {
            (usize::from(first), after)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || after.len() < n {
                return None;
            }
            let len = after[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            (len, &after[n..])
        };
        if body.len() < len {
            return None;
        }
        let header = der.len() - body.len();
        Some(Der {
            tag,
            content: &body[..len],
            whole: &der[..header + len],
            rest: &body[len..],
        })
    }
}

/// Presents the one client certificate whatever the server asks for (the
/// server decides whether it will do).
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _root_hint_subjects: &[&[u8]], _sigschemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Verification as webpki does it, plus what curl (OpenSSL) also accepts:
/// a server certificate that is itself one of the `--cacert` certificates,
/// byte for byte, even when it says CA:TRUE — the self-signed certificate
/// of `openssl req -x509`, which webpki refuses as a CA used as an end
/// entity. Its name and dates are still checked; the handshake's
/// signatures always are.
#[derive(Debug)]
struct CacertVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The `--cacert` certificates (none with the system's CAs).
    given: Vec<CertificateDer<'static>>,
}

impl CacertVerifier {
    fn new(
        roots: RootCertStore,
        given: Vec<CertificateDer<'static>>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<CacertVerifier, TlsError> {
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
            .build()
            .map_err(|e| TlsError::Config(format!("--cacert: cannot verify with these certificates ({e})")))?;
        Ok(CacertVerifier { webpki, given })
    }
}

impl ServerCertVerifier for CacertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(e) if is_ca_used_as_end_entity(&e) && self.given.iter().any(|g| g.as_ref() == end_entity.as_ref()) => {
                // webpki checks a certificate's dates before its basic
                // constraints, so a CaUsedAsEndEntity certificate is within
                // its dates (a test keeps that so); the name is checked here.
                let parsed = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// True when webpki refused a certificate that says CA:TRUE as the server's.
fn is_ca_used_as_end_entity(e: &rustls::Error) -> bool {
    crate::classify::webpki_error(e) == Some(&webpki::Error::CaUsedAsEndEntity)
}

/// `--insecure`: accepts any certificate and any handshake signature. The
/// peers throng is compared with (oha, wrk, curl -k) skip both; a storm
/// that wants the client's full cost verifies (the default).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA:TRUE certificate for `name`, valid from
    /// `from_days` to `to_days` around now: (DER, PEM).
    fn self_signed_ca(name: &str, from_days: i64, to_days: i64) -> (CertificateDer<'static>, Vec<u8>) {
        let now = time::OffsetDateTime::now_utc();
        let mut p = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.not_before = now + time::Duration::days(from_days);
        p.not_after = now + time::Duration::days(to_days);
        let cert = p.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap();
        (cert.der().clone(), cert.pem().into_bytes())
    }

    fn verify(cacert: &[u8], served: &CertificateDer<'_>, name: &str) -> Result<ServerCertVerified, rustls::Error> {
        let given = certs("--cacert", &("ca.pem".to_string(), cacert.to_vec())).unwrap();
        let mut roots = RootCertStore::empty();
        for c in &given {
            roots.add(c.clone()).unwrap();
        }
        let verifier = CacertVerifier::new(roots, given, &provider(&[])).unwrap();
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier.verify_server_cert(served, &[], &name, &[], UnixTime::now())
    }

    #[test]
    fn a_cacert_certificate_served_as_is_is_trusted_within_its_name_and_dates() {
        let (der, pem) = self_signed_ca("localhost", -1, 30);
        assert!(verify(&pem, &der, "localhost").is_ok());
        let e = verify(&pem, &der, "other.example").unwrap_err();
        assert_eq!(crate::classify::failure_class(&e), "certificate_name_mismatch", "{e:?}");
        // webpki checks the dates before the basic constraints: an expired
        // or early one never reaches the exact match.
        let (der, pem) = self_signed_ca("localhost", -30, -1);
        assert_eq!(
            crate::classify::failure_class(&verify(&pem, &der, "localhost").unwrap_err()),
            "certificate_expired"
        );
        let (der, pem) = self_signed_ca("localhost", 2, 30);
        assert_eq!(
            crate::classify::failure_class(&verify(&pem, &der, "localhost").unwrap_err()),
            "certificate_not_yet_valid"
        );
        // Not among the --cacert certificates: refused, with its reason.
        let (der, _) = self_signed_ca("localhost", -1, 30);
        let (_, other) = self_signed_ca("localhost", -1, 30);
        assert_eq!(
            crate::classify::failure_class(&verify(&other, &der, "localhost").unwrap_err()),
            "ca_used_as_end_entity"
        );
    }

    #[test]
    fn the_public_key_is_found_in_a_certificate_and_nothing_panics_on_a_broken_one() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = cert.der().to_vec();
        assert_eq!(
            subject_public_key_info(&der),
            Some(rcgen::PublicKeyData::subject_public_key_info(&key).as_slice())
        );
        for n in 0..der.len() {
            assert_eq!(subject_public_key_info(&der[..n]), None, "a prefix of {n} bytes");
        }
        assert_eq!(subject_public_key_info(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subject_public_key_info(&[0x30, 0x80]), None);
    }
}
