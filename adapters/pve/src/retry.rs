//! What to do with one PVE answer: accept it, retry it, give up, or read it
//! as "not found"; and how long to wait before a retry.
//!
//! Owns the one policy function (`classify`) and the backoff schedule
//! (`RetryPolicy`). The live transport loops around them; nothing else
//! decides about retries.
//!
//! **Architecture Invariant:** `classify` is pure: it looks only at the
//! status, the reason phrase and the body. It never sleeps and reads no clock.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proxops_core::step::{self, PveError};

use crate::transport::{Response, TransportError};

/// The class of one attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 2xx: done.
    Success,
    /// Worth another attempt: no answer, 429, a 5xx that is not "not found",
    /// or a PVE lock timeout.
    Retry,
    /// A definite answer that another attempt would not change (4xx, 501,
    /// refused TLS, open breaker, failed login).
    Fail,
    /// The addressed object does not exist: 404, or PVE's 5xx wording for it
    /// ("does not exist", "no such …"). Never retried.
    NotFound,
}

/// Classifies one attempt (§18.3, §22.8): a thin mapping over core's one
/// reading of PVE's answers ([`step::classify`]). No answer, 429, a
/// config lock held by another task ("can't lock file … got timeout"), a
/// busy or partly unreachable cluster and other 5xx are worth another
/// attempt; a guest lock (a backup can run for hours), a digest mismatch,
/// a guest that is not running and 501 are definite answers that an
/// immediate retry would not change (the next cycle re-plans).
pub fn classify(outcome: Result<&Response, &TransportError>) -> Class {
    let response = match outcome {
        Ok(response) => response,
        Err(TransportError::Io { .. }) => return Class::Retry,
        Err(_) => return Class::Fail,
    };
    if response.is_success() {
        return Class::Success;
    }
    match step::classify(response.status, &pve_message(response)) {
        PveError::NotFound { .. } => Class::NotFound,
        PveError::ConfigLockTimeout { .. } | PveError::Busy { .. } | PveError::NoAnswer { .. } => {
            Class::Retry
        }
        PveError::Locked { .. }
        | PveError::ChangedUnderUs { .. }
        | PveError::NotRunning { .. }
        | PveError::NotSent { .. }
        // A create refused because its id or volume is taken: asking again
        // at once gets the same answer; the next cycle re-reads.
        | PveError::AlreadyExists { .. } => Class::Fail,
        PveError::Refused { status, .. } => match status {
            429 => Class::Retry,
            // "Method … not implemented": asking again cannot help.
            501 => Class::Fail,
            500..=599 => Class::Retry,
            _ => Class::Fail,
        },
        _ => Class::Fail,
    }
}

