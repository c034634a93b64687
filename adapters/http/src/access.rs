//! The access credential: a bearer token or a basic-auth user and
//! password every request but `/healthz` and `/hooks/git` must carry.
//!
//! Compared in constant time (SHA-256 of both sides, then every byte of
//! the digests), so neither the value nor its length leaks through how
//! long a refusal takes. Must never: log, echo or keep a credential a
//! client sent.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proxops_core::secret::Secret;
use sha2::{Digest, Sha256};

/// What a client must send in `Authorization`.
#[derive(Clone, Debug)]
pub enum Access {
    /// `Authorization: Bearer <token>` (Prometheus' `authorization`
    /// setting, `curl -H`).
    Bearer(Secret),
    /// `Authorization: Basic …` (a browser's login prompt, Prometheus'
    /// `basic_auth`).
    Basic { user: Secret, password: Secret },
}

impl Access {
    /// Whether an `Authorization` header value (if any) carries the
    /// credential.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, given)) = authorization.map(str::trim).and_then(|v| v.split_once(' '))
        else {
            return false;
        };
        let given = given.trim();
        match self {
            Access::Bearer(token) => {
                scheme.eq_ignore_ascii_case("bearer") && same(given, token.expose())
            }
            Access::Basic { user, password } => {
                let expected = Secret::new(STANDARD.encode(format!(
                    "{}:{}",
                    user.expose(),
                    password.expose()
                )));
                scheme.eq_ignore_ascii_case("basic") && same(given, expected.expose())
            }
        }
    }

    /// The `WWW-Authenticate` value of a `401`.
    pub fn challenge(&self) -> &'static str {
        match self {
            Access::Bearer(_) => "Bearer realm=\"proxops\"",
            Access::Basic { .. } => "Basic realm=\"proxops\", charset=\"UTF-8\"",
        }
    }
}

/// `a == b` in time that depends on neither.
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_must_match_exactly() {
        let a = Access::Bearer(Secret::new("s3cr3t"));
        assert!(a.allows(Some("Bearer s3cr3t")));
        assert!(a.allows(Some("bearer  s3cr3t ")));
        for refused in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer s3cr3"),
            Some("Bearer s3cr3tt"),
            Some("Basic s3cr3t"),
            Some("s3cr3t"),
        ] {
            assert!(!a.allows(refused), "{refused:?}");
        }
    }

    #[test]
    fn basic_auth_takes_the_user_and_password_as_a_browser_sends_them() {
        let a = Access::Basic {
            user: Secret::new("ops"),
            password: Secret::new("pa:ss"),
        };
        // base64("ops:pa:ss")
        assert!(a.allows(Some("Basic b3BzOnBhOnNz")));
        assert!(!a.allows(Some("Basic b3BzOnBhOnN0")));
        assert!(!a.allows(Some("Bearer b3BzOnBhOnNz")));
        assert_eq!(a.challenge(), "Basic realm=\"proxops\", charset=\"UTF-8\"");
    }
}
