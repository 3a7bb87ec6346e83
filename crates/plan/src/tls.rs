//! TLS settings of a plan: what the flags or a scenario's `tls:` block say,
//! parsed once into types. The files they name are read at the edge
//! (throng-tls builds the client configuration from these settings).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A name that is no TLS group or version (the text as given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsNameError {
    /// Not a key-exchange group [`TlsGroup::parse`] knows.
    #[error("'{0}' is not a key-exchange group; use x25519, p256, p384 or x25519mlkem768")]
    Group(String),
    /// Not a TLS version [`TlsVersion::parse`] knows.
    #[error("'{0}' is not a TLS version; use 1.2 or 1.3")]
    Version(String),
}

/// A key-exchange group a client may offer (`--tls-groups`, `tls.groups`).
/// Exhaustive on purpose: a new group must be mapped in throng-tls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsGroup {
    /// X25519.
    X25519,
    /// NIST P-256.
    Secp256r1,
    /// NIST P-384.
    Secp384r1,
    /// The post-quantum hybrid X25519 + ML-KEM-768 (rustls' default first choice).
    X25519MlKem768,
}

impl TlsGroup {
    /// Parses `x25519`, `p256`/`secp256r1`/`prime256v1`, `p384`/`secp384r1`,
    /// `x25519mlkem768`/`mlkem` (case, `-` and `_` ignored).
    pub fn parse(text: &str) -> Result<TlsGroup, TlsNameError> {
        match text.trim().to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "x25519" => Ok(TlsGroup::X25519),
            "p256" | "secp256r1" | "prime256v1" => Ok(TlsGroup::Secp256r1),
            "p384" | "secp384r1" => Ok(TlsGroup::Secp384r1),
            "x25519mlkem768" | "mlkem" => Ok(TlsGroup::X25519MlKem768),
            _ => Err(TlsNameError::Group(text.to_string())),
        }
    }

    /// The name results and reports use.
    pub fn name(self) -> &'static str {
        match self {
            TlsGroup::X25519 => "x25519",
            TlsGroup::Secp256r1 => "p256",
            TlsGroup::Secp384r1 => "p384",
            TlsGroup::X25519MlKem768 => "x25519mlkem768",
        }
    }
}

/// A TLS protocol version to allow alone (`--tls-version`, `tls.version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

impl TlsVersion {
    /// Parses `1.2` or `1.3` (also `tls1.2`, `TLSv1.3`).
    pub fn parse(text: &str) -> Result<TlsVersion, TlsNameError> {
        match text.trim() {
            "1.2" | "tls1.2" | "TLSv1.2" => Ok(TlsVersion::Tls12),
            "1.3" | "tls1.3" | "TLSv1.3" => Ok(TlsVersion::Tls13),
            _ => Err(TlsNameError::Version(text.to_string())),
        }
    }

    /// `1.2` or `1.3`.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

macro_rules! text_type {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = TlsNameError;
            fn from_str(s: &str) -> Result<Self, TlsNameError> {
                <$t>::parse(s)
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
        // Results written before these were types hold the text as typed:
        // any spelling `parse` accepts reads back.
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                <$t>::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}
text_type!(TlsGroup);
text_type!(TlsVersion);

/// TLS settings from the command line or a scenario file. Groups and the
/// version are parsed; the files are read and checked at the edge
/// (`throng_tls::client_config`), relative to where they were given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSettings {
    /// `--insecure`: certificates are not verified.
    #[serde(default)]
    pub insecure: bool,
    /// `--cacert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<String>,
    /// `--cert` (client certificate, mTLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    /// `--key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `--tls-resume`: resume sessions instead of full handshakes.
    #[serde(default)]
    pub resume: bool,
    /// `--tls-groups`: the groups to offer, in order (empty: rustls' default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<TlsGroup>,
    /// `--tls-version`: only this version (none: 1.2 and 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<TlsVersion>,
    /// `--sni`: the server name to send and verify (default: the URL's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

impl TlsSettings {
    /// True when any TLS flag was given.
    pub fn any(&self) -> bool {
        *self != TlsSettings::default()
    }

    /// `verified`, `NOT verified (--insecure)`, plus mTLS and resumption notes.
    pub fn describe(&self) -> String {
        let mut parts = vec![if self.insecure {
            "certificates NOT verified (--insecure)".to_string()
        } else {
            match &self.cacert {
                Some(ca) => format!("certificates verified against {ca}"),
                None => "certificates verified against the system's CAs".to_string(),
            }
        }];
        if self.cert.is_some() {
            parts.push("client certificate (mTLS)".to_string());
        }
        parts.push(
            if self.resume {
                "sessions resumed"
            } else {
                "full handshakes"
            }
            .to_string(),
        );
        if !self.groups.is_empty() {
            let names: Vec<&str> = self.groups.iter().map(|g| g.name()).collect();
            parts.push(format!("groups {}", names.join(",")));
        }
        if let Some(v) = &self.version {
            parts.push(format!("TLS {v} only"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_versions_parse_their_spellings_and_write_one() {
        assert_eq!(TlsGroup::parse("P-256"), Ok(TlsGroup::Secp256r1));
        assert_eq!(TlsGroup::parse("prime256v1"), Ok(TlsGroup::Secp256r1));
        assert_eq!(TlsGroup::parse("X25519MLKEM768"), Ok(TlsGroup::X25519MlKem768));
        assert_eq!(
            TlsGroup::parse("x448").unwrap_err().to_string(),
            "'x448' is not a key-exchange group; use x25519, p256, p384 or x25519mlkem768"
        );
        assert_eq!(TlsVersion::parse("TLSv1.2"), Ok(TlsVersion::Tls12));
        assert_eq!(
            TlsVersion::parse("1.1").unwrap_err().to_string(),
            "'1.1' is not a TLS version; use 1.2 or 1.3"
        );
        let s = TlsSettings {
            groups: vec![TlsGroup::X25519, TlsGroup::Secp384r1],
            version: Some(TlsVersion::Tls13),
            ..TlsSettings::default()
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""groups":["x25519","p384"]"#), "{json}");
        assert!(json.contains(r#""version":"1.3""#), "{json}");
        assert_eq!(serde_json::from_str::<TlsSettings>(&json).unwrap(), s);
        assert!(
            s.describe().contains("groups x25519,p384, TLS 1.3 only"),
            "{}",
            s.describe()
        );
    }

    #[test]
    fn settings_written_as_typed_before_read_back() {
        let old = r#"{"insecure":true,"resume":false,"groups":["X25519","secp256r1"],"version":"tls1.2"}"#;
        let s: TlsSettings = serde_json::from_str(old).unwrap();
        assert_eq!(s.groups, [TlsGroup::X25519, TlsGroup::Secp256r1]);
        assert_eq!(s.version, Some(TlsVersion::Tls12));
        assert!(serde_json::from_str::<TlsSettings>(r#"{"groups":["x448"]}"#).is_err());
    }
}
