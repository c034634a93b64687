//! `POST /hooks/git`: a forge says a branch was pushed, and the daemon
//! syncs at once instead of at its next poll.
//!
//! Each forge proves it knows the shared secret its own way:
//!
//! | forge | event header | proof |
//! |---|---|---|
//! | GitHub | `X-GitHub-Event` | `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body |
//! | Gitea | `X-Gitea-Event` | `X-Gitea-Signature: <hex>`, HMAC-SHA256 of the body |
//! | Forgejo | `X-Forgejo-Event` | `X-Forgejo-Signature: <hex>`, HMAC-SHA256 of the body |
//! | GitLab | `X-Gitlab-Event` | `X-Gitlab-Token: <secret>`, the secret itself |
//!
//! Gitea and Forgejo also send GitHub's headers for compatibility; the
//! most specific event header decides which forge a request is from, and
//! so which proof it must carry. The body is hashed as it arrives and
//! never kept, so its size costs no memory; its content is never read or
//! logged. Comparisons are constant-time.
//!
//! A verified push calls [`GitHooks::on_push`] and is answered `202` at
//! once; a verified `ping` (GitHub's and Gitea's set-up check) is `200`;
//! any other verified event is `202` and changes nothing. Anything not
//! verified is `401` and changes nothing.
//!
//! Must never: call `on_push` before the proof is checked, keep or log
//! the body or a header's value, or wait for a body longer than
//! [`crate::ServerLimits::body_timeout`].

use std::sync::Arc;
use std::time::Instant;

use hmac::{Hmac, Mac};
use proxops_core::secret::Secret;
use sha2::Sha256;

use crate::conn::{Headers, ReadWithTimeout};
use crate::{Reply, ServerEvent, ServerLimits, TEXT_CONTENT_TYPE};

/// The forges whose webhooks are understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forge {
    GitHub,
    GitLab,
    Gitea,
    Forgejo,
}

impl Forge {
    pub fn as_str(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
            Forge::Gitea => "gitea",
            Forge::Forgejo => "forgejo",
        }
    }

    /// The forge a request says it is from, by its most specific event
    /// header, and that event.
    fn of(headers: &Headers<'_>) -> Option<(Forge, String)> {
        [
            ("x-forgejo-event", Forge::Forgejo),
            ("x-gitea-event", Forge::Gitea),
            ("x-github-event", Forge::GitHub),
            ("x-gitlab-event", Forge::GitLab),
        ]
        .into_iter()
        .find_map(|(h, f)| headers.get(h).map(|e| (f, e.trim().to_owned())))
    }

    /// The header holding the proof.
    fn proof_header(self) -> &'static str {
        match self {
            Forge::GitHub => "x-hub-signature-256",
            Forge::GitLab => "x-gitlab-token",
            Forge::Gitea => "x-gitea-signature",
            Forge::Forgejo => "x-forgejo-signature",
        }
    }

    /// Whether `event` is a push of a branch.
    fn is_push(self, event: &str) -> bool {
        match self {
            Forge::GitLab => event == "Push Hook",
            _ => event == "push",
        }
    }
}

/// Called on a verified push, on the connection's thread: it must only
/// note the wish (a flag, a channel send) and return.
pub type OnPush = Arc<dyn Fn(Forge) + Send + Sync>;

/// What `POST /hooks/git` needs: the shared secret (from SOPS) and what to
/// do on a verified push.
#[derive(Clone)]
pub struct GitHooks {
    pub secret: Secret,
    pub on_push: OnPush,
}

impl std::fmt::Debug for GitHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHooks")
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