/// PVE's error text for a response: the reason phrase (where PVE puts it),
/// then the body's `message` (fakepve, extjs) and `errors` when they say more.
pub fn pve_message(response: &Response) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut push = |text: &str| {
        let text = text.trim();
        if !text.is_empty() && !parts.iter().any(|p| p == text) {
            parts.push(text.to_owned());
        }
    };
    push(&response.reason);
    match &response.body {
        serde_json::Value::String(text) => push(text),
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(message)) = map.get("message") {
                push(message);
            }
            match map.get("errors") {
                Some(serde_json::Value::String(errors)) => push(errors),
                Some(serde_json::Value::Object(fields)) => {
                    for (field, text) in fields {
                        let text = text
                            .as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| text.to_string());
                        push(&format!("{field}: {}", text.trim()));
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
    parts.join("; ")
}

/// The docs section that lists the PVE privileges ProxOps uses.
pub const PRIVILEGES_DOC: &str = "docs/getting-started.md, section \"A least-privilege API token\"";

/// What a person can do about a refused request, for the two refusals
/// about who is asking: 401 (the credentials) and 403 (a missing
/// privilege, as PVE names it: `Permission check failed (/vms/100,
/// VM.Config.Memory)`). `acting_as` names the credentials, never a secret.
pub fn refusal_hint(status: u16, message: &str, acting_as: Option<&str>) -> Option<String> {
    let who = acting_as.unwrap_or("the configured credentials");
    match status {
        401 if who.contains("token") => Some(format!(
            "PVE did not accept {who}: the token secret may be wrong or revoked, the realm \
             in user@realm may be wrong (pam and pve are different users), or the token id may \
             not exist (pveum user token list USER); a token with privilege separation also \
             needs its own permissions"
        )),
        401 => Some(format!(
            "PVE did not accept {who}: the password or the realm in user@realm may be wrong"
        )),
        403 => Some(match step::missing_privilege(message) {
            Some((path, privilege)) if who.contains("token") => format!(
                "{who} lacks the privilege {privilege} on {path}: grant it to the role of the \
                 token (with privilege separation, to the token itself, not only its user); \
                 see {PRIVILEGES_DOC}"
            ),
            Some((path, privilege)) => format!(
                "{who} lacks the privilege {privilege} on {path}: grant it to the user's role; \
                 see {PRIVILEGES_DOC}"
            ),
            None => format!("{who} lacks a privilege for this request; see {PRIVILEGES_DOC}"),
        }),
        _ => None,
    }
}

/// PVE's text for a refused request followed by [`refusal_hint`], if any.
pub fn explained_message(response: &Response, acting_as: Option<&str>) -> String {
    let message = pve_message(response);
    match refusal_hint(response.status, &message, acting_as) {
        Some(hint) => format!("{message}. {hint}"),
        None => message,
    }
}

/// The backoff schedule: `base`, ×2 per retry, at most `cap`, times a jitter
/// in [0.8, 1.2); at most `max_retries` retries after the first attempt.
///
/// Defaults (§22.8): 1 s, 2 s, 4 s, cap 30 s, 3 retries, so a call that keeps
/// failing gives up after about 7 s of waiting, well inside a 30 s poll
/// interval. Tests use a 1 ms base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
    pub max_retries: u32,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(30),
            max_retries: 3,
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0 = the first retry); `jitter` is
    /// clamped to [0.8, 1.2].
    pub fn delay(&self, retry: u32, jitter: f64) -> Duration {
        let doubled = self.base.saturating_mul(2u32.saturating_pow(retry.min(31)));
        doubled.min(self.cap).mul_f64(jitter.clamp(0.8, 1.2))
    }
}

/// Uniform jitter factors in [0.8, 1.2), from a per-process random key.
/// (A shared cluster outage must not make every client retry in step.)
#[derive(Debug)]
pub(crate) struct Jitter {
    key: RandomState,
    counter: AtomicU64,
}

impl Jitter {
    pub(crate) fn new() -> Jitter {
        Jitter {
            key: RandomState::new(),
            counter: AtomicU64::new(0),
        }
    }

