//! Users and tokens, in memory and bounded (pure data: no I/O, no hashing).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A token: 128 random bits, written as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Token(pub(crate) u128);

impl Token {
    /// The token a client sent, if it is one this server could have issued.
    pub(crate) fn parse(text: &str) -> Option<Token> {
        // Exactly as issued: 32 lowercase hex digits, no sign.
        if text.len() != 32 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        u128::from_str_radix(text, 16).ok().map(Token)
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Why a registration is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Exists,
    Full,
}

/// What a login may go on to check: the stored hash and whether the user
/// has verified.
#[derive(Debug)]
pub(crate) struct Account {
    pub(crate) hash: String,
    pub(crate) verified: bool,
}

#[derive(Debug)]
struct User {
    hash: String,
    otp: String,
    verified: bool,
}

/// Every user and live token of one lab server.
#[derive(Debug)]
pub(crate) struct Store {
    users: HashMap<Arc<str>, User>,
    max_users: usize,
    access: Tokens,
    refresh: Tokens,
}

impl Store {
    /// At most `max_users` users, and as many live tokens of each kind.
    pub(crate) fn new(max_users: usize) -> Store {
        Store {
            users: HashMap::new(),
            max_users,
            access: Tokens::new(max_users),
            refresh: Tokens::new(max_users),
        }
    }

    /// Whether `email` could register now (checked before hashing, and
    /// again by [`Store::insert`] after).
    pub(crate) fn admits(&self, email: &str) -> Result<(), Refusal> {
        if self.users.contains_key(email) {
            Err(Refusal::Exists)
        } else if self.users.len() >= self.max_users {
            Err(Refusal::Full)
        } else {
            Ok(())
        }
    }

    /// Adds an unverified user.
    pub(crate) fn insert(&mut self, email: &str, hash: String, otp: String) -> Result<(), Refusal> {
        self.admits(email)?;
        let user = User {
            hash,
            otp,
            verified: false,
        };
        self.users.insert(Arc::from(email), user);
        Ok(())
    }

    pub(crate) fn account(&self, email: &str) -> Option<Account> {
        self.users.get(email).map(|u| Account {
            hash: u.hash.clone(),
            verified: u.verified,
        })
    }

    /// Marks the user verified if `otp` is theirs; true if it was.
    pub(crate) fn verify(&mut self, email: &str, otp: &str) -> bool {
        match self.users.get_mut(email) {
            Some(u) if u.otp == otp => {
                u.verified = true;
                true
            }
            _ => false,
        }
    }

    /// Records a session's tokens for `email`; false for an unknown user.
    pub(crate) fn issue(&mut self, email: &str, access: Token, refresh: Token) -> bool {
        let Some((email, _)) = self.users.get_key_value(email) else {
            return false;
        };
        let email = Arc::clone(email);
        self.access.insert(access, Arc::clone(&email));
        self.refresh.insert(refresh, email);
        true
    }

    /// Issues `access` for the session `refresh` belongs to; false if that
    /// refresh token is unknown (never issued, or forgotten).
    pub(crate) fn refresh(&mut self, refresh: Token, access: Token) -> bool {
        let Some(email) = self.refresh.get(refresh) else {
            return false;
        };
        let email = Arc::clone(email);
        self.access.insert(access, email);
        true
    }

    /// Whose access token this is.
    pub(crate) fn owner(&self, access: Token) -> Option<&str> {
        self.access.get(access).map(|e| &**e)
    }
}

/// Live tokens of one kind. Past `max`, the oldest is forgotten (as if it
/// had expired), so a long run of logins cannot grow memory without limit.
#[derive(Debug)]
struct Tokens {
    owners: HashMap<Token, Arc<str>>,
    order: VecDeque<Token>,
    max: usize,
}

impl Tokens {
    fn new(max: usize) -> Tokens {
        Tokens {
            owners: HashMap::new(),
            order: VecDeque::new(),
            max,
        }
    }

    fn insert(&mut self, token: Token, email: Arc<str>) {
        if self.max == 0 {
            return;
        }
        while self.owners.len() >= self.max {
            match self.order.pop_front() {
                Some(old) => {
                    self.owners.remove(&old);
                }
                None => break,
            }
        }
        if self.owners.insert(token, email).is_none() {
            self.order.push_back(token);
        }
    }

    fn get(&self, token: Token) -> Option<&Arc<str>> {
        self.owners.get(&token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_print_and_parse_as_32_hex_digits() {
        let t = Token(0xab);
        assert_eq!(t.to_string(), "000000000000000000000000000000ab");
        assert_eq!(Token::parse(&t.to_string()), Some(t));
        assert_eq!(Token::parse("ab"), None);
        assert_eq!(Token::parse("zz0000000000000000000000000000ab"), None);
        // from_str_radix accepts a sign and capitals; an issued token has neither.
        assert_eq!(Token::parse("+0000000000000000000000000000000"), None);
        assert_eq!(Token::parse("000000000000000000000000000000AB"), None);
    }

    #[test]
    fn users_register_once_and_verify_with_their_code() {
        let mut s = Store::new(10);
        assert_eq!(s.insert("a@x", "h".into(), "123456".into()), Ok(()));
        assert_eq!(s.insert("a@x", "h2".into(), "000000".into()), Err(Refusal::Exists));
        assert_eq!(s.admits("a@x"), Err(Refusal::Exists));
        assert!(!s.account("a@x").unwrap().verified);
        assert!(!s.verify("a@x", "654321"));
        assert!(!s.verify("b@x", "123456"));
        assert!(s.verify("a@x", "123456"));
        let a = s.account("a@x").unwrap();
        assert!(a.verified);
        assert_eq!(a.hash, "h");
    }

    #[test]
    fn the_store_holds_at_most_max_users() {
        let mut s = Store::new(2);
        s.insert("a@x", String::new(), String::new()).unwrap();
        s.insert("b@x", String::new(), String::new()).unwrap();
        assert_eq!(s.admits("c@x"), Err(Refusal::Full));
        assert_eq!(s.insert("c@x", String::new(), String::new()), Err(Refusal::Full));
        // An existing user is still told it exists, not that the store is full.
        assert_eq!(s.admits("a@x"), Err(Refusal::Exists));
    }

    #[test]
    fn tokens_name_their_user_and_the_oldest_are_forgotten() {
        let mut s = Store::new(2);
        s.insert("a@x", String::new(), String::new()).unwrap();
        s.insert("b@x", String::new(), String::new()).unwrap();
        assert!(!s.issue("nobody@x", Token(1), Token(2)));
        assert!(s.issue("a@x", Token(1), Token(2)));
        assert!(s.issue("b@x", Token(3), Token(4)));
        assert_eq!(s.owner(Token(1)), Some("a@x"));
        assert_eq!(s.owner(Token(3)), Some("b@x"));
        assert_eq!(s.owner(Token(2)), None, "a refresh token is not an access token");
        // A refresh issues a third access token: the oldest (a's) goes.
        assert!(s.refresh(Token(2), Token(5)));
        assert_eq!(s.owner(Token(5)), Some("a@x"));
        assert_eq!(s.owner(Token(1)), None);
        assert_eq!(s.owner(Token(3)), Some("b@x"));
        assert!(!s.refresh(Token(99), Token(6)));
        assert_eq!(s.owner(Token(6)), None);
    }
}
