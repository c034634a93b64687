//! PVE credentials and the login ticket they turn into.
//!
//! Owns the two ways ProxOps authenticates (an API token, or a user and
//! password exchanged for a ticket) and the rule for when a ticket is renewed.
//! Credentials are parsed here, at the edge, so the transport never sends a
//! malformed header.
//!
//! **Architecture Invariant:** a secret (token secret, password, ticket, CSRF
//! token) never appears in `Debug` output, an error message or a log line:
//! it lives in `Secret`, whose `Debug` and `Display` print `<redacted>`.

use std::fmt;
use std::time::{Duration, Instant};

use proxops_core::config::AuthMethod;

/// A value that must never be shown (core's type: `Debug` and `Display`
/// print `<redacted>`).
pub use proxops_core::secret::Secret;

/// Credentials that cannot be used. The text names the field, never its value
/// when that value is secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("the PVE user is empty")]
    MissingUser,
    /// The user is not echoed: it may have come from a SOPS file, and a
    /// mistaken reference there makes it a secret.
    #[error("the PVE user has no realm (expected user@realm, e.g. root@pam)")]
    NoRealm,
    #[error("the API token id is empty")]
    MissingTokenId,
    #[error("the API token secret is empty")]
    MissingTokenSecret,
    #[error("the password is empty")]
    MissingPassword,
    #[error("the {0} contains a character PVE does not allow there")]
    InvalidCharacter(&'static str),
    #[error("the composed token value is not of the form user@realm!tokenid=secret")]
    MalformedTokenValue,
}

/// A PVE API token: `<user>!<token id>=<secret>`. Its Debug shows the
/// secret as `Secret` does: redacted.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ApiToken {
    user: String,
    token_id: String,
    secret: Secret,
    /// How messages name the user, when not by its value (from SOPS).
    shown: Option<String>,
}

impl ApiToken {
    /// From the three config fields `pve.user`, `pve.token-id`, `pve.token`.
    pub fn new(user: &str, token_id: &str, secret: Secret) -> Result<ApiToken, CredentialError> {
        let user = user.trim();
        let token_id = token_id.trim();
        if user.is_empty() {
            return Err(CredentialError::MissingUser);
        }
        if !plain(user, &['!', '=']) {
            return Err(CredentialError::InvalidCharacter("PVE user"));
        }
        if !user.contains('@') {
            return Err(CredentialError::NoRealm);
        }
        if token_id.is_empty() {
            return Err(CredentialError::MissingTokenId);
        }
        if !plain(token_id, &['!', '=', '@']) {
            return Err(CredentialError::InvalidCharacter("API token id"));
        }
        if secret.is_empty() {
            return Err(CredentialError::MissingTokenSecret);
        }
        if !plain(secret.expose(), &[]) {
            return Err(CredentialError::InvalidCharacter("API token secret"));
        }
        Ok(ApiToken {
            user: user.to_owned(),
            token_id: token_id.to_owned(),
            secret,
            shown: None,
        })
    }

