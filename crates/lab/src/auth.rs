//! An in-memory auth service: register, verify a one-time code, log in,
//! refresh, and ask who a token belongs to; passwords are bcrypt-hashed.
//!
//! ```text
//!  route ─► parse_call (JSON, on the event loop) ─► Call
//!  Service::handle(Call):
//!    register, login ─► HashPool (bcrypt, off the event loops) ─┐
//!    all ───────────────► Store (Mutex, shared by every thread) ◄┘ ─► Reply (JSON)
//! ```
//!
//! The bcrypt work is the point: it makes the service CPU-bound the way a
//! real one is, and the hashing pool's size is its capacity.

mod pool;
mod store;

use std::fmt;
use std::io;
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;
use serde_json::json;

use self::pool::{HashPool, PoolError};
use self::store::{Refusal, Store, Token};

/// Password hashes that may wait for a hashing thread before the service
/// answers 503.
const HASH_QUEUE: usize = 65_536;
/// Longest email accepted (the longest an address can be).
const MAX_EMAIL: usize = 254;
/// bcrypt uses at most this many bytes of a password; longer ones are
/// refused rather than silently cut.
const MAX_PASSWORD: usize = 72;

/// A bcrypt cost (log2 of the rounds), validated to bcrypt's 4..=31.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BcryptCost(u32);

impl BcryptCost {
    /// 12: about a quarter of a second per hash on a current core.
    pub const DEFAULT: BcryptCost = BcryptCost(12);
    /// The lowest cost bcrypt allows.
    pub const MIN: u32 = 4;
    /// The highest cost bcrypt allows.
    pub const MAX: u32 = 31;

    /// `cost`, if bcrypt allows it.
    pub fn new(cost: u32) -> Result<BcryptCost, AuthConfigError> {
        if (Self::MIN..=Self::MAX).contains(&cost) {
            Ok(BcryptCost(cost))
        } else {
            Err(AuthConfigError::Cost(cost))
        }
    }

    /// The cost as a number.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A bad auth setting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthConfigError {
    /// The bcrypt cost is outside 4..=31.
    #[error("bcrypt cost {0} is out of range: use 4 to 31 (12 is typical; each step doubles the work)")]
    Cost(u32),
}

/// How the auth endpoints behave.
///
/// ```
/// let mut auth = throng_lab::AuthConfig::default();
/// auth.cost = throng_lab::BcryptCost::new(4).unwrap();
/// auth.reveal_otp = true;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AuthConfig {
    /// bcrypt cost for new passwords.
    pub cost: BcryptCost,
    /// Put the one-time code in the register response (so that a test can
    /// finish sign-up without the server's logs); off by default.
    pub reveal_otp: bool,
    /// Threads that hash and verify passwords: at most this many at once.
    pub hash_threads: NonZeroUsize,
    /// Users the store holds before registering answers 503; also the
    /// number of live tokens of each kind it keeps (past it, the oldest is
    /// forgotten).
    pub max_users: usize,
}

impl Default for AuthConfig {
    /// Cost 12, codes not revealed, one hashing thread per core, a million
    /// users.
    fn default() -> AuthConfig {
        AuthConfig {
            cost: BcryptCost::DEFAULT,
            reveal_otp: false,
            hash_threads: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            max_users: 1_000_000,
        }
    }
}

/// An auth request, parsed.
#[derive(PartialEq, Eq)]
pub(crate) enum Call {
    Register { email: String, password: String },
    Login { email: String, password: String },
    VerifyOtp { email: String, otp: String },
    Refresh { refresh_token: String },
    Me { access_token: String },
}

impl fmt::Debug for Call {
    /// Without passwords.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Register { email, .. } => write!(f, "Register({email})"),
            Call::Login { email, .. } => write!(f, "Login({email})"),
            Call::VerifyOtp { email, otp } => write!(f, "VerifyOtp({email}, {otp})"),
            Call::Refresh { refresh_token } => write!(f, "Refresh({refresh_token})"),
            Call::Me { access_token } => write!(f, "Me({access_token})"),
        }
    }
}