/// Answers one webhook whose head is `headers`; `early` is what of the
/// body came with the head, the rest is read from `body`.
pub(crate) fn receive(
    headers: &Headers<'_>,
    early: &[u8],
    body: &mut impl ReadWithTimeout,
    hooks: &GitHooks,
    limits: &ServerLimits,
    tell: &dyn Fn(&ServerEvent),
) -> Reply {
    let refuse = |forge: Option<Forge>, status: u16, reason: &str| {
        tell(&ServerEvent::HookRefused {
            forge,
            status,
            reason: reason.to_owned(),
        });
        Reply::new(status, TEXT_CONTENT_TYPE, format!("{reason}\n"))
    };
    let Some((forge, event)) = Forge::of(headers) else {
        return refuse(
            None,
            401,
            "not a known forge's webhook: no X-GitHub-Event, X-Gitlab-Event, X-Gitea-Event or X-Forgejo-Event header",
        );
    };
    let Some(proof) = headers.get(forge.proof_header()) else {
        return refuse(
            Some(forge),
            401,
            &format!(
                "unsigned: no {} header",
                canonical_header(forge.proof_header())
            ),
        );
    };
    let verified = match forge {
        Forge::GitLab => crate::access::same(proof.trim(), hooks.secret.expose()),
        Forge::GitHub | Forge::Gitea | Forge::Forgejo => {
            let hex = match forge {
                Forge::GitHub => proof.trim().strip_prefix("sha256="),
                _ => Some(proof.trim()),
            };
            let Some(signature) = hex.and_then(from_hex) else {
                return refuse(
                    Some(forge),
                    401,
                    "the signature is not a SHA-256 HMAC in hex",
                );
            };
            match body_hmac(headers, early, body, &hooks.secret, limits) {
                Ok(mac) => mac.verify_slice(&signature).is_ok(),
                Err((status, why)) => return refuse(Some(forge), status, why),
            }
        }
    };
    if !verified {
        return refuse(
            Some(forge),
            401,
            "the signature does not match the configured secret",
        );
    }
    let woke = forge.is_push(&event);
    if woke {
        (hooks.on_push)(forge);
    }
    tell(&ServerEvent::HookAccepted {
        forge,
        event: printable(&event),
        woke,
    });
    match (woke, event.as_str()) {
        (true, _) => Reply::new(202, TEXT_CONTENT_TYPE, "push received: syncing now\n"),
        (false, "ping") => Reply::new(200, TEXT_CONTENT_TYPE, "pong\n"),
        (false, _) => Reply::new(202, TEXT_CONTENT_TYPE, "not a push: nothing to do\n"),
    }
}

type HmacSha256 = Hmac<Sha256>;

/// The HMAC of the body (`Content-Length` bytes: `early`, then read from
/// `body` until the body deadline), or the status and reason to refuse.
fn body_hmac(
    headers: &Headers<'_>,
    early: &[u8],
    body: &mut impl ReadWithTimeout,
    secret: &Secret,
    limits: &ServerLimits,
) -> Result<HmacSha256, (u16, &'static str)> {
    if headers.get("transfer-encoding").is_some() {
        return Err((411, "a body without Content-Length cannot be checked"));
    }
    let length: u64 = headers
        .get("content-length")
        .and_then(|v| v.trim().parse().ok())
        .ok_or((411, "a body without Content-Length cannot be checked"))?;
    if length > limits.max_body_bytes {
        return Err((413, "the body is larger than a forge sends"));
    }
    let mut mac = HmacSha256::new_from_slice(secret.expose().as_bytes())
        .map_err(|_| (500, "the webhook secret is unusable"))?;
    let early = &early[..early
        .len()
        .min(usize::try_from(length).unwrap_or(usize::MAX))];
    mac.update(early);
    let mut left = length - early.len() as u64;
    let deadline = Instant::now() + limits.body_timeout;
    let mut chunk = [0u8; 16 * 1024];
    while left > 0 {
        let wait = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() || body.set_timeout(wait).is_err() {
            return Err((408, "the body did not arrive in time"));
        }
        let room = chunk
            .len()
            .min(usize::try_from(left).unwrap_or(chunk.len()));
        match body.read(&mut chunk[..room]) {
            Ok(0) => return Err((400, "the body ended before its Content-Length")),
            Ok(n) => {
                mac.update(&chunk[..n]);
                left -= n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err((408, "the body did not arrive in time")),
        }
    }
    Ok(mac)
}

/// Bytes from hex (either case); `None` unless exactly 32 of them.
fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// An event name fit for a log line: printable ASCII, at most 40 characters.
fn printable(event: &str) -> String {
    event
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(40)
        .collect()
}

/// `x-hub-signature-256` as forges write it.
fn canonical_header(lower: &str) -> &'static str {
    match lower {
        "x-hub-signature-256" => "X-Hub-Signature-256",
        "x-gitlab-token" => "X-Gitlab-Token",
        "x-gitea-signature" => "X-Gitea-Signature",
        _ => "X-Forgejo-Signature",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// RFC 4231, test case 2: the HMAC-SHA256 this module relies on.
    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let expected =
            from_hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843").unwrap();
        assert!(mac.verify_slice(&expected).is_ok());
    }

    #[test]
    fn hex_signatures_must_be_32_bytes() {
        assert!(from_hex(&"ab".repeat(32)).is_some());
        assert!(from_hex(&"AB".repeat(32)).is_some());
        assert!(from_hex(&"ab".repeat(31)).is_none());
        assert!(from_hex(&"zz".repeat(32)).is_none());
        assert!(from_hex(&"é".repeat(32)).is_none());
    }

    #[test]
    fn event_names_are_cut_to_what_a_log_line_can_hold() {
        assert_eq!(printable("push\r\n\x1b[8m"), "push[8m");
        assert_eq!(printable(&"x".repeat(100)).len(), 40);
    }
}