    /// From a composed `pve.token-value` / `PROXOPS_PVE_TOKEN_VALUE`:
    /// `user@realm!tokenid=secret`.
    pub fn from_token_value(value: &Secret) -> Result<ApiToken, CredentialError> {
        let text = value.expose().trim();
        let (id, secret) = text
            .split_once('=')
            .ok_or(CredentialError::MalformedTokenValue)?;
        let (user, token_id) = id
            .split_once('!')
            .ok_or(CredentialError::MalformedTokenValue)?;
        ApiToken::new(user, token_id, Secret::new(secret)).map_err(|e| match e {
            CredentialError::MissingUser | CredentialError::MissingTokenId => {
                CredentialError::MalformedTokenValue
            }
            other => other,
        })
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn token_id(&self) -> &str {
        &self.token_id
    }

    /// The `Authorization` header value. Secret: never log it.
    pub(crate) fn authorization(&self) -> Secret {
        Secret::new(format!(
            "PVEAPIToken={}!{}={}",
            self.user,
            self.token_id,
            self.secret.expose()
        ))
    }
}

/// A user and password, exchanged for a ticket at `POST /access/ticket`.
#[derive(Clone, PartialEq, Eq)]
pub struct TicketLogin {
    user: String,
    password: Secret,
    /// How messages name the user, when not by its value.
    shown: Option<String>,
}

impl TicketLogin {
    /// The user must name its realm (`user@realm`): `/access/ticket` does
    /// not assume `@pam` for a bare user name (pve-access-control
    /// `API2/AccessControl.pm` `create_ticket` needs a realm in the name or
    /// a `realm` parameter), so a bare name is refused here, clearly.
    pub fn new(user: &str, password: Secret) -> Result<TicketLogin, CredentialError> {
        let user = user.trim();
        if user.is_empty() {
            return Err(CredentialError::MissingUser);
        }
        if !user.contains('@') {
            return Err(CredentialError::NoRealm);
        }
        if !plain(user, &[]) {
            return Err(CredentialError::InvalidCharacter("PVE user"));
        }
        if password.is_empty() {
            return Err(CredentialError::MissingPassword);
        }
        Ok(TicketLogin {
            user: user.to_owned(),
            password,
            shown: None,
        })
    }

    /// Names the user as `label` in every message (e.g. "the value of SOPS
    /// key … in …") instead of by its value.
    pub fn shown_as(mut self, label: impl Into<String>) -> TicketLogin {
        self.shown = Some(label.into());
        self
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    /// The user as messages name it: its label, else its value.
    pub fn shown(&self) -> &str {
        self.shown.as_deref().unwrap_or(&self.user)
    }

    /// The login form (`username`, `password`). Secret: never log it.
    pub(crate) fn form(&self) -> Vec<(String, String)> {
        vec![
            ("username".to_owned(), self.user.clone()),
            ("password".to_owned(), self.password.expose().to_owned()),
        ]
    }
}

impl fmt::Debug for TicketLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketLogin")
            .field("user", &self.shown())
            .field("password", &self.password)
            .finish()
    }
}

/// How the transport authenticates (`pve.auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Token(ApiToken),
    Ticket(TicketLogin),
}

impl Credentials {
    /// From the resolved settings (`pve.auth`, `pve.user`, `pve.token-id`,
    /// `pve.token`, `pve.token-value`, `pve.password`, after environment and
    /// SOPS). Under token auth a non-empty composed token value wins over the
    /// three fields; blank values count as absent.
    pub fn from_settings(
        auth: AuthMethod,
        user: Option<&str>,
        token_id: Option<&str>,
        token: Option<&Secret>,
        token_value: Option<&Secret>,
        password: Option<&Secret>,
    ) -> Result<Credentials, CredentialError> {
        let present = |s: Option<&Secret>| s.filter(|s| !s.is_empty()).cloned();
        let user = user.unwrap_or_default();
        match auth {
            AuthMethod::Token => match present(token_value) {
                Some(composed) => ApiToken::from_token_value(&composed).map(Credentials::Token),
                None => ApiToken::new(
                    user,
                    token_id.unwrap_or_default(),
                    present(token).unwrap_or_default(),
                )
                .map(Credentials::Token),
            },
            AuthMethod::Ticket => TicketLogin::new(user, present(password).unwrap_or_default())
                .map(Credentials::Ticket),
        }
    }

    /// Names the user as `label` in messages instead of by its value (see
    /// [`TicketLogin::shown_as`]), for a user that came from SOPS.
    pub fn with_user_shown_as(self, label: impl Into<String>) -> Credentials {
        match self {
            Credentials::Ticket(login) => Credentials::Ticket(login.shown_as(label)),
            Credentials::Token(token) => Credentials::Token(ApiToken {
                shown: Some(label.into()),
                ..token
            }),
        }
    }