/// A response: status and JSON body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: String,
    /// For 405: the method the endpoint takes.
    pub(crate) allow: Option<&'static str>,
}

impl Reply {
    fn ok(body: serde_json::Value) -> Reply {
        Reply {
            status: 200,
            body: body.to_string(),
            allow: None,
        }
    }

    pub(crate) fn error(status: u16, code: &str, detail: &str) -> Reply {
        Reply {
            status,
            body: json!({ "error": code, "detail": detail }).to_string(),
            allow: None,
        }
    }
}

/// The endpoints, for 404 and 405 answers.
pub(crate) const ENDPOINTS: &str =
    "POST /auth/register, POST /auth/login, POST /auth/verify-otp, POST /auth/refresh, GET /auth/me";

#[derive(Deserialize)]
struct Credentials {
    email: String,
    password: String,
}

#[derive(Deserialize)]
struct OtpBody {
    email: String,
    otp: String,
}

#[derive(Deserialize)]
struct RefreshBody {
    refresh_token: String,
}

/// Parses a request to `/auth/{endpoint}`: the call, or the error answer.
pub(crate) fn parse_call(
    method: &str,
    endpoint: &str,
    body: &[u8],
    authorization: Option<&str>,
) -> Result<Call, Reply> {
    let want = match endpoint {
        "register" | "login" | "verify-otp" | "refresh" => "POST",
        "me" => "GET",
        _ => {
            return Err(Reply::error(
                404,
                "NOT_FOUND",
                &format!("no endpoint /auth/{endpoint}; the auth endpoints are {ENDPOINTS}"),
            ));
        }
    };
    if method != want {
        let mut r = Reply::error(
            405,
            "METHOD_NOT_ALLOWED",
            &format!("/auth/{endpoint} takes {want}, not {method}"),
        );
        r.allow = Some(want);
        return Err(r);
    }
    match endpoint {
        "register" | "login" => {
            let c: Credentials = json_body(body, r#"{"email":"...","password":"..."}"#)?;
            check_email(&c.email)?;
            if c.password.is_empty() || c.password.len() > MAX_PASSWORD {
                return Err(bad_request(&format!(
                    "password must be 1 to {MAX_PASSWORD} bytes (bcrypt uses no more), not {}",
                    c.password.len()
                )));
            }
            Ok(if endpoint == "register" {
                Call::Register {
                    email: c.email,
                    password: c.password,
                }
            } else {
                Call::Login {
                    email: c.email,
                    password: c.password,
                }
            })
        }
        "verify-otp" => {
            let c: OtpBody = json_body(body, r#"{"email":"...","otp":"123456"}"#)?;
            check_email(&c.email)?;
            Ok(Call::VerifyOtp {
                email: c.email,
                otp: c.otp,
            })
        }
        "refresh" => {
            let c: RefreshBody = json_body(body, r#"{"refresh_token":"..."}"#)?;
            Ok(Call::Refresh {
                refresh_token: c.refresh_token,
            })
        }
        _ => match authorization.map(bearer) {
            Some(Some(token)) => Ok(Call::Me {
                access_token: token.to_string(),
            }),
            Some(None) => Err(Reply::error(
                401,
                "INVALID_TOKEN",
                "the Authorization header must be 'Bearer ACCESS_TOKEN'",
            )),
            None => Err(Reply::error(
                401,
                "MISSING_TOKEN",
                "send 'Authorization: Bearer ACCESS_TOKEN' (the access_token from /auth/login)",
            )),
        },
    }
}

fn json_body<'a, T: Deserialize<'a>>(body: &'a [u8], shape: &str) -> Result<T, Reply> {
    serde_json::from_slice(body).map_err(|e| bad_request(&format!("the body must be a JSON object like {shape}: {e}")))
}

fn check_email(email: &str) -> Result<(), Reply> {
    if email.is_empty() || email.len() > MAX_EMAIL || !email.contains('@') {
        return Err(bad_request(&format!(
            "email must look like name@host and be at most {MAX_EMAIL} bytes"
        )));
    }
    Ok(())
}

fn bad_request(detail: &str) -> Reply {
    Reply::error(400, "BAD_REQUEST", detail)
}

/// The token in `Bearer TOKEN` (the scheme in any case).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The auth service one lab server shares between its threads.
#[derive(Debug)]
pub(crate) struct Service {
    store: Mutex<Store>,
    pool: HashPool,
    cost: BcryptCost,
    reveal_otp: bool,
    max_users: usize,
}

impl Service {
    /// Starts the hashing threads.
    pub(crate) fn new(config: &AuthConfig) -> io::Result<Service> {
        Ok(Service {
            store: Mutex::new(Store::new(config.max_users)),
            pool: HashPool::new(config.hash_threads, HASH_QUEUE)?,
            cost: config.cost,
            reveal_otp: config.reveal_otp,
            max_users: config.max_users,
        })
    }

    /// Answers `call`. bcrypt runs on the hashing pool; the store's lock is
    /// never held across it.
    pub(crate) async fn handle(&self, call: Call) -> Reply {
        match call {
            Call::Register { email, password } => self.register(email, password).await,
            Call::Login { email, password } => self.login(email, password).await,
            Call::VerifyOtp { email, otp } => {
                if self.store().verify(&email, &otp) {
                    Reply::ok(json!({ "message": "verified" }))
                } else {
                    Reply::error(401, "INVALID_OTP", "no such user, or the wrong code")
                }
            }
            Call::Refresh { refresh_token } => {
                let Some(refresh) = Token::parse(&refresh_token) else {
                    return unknown_refresh();
                };
                let access = match random_token() {
                    Ok(t) => t,
                    Err(r) => return r,
                };
                if self.store().refresh(refresh, access) {
                    Reply::ok(json!({ "access_token": access.to_string() }))
                } else {
                    unknown_refresh()
                }
            }
            Call::Me { access_token } => {
                let owner = Token::parse(&access_token).and_then(|t| self.store().owner(t).map(str::to_string));
                match owner {
                    Some(email) => Reply::ok(json!({ "email": email })),
                    None => Reply::error(
                        401,
                        "INVALID_TOKEN",
                        "unknown access token (never issued by this server, or forgotten)",
                    ),
                }
            }
        }
    }

    async fn register(&self, email: String, password: String) -> Reply {
        // Refuse before hashing, as a server checks its database first.
        let admitted = self.store().admits(&email);
        if let Err(refusal) = admitted {
            return self.refused(refusal);
        }
        let otp = match random_otp() {
            Ok(otp) => otp,
            Err(r) => return r,
        };
        let cost = self.cost.get();
        let hash = match self.pool.run(move || bcrypt::non_truncating_hash(password, cost)).await {
            Ok(Ok(hash)) => hash,
            Ok(Err(e)) => return Reply::error(500, "INTERNAL", &format!("bcrypt failed: {e}")),
            Err(e) => return self.pool_error(e),
        };
        // Another registration of the same email may have finished first.
        let inserted = self.store().insert(&email, hash, otp.clone());
        if let Err(refusal) = inserted {
            return self.refused(refusal);
        }
        let mut body = json!({ "message": "OTP sent", "email": email });
        if self.reveal_otp {
            body["otp"] = otp.into();
        }
        Reply::ok(body)
    }

    async fn login(&self, email: String, password: String) -> Reply {
        let Some(account) = self.store().account(&email) else {
            return invalid_credentials();
        };
        let hash = account.hash;
        let matches = match self
            .pool
            .run(move || bcrypt::non_truncating_verify(password, &hash))
            .await
        {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return Reply::error(500, "INTERNAL", &format!("bcrypt failed: {e}")),
            Err(e) => return self.pool_error(e),
        };
        if !matches {
            return invalid_credentials();
        }
        if !account.verified {
            return Reply::error(
                401,
                "VERIFICATION_PENDING",
                "the password is right, but the email is not verified yet: POST /auth/verify-otp first",
            );
        }
        let (access, refresh) = match (random_token(), random_token()) {
            (Ok(a), Ok(r)) => (a, r),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if !self.store().issue(&email, access, refresh) {
            return invalid_credentials();
        }
        Reply::ok(json!({
            "access_token": access.to_string(),
            "refresh_token": refresh.to_string(),
        }))
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        // Nothing panics while holding the lock; if something did, the
        // store is still consistent (every change is one insert).
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refused(&self, refusal: Refusal) -> Reply {
        match refusal {
            Refusal::Exists => Reply::error(409, "USER_EXISTS", "this email is already registered"),
            Refusal::Full => Reply::error(
                503,
                "STORE_FULL",
                &format!(
                    "the lab's auth store holds its maximum of {} users; restart the server to empty it",
                    self.max_users
                ),
            ),
        }
    }

    fn pool_error(&self, e: PoolError) -> Reply {
        match e {
            PoolError::Busy => Reply::error(
                503,
                "BUSY",
                &format!(
                    "{} password hashes are already waiting for a hashing thread; try again later",
                    self.pool.capacity()
                ),
            ),
            PoolError::Failed => Reply::error(500, "INTERNAL", "the password hashing job failed"),
        }
    }
}

fn invalid_credentials() -> Reply {
    Reply::error(401, "INVALID_CREDENTIALS", "unknown email or wrong password")
}

fn unknown_refresh() -> Reply {
    Reply::error(
        401,
        "INVALID_TOKEN",
        "unknown refresh token (never issued by this server, or forgotten)",
    )
}

fn no_randomness(e: getrandom::Error) -> Reply {
    Reply::error(500, "INTERNAL", &format!("the system's random source failed: {e}"))
}

fn random_token() -> Result<Token, Reply> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(no_randomness)?;
    Ok(Token(u128::from_le_bytes(bytes)))
}

/// Six random digits, uniformly.
fn random_otp() -> Result<String, Reply> {
    // The largest multiple of a million that fits a u32: drawing below it
    // and taking the remainder favours no code.
    const LIMIT: u32 = 4_294_000_000;
    loop {
        let n = getrandom::u32().map_err(no_randomness)?;
        if n < LIMIT {
            return Ok(format!("{:06}", n % 1_000_000));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(reveal_otp: bool, max_users: usize) -> AuthConfig {
        AuthConfig {
            cost: BcryptCost::new(4).unwrap(),
            reveal_otp,
            hash_threads: NonZeroUsize::new(2).unwrap(),
            max_users,
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn body(r: &Reply) -> serde_json::Value {
        serde_json::from_str(&r.body).unwrap()
    }

    fn creds(endpoint: &str, email: &str, password: &str) -> Call {
        let b = json!({ "email": email, "password": password }).to_string();
        parse_call("POST", endpoint, b.as_bytes(), None).unwrap()
    }

    #[test]
    fn costs_outside_4_to_31_are_refused() {
        assert_eq!(BcryptCost::new(4).unwrap().get(), 4);
        assert_eq!(BcryptCost::new(31).unwrap().get(), 31);
        for bad in [0, 3, 32, u32::MAX] {
            let e = BcryptCost::new(bad).unwrap_err();
            assert!(e.to_string().contains("use 4 to 31"), "{e}");
        }
    }

    #[test]
    fn calls_parse_from_json() {
        assert_eq!(
            creds("register", "a@x", "pw"),
            Call::Register {
                email: "a@x".into(),
                password: "pw".into()
            }
        );
        assert_eq!(
            creds("login", "a@x", "pw"),
            Call::Login {
                email: "a@x".into(),
                password: "pw".into()
            }
        );
        assert_eq!(
            parse_call(
                "POST",
                "verify-otp",
                br#"{"email":"a@x","otp":"012345","extra":1}"#,
                None
            ),
            Ok(Call::VerifyOtp {
                email: "a@x".into(),
                otp: "012345".into()
            })
        );
        assert_eq!(
            parse_call("POST", "refresh", br#"{"refresh_token":"abc"}"#, None),
            Ok(Call::Refresh {
                refresh_token: "abc".into()
            })
        );
        assert_eq!(
            parse_call("GET", "me", b"", Some("bearer  tok ")),
            Ok(Call::Me {
                access_token: "tok".into()
            })
        );
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        let err = |method: &str, endpoint: &str, raw: &[u8], auth: Option<&str>| {
            let r = parse_call(method, endpoint, raw, auth).unwrap_err();
            let b = body(&r);
            (
                r.status,
                b["error"].as_str().unwrap().to_string(),
                b["detail"].as_str().unwrap().to_string(),
            )
        };
        let (s, code, detail) = err("POST", "register", br#"{"email":"a@x"}"#, None);
        assert_eq!((s, code.as_str()), (400, "BAD_REQUEST"));
        assert!(detail.contains("missing field `password`"), "{detail}");
        let (s, _, detail) = err("POST", "login", b"not json", None);
        assert_eq!(s, 400);
        assert!(detail.contains("JSON object like"), "{detail}");
        assert_eq!(err("POST", "register", b"", None).0, 400);
        assert_eq!(err("POST", "register", b"\xff\xfe", None).0, 400);
        assert_eq!(err("POST", "register", b"[1,2]", None).0, 400);
        assert_eq!(err("POST", "register", br#"{"email":1,"password":"p"}"#, None).0, 400);
        let deep = "[".repeat(100_000);
        assert_eq!(err("POST", "register", deep.as_bytes(), None).0, 400);
        let (s, _, detail) = err("POST", "register", br#"{"email":"nobody","password":"p"}"#, None);
        assert!(s == 400 && detail.contains("name@host"), "{detail}");
        let long = json!({ "email": "a@x", "password": "p".repeat(73) }).to_string();
        let (s, _, detail) = err("POST", "register", long.as_bytes(), None);
        assert!(s == 400 && detail.contains("not 73"), "{detail}");
        assert_eq!(
            err("POST", "register", br#"{"email":"a@x","password":""}"#, None).0,
            400
        );
        assert_eq!(
            err("POST", "verify-otp", br#"{"email":"a@x","otp":123456}"#, None).0,
            400
        );
        assert_eq!(err("POST", "refresh", br#"{}"#, None).0, 400);

        let (s, code, detail) = err("GET", "register", b"", None);
        assert_eq!((s, code.as_str()), (405, "METHOD_NOT_ALLOWED"));
        assert!(detail.contains("takes POST"), "{detail}");
        let r = parse_call("POST", "me", b"", None).unwrap_err();
        assert_eq!(r.allow, Some("GET"));
        let (s, code, detail) = err("POST", "logout", b"", None);
        assert_eq!((s, code.as_str()), (404, "NOT_FOUND"));
        assert!(detail.contains("POST /auth/register"), "{detail}");

        assert_eq!(err("GET", "me", b"", None).1, "MISSING_TOKEN");
        assert_eq!(err("GET", "me", b"", Some("Basic dXNlcg==")).1, "INVALID_TOKEN");
        assert_eq!(err("GET", "me", b"", Some("Bearer ")).1, "INVALID_TOKEN");
    }

    #[test]
    fn sign_up_verify_log_in_refresh_and_ask_who() {
        let auth = Service::new(&config(true, 10)).unwrap();
        run(async {
            let r = auth.handle(creds("register", "a@x", "secret")).await;
            assert_eq!(r.status, 200, "{}", r.body);
            let b = body(&r);
            assert_eq!(b["message"], "OTP sent");
            assert_eq!(b["email"], "a@x");
            let otp = b["otp"].as_str().unwrap().to_string();
            assert!(otp.len() == 6 && otp.bytes().all(|c| c.is_ascii_digit()), "{otp}");

            let r = auth.handle(creds("register", "a@x", "other")).await;
            assert_eq!((r.status, body(&r)["error"].as_str()), (409, Some("USER_EXISTS")));

            let r = auth.handle(creds("login", "a@x", "wrong")).await;
            assert_eq!(
                (r.status, body(&r)["error"].as_str()),
                (401, Some("INVALID_CREDENTIALS"))
            );
            let r = auth.handle(creds("login", "b@x", "secret")).await;
            assert_eq!(
                (r.status, body(&r)["error"].as_str()),
                (401, Some("INVALID_CREDENTIALS"))
            );
            let r = auth.handle(creds("login", "a@x", "secret")).await;
            assert_eq!(
                (r.status, body(&r)["error"].as_str()),
                (401, Some("VERIFICATION_PENDING"))
            );

            let wrong = if otp == "000000" { "000001" } else { "000000" };
            let verify = |code: &str| Call::VerifyOtp {
                email: "a@x".into(),
                otp: code.into(),
            };
            let r = auth.handle(verify(wrong)).await;
            assert_eq!((r.status, body(&r)["error"].as_str()), (401, Some("INVALID_OTP")));
            let r = auth.handle(verify(&otp)).await;
            assert_eq!((r.status, body(&r)["message"].as_str()), (200, Some("verified")));

            let r = auth.handle(creds("login", "a@x", "secret")).await;
            assert_eq!(r.status, 200, "{}", r.body);
            let b = body(&r);
            let access = b["access_token"].as_str().unwrap().to_string();
            let refresh = b["refresh_token"].as_str().unwrap().to_string();
            assert_ne!(access, refresh);

            let me = |t: &str| Call::Me {
                access_token: t.to_string(),
            };
            let r = auth.handle(me(&access)).await;
            assert_eq!((r.status, body(&r)["email"].as_str()), (200, Some("a@x")));
            let r = auth.handle(me(&refresh)).await;
            assert_eq!((r.status, body(&r)["error"].as_str()), (401, Some("INVALID_TOKEN")));

            let r = auth
                .handle(Call::Refresh {
                    refresh_token: access.clone(),
                })
                .await;
            assert_eq!((r.status, body(&r)["error"].as_str()), (401, Some("INVALID_TOKEN")));
            let r = auth
                .handle(Call::Refresh {
                    refresh_token: refresh.clone(),
                })
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
            let fresh = body(&r)["access_token"].as_str().unwrap().to_string();
            assert_ne!(fresh, access);
            let r = auth.handle(me(&fresh)).await;
            assert_eq!((r.status, body(&r)["email"].as_str()), (200, Some("a@x")));
        });
    }

    #[test]
    fn the_code_is_revealed_only_when_asked() {
        let auth = Service::new(&config(false, 10)).unwrap();
        let r = run(auth.handle(creds("register", "a@x", "secret")));
        assert_eq!(r.status, 200);
        assert!(body(&r).get("otp").is_none(), "{}", r.body);
    }

    #[test]
    fn passwords_are_stored_as_bcrypt_hashes_of_the_configured_cost() {
        let auth = Service::new(&config(false, 10)).unwrap();
        run(auth.handle(creds("register", "a@x", "secret")));
        let hash = auth.store().account("a@x").unwrap().hash;
        assert!(hash.starts_with("$2b$04$"), "{hash}");
        assert!(bcrypt::verify("secret", &hash).unwrap());
    }

    #[test]
    fn a_full_store_answers_503() {
        let auth = Service::new(&config(false, 1)).unwrap();
        run(async {
            assert_eq!(auth.handle(creds("register", "a@x", "p")).await.status, 200);
            let r = auth.handle(creds("register", "b@x", "p")).await;
            assert_eq!((r.status, body(&r)["error"].as_str()), (503, Some("STORE_FULL")));
            assert!(body(&r)["detail"].as_str().unwrap().contains("maximum of 1 users"));
        });
    }

    #[test]
    fn one_time_codes_are_six_digits_and_vary() {
        let codes: std::collections::HashSet<String> = (0..50).map(|_| random_otp().unwrap()).collect();
        assert!(
            codes
                .iter()
                .all(|c| c.len() == 6 && c.bytes().all(|b| b.is_ascii_digit()))
        );
        // 50 draws from a million codes: all alike would mean no randomness.
        assert!(codes.len() > 40, "{codes:?}");
    }
}
