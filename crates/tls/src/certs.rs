//! Lab certificates: a CA, a server and a client certificate, for tests,
//! demos and `throng serve --tls`.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SignatureAlgorithm,
};
use time::{Duration, OffsetDateTime};

use crate::error::TlsError;

/// Key type of every generated certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertKind {
    /// ECDSA P-256 with SHA-256 (the default: what most servers deploy).
    Ecdsa,
    /// RSA 2048 with SHA-256.
    Rsa,
}

/// How long the leaf certificates are valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// From a day ago for a year.
    Current,
    /// Expired yesterday (for testing how clients fail).
    Expired,
}

/// PEM texts of a generated set.
#[derive(Clone, Debug)]
pub struct GeneratedFiles {
    /// (file name, contents, is a private key)
    pub files: Vec<(&'static str, String, bool)>,
}

fn algorithm(kind: CertKind) -> &'static SignatureAlgorithm {
    match kind {
        CertKind::Ecdsa => &rcgen::PKCS_ECDSA_P256_SHA256,
        CertKind::Rsa => &rcgen::PKCS_RSA_SHA256,
    }
}

fn err(e: rcgen::Error) -> TlsError {
    TlsError::Generate(e.to_string())
}

/// Generates `ca.pem`/`ca.key`, `server.pem`/`server.key` (valid for
/// `hosts`: DNS names or IP addresses) and `client.pem`/`client.key`.
pub fn generate(kind: CertKind, hosts: &[String], validity: Validity) -> Result<GeneratedFiles, TlsError> {
    let alg = algorithm(kind);
    let now = OffsetDateTime::now_utc();
    let (not_before, not_after) = match validity {
        Validity::Current => (now - Duration::days(1), now + Duration::days(365)),
        Validity::Expired => (now - Duration::days(30), now - Duration::days(1)),
    };

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "throng lab CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = now - Duration::days(1);
    ca_params.not_after = now + Duration::days(3650);
    let ca_key = KeyPair::generate_for(alg).map_err(err)?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(err)?;

    let leaf = |cn: &str, sans: Vec<String>, eku: ExtendedKeyUsagePurpose| -> Result<(String, String), TlsError> {
        let mut p = CertificateParams::new(sans).map_err(err)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        p.extended_key_usages = vec![eku];
        p.not_before = not_before;
        p.not_after = not_after;
        let key = KeyPair::generate_for(alg).map_err(err)?;
        let cert = p.signed_by(&key, &ca).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let server_cn = hosts.first().cloned().unwrap_or_else(|| "localhost".to_string());
    let (server_pem, server_key) = leaf(&server_cn, hosts.to_vec(), ExtendedKeyUsagePurpose::ServerAuth)?;
    let (client_pem, client_key) = leaf("throng client", Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;

    Ok(GeneratedFiles {
        files: vec![
            ("ca.pem", ca.pem(), false),
            ("ca.key", ca_key_pem, true),
            ("server.pem", server_pem, false),
            ("server.key", server_key, true),
            ("client.pem", client_pem, false),
            ("client.key", client_key, true),
        ],
    })
}

/// Writes the files into `dir` (created if missing): keys 0600, certificates
/// 0644. Returns the paths written. A file that is a symbolic link is
/// refused, not written through (a planted link could send a key anywhere).
pub fn write_files(dir: &Path, files: &GeneratedFiles) -> std::io::Result<Vec<PathBuf>> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (name, text, secret) in &files.files {
        let path = dir.join(name);
        let mode = if *secret { 0o600 } else { 0o644 };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => std::io::Error::new(
                    e.kind(),
                    format!(
                        "'{}' is a symbolic link; refusing to write {} through it (remove the link, or choose \
                         another directory)",
                        path.display(),
                        if *secret { "a private key" } else { "a certificate" }
                    ),
                ),
                _ => std::io::Error::new(e.kind(), format!("'{}': {e}", path.display())),
            })?;
        // An existing file keeps its old mode on open: set it on the file
        // opened (never on whatever the path names by now).
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientOptions, client_config, server_config};

    fn find(g: &GeneratedFiles, name: &str) -> (String, Vec<u8>) {
        let (_, text, _) = g.files.iter().find(|(n, _, _)| *n == name).unwrap();
        (name.to_string(), text.as_bytes().to_vec())
    }

    #[test]
    fn generated_sets_build_client_and_server_configs() {
        for kind in [CertKind::Ecdsa, CertKind::Rsa] {
            let g = generate(kind, &["localhost".into(), "127.0.0.1".into()], Validity::Current).unwrap();
            assert_eq!(g.files.len(), 6);
            server_config(
                &find(&g, "server.pem"),
                &find(&g, "server.key"),
                Some(&find(&g, "ca.pem")),
            )
            .unwrap();
            client_config(&ClientOptions {
                cacert: Some(find(&g, "ca.pem")),
                cert: Some(find(&g, "client.pem")),
                key: Some(find(&g, "client.key")),
                ..ClientOptions::default()
            })
            .unwrap();
        }
    }

    #[test]
    fn keys_are_written_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("throng-certs-{}", std::process::id()));
        let g = generate(CertKind::Ecdsa, &["localhost".into()], Validity::Current).unwrap();
        let paths = write_files(&dir, &g).unwrap();
        for p in paths {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            let want = if p.extension().is_some_and(|e| e == "key") {
                0o600
            } else {
                0o644
            };
            assert_eq!(mode, want, "{}", p.display());
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_refused_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("throng-certs-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("ca.key")).unwrap();
        let g = generate(CertKind::Ecdsa, &["localhost".into()], Validity::Current).unwrap();
        let e = write_files(&dir, &g).unwrap_err().to_string();
        assert!(
            e.contains("ca.key' is a symbolic link; refusing to write a private key"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777, 0o644);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_key_that_is_not_the_certificates_says_so() {
        let a = generate(CertKind::Ecdsa, &["localhost".into()], Validity::Current).unwrap();
        let b = generate(CertKind::Ecdsa, &["localhost".into()], Validity::Current).unwrap();
        let e = client_config(&ClientOptions {
            insecure: true,
            cert: Some(find(&a, "client.pem")),
            key: Some(find(&b, "client.key")),
            ..ClientOptions::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("client.key is not the private key of the certificate in client.pem (their public keys differ)"),
            "{e}"
        );
        let e = client_config(&ClientOptions {
            insecure: true,
            cert: Some(find(&a, "client.key")),
            key: Some(find(&a, "client.key")),
            ..ClientOptions::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--cert client.key:"), "{e}");
    }

    #[test]
    fn bad_pem_names_the_flag_and_file() {
        let e = client_config(&ClientOptions {
            cacert: Some(("/tmp/x.pem".into(), b"not pem".to_vec())),
            ..ClientOptions::default()
        })
        .unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("--cacert /tmp/x.pem:"), "{text}");
    }
}