    /// How messages name these credentials: `API token user@realm!id`, or
    /// `user …` for a ticket login; its label instead of a value from SOPS.
    pub fn acting_as(&self) -> String {
        match self {
            Credentials::Token(token) => match &token.shown {
                Some(label) => format!("the API token whose user is {label}"),
                None => format!("API token {}!{}", token.user, token.token_id),
            },
            Credentials::Ticket(login) => format!("user {}", login.shown()),
        }
    }

    /// The PVE user these credentials act as.
    pub fn user(&self) -> &str {
        match self {
            Credentials::Token(token) => token.user(),
            Credentials::Ticket(login) => login.user(),
        }
    }
}

/// PVE tickets live two hours; renewing at 1 h 45 min leaves a margin for
/// clock skew and for a long cycle that started just before expiry.
pub const TICKET_RENEW_AFTER: Duration = Duration::from_secs(105 * 60);

/// A ticket and its CSRF token, from a successful login.
#[derive(Debug, Clone)]
pub(crate) struct TicketSession {
    pub(crate) ticket: Secret,
    pub(crate) csrf: Secret,
    obtained: Instant,
}

impl TicketSession {
    /// Reads `data.ticket` and `data.CSRFPreventionToken` of a login answer.
    pub(crate) fn from_login(body: &serde_json::Value, now: Instant) -> Option<TicketSession> {
        let data = body.get("data")?;
        let ticket = data.get("ticket")?.as_str()?;
        let csrf = data.get("CSRFPreventionToken")?.as_str()?;
        if !plain(ticket, &[';']) || !plain(csrf, &[]) {
            return None;
        }
        Some(TicketSession {
            ticket: Secret::new(ticket),
            csrf: Secret::new(csrf),
            obtained: now,
        })
    }

    /// True once the ticket is old enough to renew before using it again.
    pub(crate) fn due_for_renewal(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.obtained) >= TICKET_RENEW_AFTER
    }
}