    pub(crate) fn next(&self) -> f64 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let bits = self.key.hash_one(n) >> 11; // 53 random bits
        0.8 + 0.4 * (bits as f64 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::transport::Method;
    use serde_json::json;

    fn answer(status: u16, reason: &str, body: serde_json::Value) -> Response {
        Response {
            status,
            reason: reason.into(),
            body,
        }
    }

    fn class(status: u16, reason: &str) -> Class {
        classify(Ok(&answer(status, reason, json!({"data": null}))))
    }

    #[test]
    fn success_is_2xx() {
        assert_eq!(class(200, "OK"), Class::Success);
        assert_eq!(class(204, ""), Class::Success);
    }

    #[test]
    fn no_answer_is_retried_but_refusals_are_not() {
        let io = TransportError::Io {
            method: Method::Get,
            path: "/version".into(),
            message: "reset".into(),
        };
        assert_eq!(classify(Err(&io)), Class::Retry);
        let read_only = TransportError::ReadOnly {
            method: Method::Post,
            path: "/x".into(),
        };
        assert_eq!(classify(Err(&read_only)), Class::Fail);
        let tls = TransportError::Tls {
            method: Method::Get,
            path: "/x".into(),
            message: "bad cert".into(),
        };
        assert_eq!(classify(Err(&tls)), Class::Fail);
        assert_eq!(
            classify(Err(&TransportError::Auth("refused".into()))),
            Class::Fail
        );
    }

    #[test]
    fn server_errors_and_429_are_retried() {
        assert_eq!(class(500, "Internal Server Error"), Class::Retry);
        assert_eq!(class(502, "Bad Gateway"), Class::Retry);
        assert_eq!(class(595, "No route to host"), Class::Retry);
        // 596, like 595, is PVE's own status for a connection between
        // nodes that failed (pve-http-server `AnyEvent.pm`): transient.
        assert_eq!(class(596, "Connection timed out"), Class::Retry);
        assert_eq!(class(429, "Too Many Requests"), Class::Retry);
    }

    #[test]
    fn writes_refused_for_the_guests_state_are_not_retried_at_once() {
        // qemu-server `QemuConfig.pm` / pve-guest-common
        // `AbstractConfig.pm` `check_lock` ("VM is locked (…)"),
        // pve-common `Tools.pm` `assert_if_modified` (digest), `create_disks`
        // / `alloc_image` ("already exists").
        for reason in [
            "VM 100 is locked (backup)",
            "CT 101 is locked (snapshot)",
            "detected modified configuration - file changed by other user? Try again.",
            "checksum mismatch",
            "unable to create VM 100: config file already exists",
        ] {
            assert_eq!(class(500, reason), Class::Fail, "{reason}");
        }
    }

    #[test]
    fn client_errors_and_not_implemented_fail_at_once() {
        assert_eq!(class(400, "Parameter verification failed."), Class::Fail);
        assert_eq!(class(401, "authentication failure"), Class::Fail);
        assert_eq!(class(403, "Permission check failed"), Class::Fail);
        assert_eq!(
            class(
                501,
                "Method 'POST /nodes/pve1/qemu/1/untemplate' not implemented"
            ),
            Class::Fail
        );
    }

    #[test]
    fn missing_objects_are_not_found_not_retried() {
        assert_eq!(
            class(
                500,
                "Configuration file 'nodes/pve1/qemu-server/555.conf' does not exist"
            ),
            Class::NotFound
        );
        assert_eq!(class(500, "no such VM ('555')"), Class::NotFound);
        assert_eq!(class(500, "No such task"), Class::NotFound);
        assert_eq!(
            classify(Ok(&answer(404, "Not Found", json!("404: Not Found")))),
            Class::NotFound
        );
        // The text may be only in the body (fakepve's `message`).
        let body = json!({"data": null, "message": "storage 'nosuch' does not exist\n"});
        assert_eq!(
            classify(Ok(&answer(500, "Internal Server Error", body))),
            Class::NotFound
        );
    }

    #[test]
    fn a_400_mentioning_a_missing_thing_is_a_parameter_error_not_absence() {
        let body = json!({"data": null, "errors": {"storage": "storage 'x' does not exist"}});
        assert_eq!(
            classify(Ok(&answer(400, "Parameter verification failed.", body))),
            Class::Fail
        );
    }

    #[test]
    fn lock_timeouts_are_retried() {
        let reason = "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout";
        assert_eq!(class(500, reason), Class::Retry);
    }

    #[test]
    fn message_joins_reason_message_and_field_errors() {
        let body = json!({"data": null, "message": "boom\n", "errors": {"memory": "type check ('integer') failed\n"}});
        let text = pve_message(&answer(400, "boom", body));
        assert_eq!(text, "boom; memory: type check ('integer') failed");
    }

    #[test]
    fn a_403_names_the_path_and_privilege_pve_names() {
        let hint = refusal_hint(
            403,
            "Permission check failed (/vms/100, VM.Config.Memory)",
            Some("API token proxops@pve!reconcile"),
        )
        .unwrap();
        assert!(
            hint.starts_with(
                "API token proxops@pve!reconcile lacks the privilege VM.Config.Memory on /vms/100"
            ),
            "{hint}"
        );
        assert!(hint.contains(PRIVILEGES_DOC), "{hint}");
        let vague = refusal_hint(403, "Forbidden", None).unwrap();
        assert!(vague.contains("lacks a privilege"), "{vague}");
    }

    #[test]
    fn a_401_names_the_token_and_what_may_be_wrong() {
        let hint = refusal_hint(401, "authentication failure", Some("API token a@pve!x")).unwrap();
        for needle in [
            "API token a@pve!x",
            "secret",
            "realm",
            "privilege separation",
        ] {
            assert!(hint.contains(needle), "{needle}: {hint}");
        }
        assert_eq!(refusal_hint(500, "boom", Some("API token a@pve!x")), None);
    }

    #[test]
    fn backoff_doubles_from_one_second_to_the_cap() {
        let policy = RetryPolicy::default();
        let delays: Vec<_> = (0..7).map(|n| policy.delay(n, 1.0).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(policy.delay(40, 1.0), Duration::from_secs(30));
    }

    #[test]
    fn jitter_scales_the_delay_within_twenty_percent() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, 0.8), Duration::from_millis(1600));
        assert_eq!(policy.delay(1, 5.0), Duration::from_millis(2400));
        let jitter = Jitter::new();
        for _ in 0..1000 {
            let j = jitter.next();
            assert!((0.8..1.2).contains(&j), "{j}");
        }
    }
}
