//! `k6/crypto`'s hashes and HMACs as host functions: digests from aws-lc
//! (the TLS library throng already carries; MD5 from RustCrypto, which
//! aws-lc does not expose), written as hex or base64 text.

use aws_lc_rs::{digest, hmac};
use base64::Engine as _;
use md5::Digest as _;
use rquickjs::{Ctx, Function, IntoJs, Object, Value};

/// The most bytes one `randomBytes()` call returns.
const RANDOM_MAX: usize = 1 << 20;

/// The algorithms k6 names that throng computes.
pub(crate) const ALGORITHMS: [&str; 6] = ["md5", "sha1", "sha256", "sha384", "sha512", "sha512_256"];

/// `hash(algorithm, data, encoding)` and `hmac(algorithm, secret, data,
/// encoding)` on `o` (`globalThis.__throng`); each throws a TypeError
/// naming what it does not compute.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, o: &Object<'js>) -> rquickjs::Result<()> {
    o.set(
        "hash",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, alg: String, data: String, enc: String| -> rquickjs::Result<Value<'js>> {
                let sum = match alg.as_str() {
                    "md5" => md5::Md5::digest(data.as_bytes()).to_vec(),
                    _ => digest::digest(algorithm(&ctx, &alg)?.0, data.as_bytes())
                        .as_ref()
                        .to_vec(),
                };
                encode(&ctx, &sum, &enc)
            },
        )?,
    )?;
    o.set(
        "hmac",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, alg: String, secret: String, data: String, enc: String| -> rquickjs::Result<Value<'js>> {
                let Some(a) = algorithm(&ctx, &alg)?.1 else {
                    return Err(type_error(
                        &ctx,
                        &format!("hmac: '{alg}' is not supported (sha1, sha256, sha384, sha512)"),
                    ));
                };
                let key = hmac::Key::new(a, secret.as_bytes());
                encode(&ctx, hmac::sign(&key, data.as_bytes()).as_ref(), &enc)
            },
        )?,
    )?;
    o.set(
        "randomBytes",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, n: f64| -> rquickjs::Result<Value<'js>> {
            if !(n.fract() == 0.0 && (1.0..=RANDOM_MAX as f64).contains(&n)) {
                return Err(rquickjs::Exception::throw_range(
                    &ctx,
                    &format!("randomBytes: give a whole number of bytes from 1 to {RANDOM_MAX}, not {n}"),
                ));
            }
            // A whole number in 1..=RANDOM_MAX: exact as usize.
            let mut bytes = vec![0u8; n as usize];
            aws_lc_rs::rand::fill(&mut bytes)
                .map_err(|_| rquickjs::Exception::throw_internal(&ctx, "randomBytes: the system's generator failed"))?;
            rquickjs::ArrayBuffer::new(ctx.clone(), bytes)?.into_js(&ctx)
        })?,
    )
}

/// The digest (and HMAC) algorithm k6 names `alg`.
fn algorithm(ctx: &Ctx<'_>, alg: &str) -> rquickjs::Result<(&'static digest::Algorithm, Option<hmac::Algorithm>)> {
    Ok(match alg {
        "sha1" => (
            &digest::SHA1_FOR_LEGACY_USE_ONLY,
            Some(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY),
        ),
        "sha256" => (&digest::SHA256, Some(hmac::HMAC_SHA256)),
        "sha384" => (&digest::SHA384, Some(hmac::HMAC_SHA384)),
        "sha512" => (&digest::SHA512, Some(hmac::HMAC_SHA512)),
        "sha512_256" => (&digest::SHA512_256, None),
        other => {
            return Err(type_error(
                ctx,
                &format!("'{other}' is not a hash throng computes ({})", ALGORITHMS.join(", ")),
            ));
        }
    })
}

/// The bytes as k6's output encodings write them: text, or an ArrayBuffer
/// for `binary`.
fn encode<'js>(ctx: &Ctx<'js>, bytes: &[u8], enc: &str) -> rquickjs::Result<Value<'js>> {
    use base64::engine::general_purpose as gp;
    let text: String = match enc {
        "binary" => return rquickjs::ArrayBuffer::new(ctx.clone(), bytes.to_vec())?.into_js(ctx),
        "hex" => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        "base64" => gp::STANDARD.encode(bytes),
        "base64url" => gp::URL_SAFE.encode(bytes),
        "base64rawurl" => gp::URL_SAFE_NO_PAD.encode(bytes),
        other => {
            return Err(type_error(
                ctx,
                &format!(
                    "output encoding '{other}' is not supported by throng (hex, base64, base64url, base64rawurl, \
                     binary)"
                ),
            ));
        }
    };
    text.into_js(ctx)
}

fn type_error(ctx: &Ctx<'_>, message: &str) -> rquickjs::Error {
    rquickjs::Exception::throw_type(ctx, message)
}