/// Visible ASCII only (what an HTTP header value may carry without escaping),
/// minus `forbidden`.
fn plain(text: &str, forbidden: &[char]) -> bool {
    text.chars()
        .all(|c| c.is_ascii_graphic() && !forbidden.contains(&c))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SECRET: &str = "0b7a3c52-6f1e-4d2a-9c8b-3e5f7a9d1c24";

    #[test]
    fn token_header_is_pve_api_token_user_bang_id_equals_secret() {
        let token = ApiToken::new("root@pam", "proxops", Secret::new(SECRET)).unwrap();
        assert_eq!(
            token.authorization().expose(),
            format!("PVEAPIToken=root@pam!proxops={SECRET}")
        );
    }

    #[test]
    fn composed_token_value_parses_into_the_same_token() {
        let composed =
            ApiToken::from_token_value(&Secret::new(format!("root@pam!proxops={SECRET}"))).unwrap();
        assert_eq!(
            composed,
            ApiToken::new("root@pam", "proxops", Secret::new(SECRET)).unwrap()
        );
        for bad in [
            "root@pam=x",
            "root@pam!=x",
            "!id=x",
            "root@pam!id",
            "root@pam!id=",
        ] {
            assert!(
                ApiToken::from_token_value(&Secret::new(bad)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn token_user_without_realm_is_refused_with_a_hint() {
        let err = ApiToken::new("root", "proxops", Secret::new(SECRET)).unwrap_err();
        assert_eq!(err, CredentialError::NoRealm);
        assert!(err.to_string().contains("root@pam"));
        assert!(!err.to_string().contains("\"root\""), "{err}");
    }

    #[test]
    fn ticket_user_without_realm_is_refused_naming_user_at_realm() {
        // pve-access-control src/PVE/API2/AccessControl.pm `create_ticket`
        // (via `PVE::AccessControl::verify_username`): a bare name has no
        // realm, and PVE does not assume @pam.
        let err = TicketLogin::new("root", Secret::new("hunter2-password")).unwrap_err();
        assert_eq!(err, CredentialError::NoRealm);
        assert!(err.to_string().contains("user@realm"), "{err}");
        assert!(TicketLogin::new("root@pam", Secret::new("pw")).is_ok());
    }

    #[test]
    fn secrets_never_show_in_debug_or_errors() {
        let token = ApiToken::new("root@pam", "proxops", Secret::new(SECRET)).unwrap();
        let login = TicketLogin::new("root@pam", Secret::new("hunter2-password")).unwrap();
        let shown = format!(
            "{token:?} {login:?} {:?} {:?}",
            Credentials::Token(token.clone()),
            token.authorization()
        );
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"));
        let err =
            ApiToken::new("root@pam", "proxops", Secret::new(format!("{SECRET}\n"))).unwrap_err();
        assert!(!err.to_string().contains(SECRET));
        let err =
            ApiToken::from_token_value(&Secret::new(format!("root@pam{SECRET}"))).unwrap_err();
        assert!(!err.to_string().contains(SECRET));
    }

    #[test]
    fn settings_prefer_the_composed_token_value_and_pick_the_auth_method() {
        let composed = Secret::new(format!("svc@pve!ci={SECRET}"));
        let token = Secret::new("other");
        let from_value = Credentials::from_settings(
            AuthMethod::Token,
            Some("root@pam"),
            Some("proxops"),
            Some(&token),
            Some(&composed),
            None,
        )
        .unwrap();
        assert_eq!(from_value.user(), "svc@pve");
        let blank = Secret::new("  ");
        let from_fields = Credentials::from_settings(
            AuthMethod::Token,
            Some("root@pam"),
            Some("proxops"),
            Some(&token),
            Some(&blank),
            None,
        )
        .unwrap();
        assert_eq!(
            from_fields,
            Credentials::Token(ApiToken::new("root@pam", "proxops", token.clone()).unwrap())
        );
        let password = Secret::new("pw");
        let ticket = Credentials::from_settings(
            AuthMethod::Ticket,
            Some("root@pam"),
            None,
            None,
            None,
            Some(&password),
        )
        .unwrap();
        assert!(matches!(ticket, Credentials::Ticket(_)));
        assert_eq!(
            Credentials::from_settings(
                AuthMethod::Ticket,
                Some("root@pam"),
                None,
                None,
                None,
                None
            )
            .unwrap_err(),
            CredentialError::MissingPassword
        );
        assert_eq!(
            Credentials::from_settings(
                AuthMethod::Token,
                None,
                Some("x"),
                Some(&token),
                None,
                None
            )
            .unwrap_err(),
            CredentialError::MissingUser
        );
    }

    #[test]
    fn empty_fields_are_named() {
        assert_eq!(
            ApiToken::new("", "x", Secret::new("s")).unwrap_err(),
            CredentialError::MissingUser
        );
        assert_eq!(
            ApiToken::new("a@pam", "", Secret::new("s")).unwrap_err(),
            CredentialError::MissingTokenId
        );
        assert_eq!(
            ApiToken::new("a@pam", "x", Secret::new("")).unwrap_err(),
            CredentialError::MissingTokenSecret
        );
        assert_eq!(
            TicketLogin::new("a@pam", Secret::new("")).unwrap_err(),
            CredentialError::MissingPassword
        );
    }

    #[test]
    fn ticket_is_renewed_after_an_hour_and_three_quarters() {
        let start = Instant::now();
        let body = serde_json::json!({"data": {"ticket": "PVE:root@pam:1::x", "CSRFPreventionToken": "1:y"}});
        let session = TicketSession::from_login(&body, start).unwrap();
        assert!(!session.due_for_renewal(start + Duration::from_secs(104 * 60)));
        assert!(session.due_for_renewal(start + TICKET_RENEW_AFTER));
        assert!(TicketSession::from_login(&serde_json::json!({"data": null}), start).is_none());
    }
}
