//! `POST /hooks/git` over a real loopback socket: for each forge a rightly
//! signed push wakes the daemon and a wrongly signed or unsigned one does
//! not; set-up pings and other events change nothing; bodies that cannot
//! be checked are refused; the observer hears what happened without the
//! body or a signature in it.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, Mac};
use proxops_core::secret::Secret;
use proxops_http::{
    Forge, GitHooks, Reply, Request, ServerEvent, ServerLimits, ServerOptions, StatusServer,
};

const SECRET: &str = "It's a Secret to Everybody";
/// What a forge sends, more or less: the body is never read, only hashed.
const BODY: &str = r#"{"ref":"refs/heads/main","after":"0123456789abcdef","pusher":{"name":"ops"},"token-like":"ghp_notreallyatoken"}"#;

fn hex_hmac(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

struct Rig {
    server: StatusServer,
    pushes: Arc<AtomicUsize>,
    events: Arc<Mutex<Vec<ServerEvent>>>,
}

impl Rig {
    fn new(limits: ServerLimits) -> Rig {
        Rig::guarded(limits, None)
    }

    /// A rig whose listener also asks for `access`.
    fn guarded(limits: ServerLimits, access: Option<proxops_http::Access>) -> Rig {
        let pushes = Arc::new(AtomicUsize::new(0));
        let events = Arc::new(Mutex::new(Vec::new()));
        let (p, e) = (Arc::clone(&pushes), Arc::clone(&events));
        let options = ServerOptions {
            limits,
            access,
            observer: Some(Arc::new(move |ev: &ServerEvent| {
                e.lock().unwrap().push(ev.clone());
            })),
            hooks: Some(GitHooks {
                secret: Secret::new(SECRET),
                on_push: Arc::new(move |_| {
                    p.fetch_add(1, Ordering::SeqCst);
                }),
            }),
        };
        let source: proxops_http::Source =
            Arc::new(|_: &Request<'_>, _| Reply::new(200, "text/plain", "ok\n"));
        Rig {
            server: StatusServer::start_with("127.0.0.1:0", source, options).unwrap(),
            pushes,
            events,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    fn pushes(&self) -> usize {
        self.pushes.load(Ordering::SeqCst)
    }
}

/// POSTs `body` to `/hooks/git` with `headers` (and its Content-Length);
/// (status, body).
fn post(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!(
        "POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw.split(' ').nth(1).unwrap().parse().unwrap();
    (status, raw.split_once("\r\n\r\n").unwrap().1.to_owned())
}

/// The headers each forge signs a push with, for `secret` over `body`.
fn signed(forge: Forge, secret: &str, body: &[u8]) -> Vec<(&'static str, String)> {
    let mac = hex_hmac(secret, body);
    match forge {
        Forge::GitHub => vec![
            ("X-GitHub-Event", "push".into()),
            ("X-Hub-Signature-256", format!("sha256={mac}")),
        ],
        Forge::GitLab => vec![
            ("X-Gitlab-Event", "Push Hook".into()),
            ("X-Gitlab-Token", secret.into()),
        ],
        // Gitea and Forgejo send GitHub's headers too, for compatibility.
        Forge::Gitea => vec![
            ("X-GitHub-Event", "push".into()),
            ("X-Gitea-Event", "push".into()),
            ("X-Gitea-Signature", mac.clone()),
            ("X-Hub-Signature-256", format!("sha256={mac}")),
        ],
        Forge::Forgejo => vec![
            ("X-Gitea-Event", "push".into()),
            ("X-Forgejo-Event", "push".into()),
            ("X-Forgejo-Signature", mac.clone()),
            ("X-Gitea-Signature", mac),
        ],
    }
}

const FORGES: [Forge; 4] = [Forge::GitHub, Forge::GitLab, Forge::Gitea, Forge::Forgejo];

#[test]
fn a_rightly_signed_push_from_each_forge_wakes_the_daemon() {
    let rig = Rig::new(ServerLimits::default());
    for (i, forge) in FORGES.into_iter().enumerate() {
        let (status, body) = post(
            rig.addr(),
            &signed(forge, SECRET, BODY.as_bytes()),
            BODY.as_bytes(),
        );
        assert_eq!(
            (status, body.as_str()),
            (202, "push received: syncing now\n"),
            "{forge:?}"
        );
        assert_eq!(rig.pushes(), i + 1, "{forge:?}");
    }
    let events = rig.events.lock().unwrap().clone();
    for forge in FORGES {
        assert!(
            events.contains(&ServerEvent::HookAccepted {
                forge,
                event: if forge == Forge::GitLab {
                    "Push Hook"
                } else {
                    "push"
                }
                .into(),
                woke: true
            }),
            "{forge:?}: {events:?}"
        );
    }
}

#[test]
fn a_wrongly_signed_or_unsigned_push_is_401_and_wakes_nothing() {
    let rig = Rig::new(ServerLimits::default());
    for forge in FORGES {
        // Signed with another secret.
        let wrong = signed(forge, "not the secret", BODY.as_bytes());
        assert_eq!(
            post(rig.addr(), &wrong, BODY.as_bytes()).0,
            401,
            "{forge:?}"
        );
        // Rightly signed, but the body was changed on the way.
        if forge != Forge::GitLab {
            let other = signed(forge, SECRET, b"{}");
            assert_eq!(
                post(rig.addr(), &other, BODY.as_bytes()).0,
                401,
                "{forge:?}"
            );
        }
        // The event header alone.
        let unsigned: Vec<_> = signed(forge, SECRET, BODY.as_bytes())
            .into_iter()
            .filter(|(k, _)| k.ends_with("Event"))
            .collect();
        let (status, body) = post(rig.addr(), &unsigned, BODY.as_bytes());
        assert_eq!(status, 401, "{forge:?}");
        assert!(body.starts_with("unsigned: no X-"), "{body}");
    }
    // No forge header at all; a GitHub signature that is not hex.
    assert_eq!(post(rig.addr(), &[], BODY.as_bytes()).0, 401);
    let junk = [
        ("X-GitHub-Event", "push".to_owned()),
        ("X-Hub-Signature-256", "sha256=zz".to_owned()),
    ];
    assert_eq!(post(rig.addr(), &junk, BODY.as_bytes()).0, 401);
    assert_eq!(rig.pushes(), 0);

    // What the observer heard names the forge and the reason, and holds
    // neither the body nor a signature nor the secret.
    let events = rig.events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .all(|e| matches!(e, ServerEvent::HookRefused { status: 401, .. }))
    );
    let told = format!("{events:?}");
    for never in [
        "ghp_notreallyatoken",
        "refs/heads/main",
        SECRET,
        "not the secret",
        &hex_hmac(SECRET, BODY.as_bytes()),
    ] {
        assert!(!told.contains(never), "{never:?} in {told}");
    }
}

#[test]
fn a_ping_and_other_events_are_verified_but_wake_nothing() {
    let rig = Rig::new(ServerLimits::default());
    let mut ping = signed(Forge::GitHub, SECRET, BODY.as_bytes());
    ping[0].1 = "ping".into();
    assert_eq!(
        post(rig.addr(), &ping, BODY.as_bytes()),
        (200, "pong\n".into())
    );
    let mut issue = signed(Forge::Gitea, SECRET, BODY.as_bytes());
    issue[0].1 = "issues".into();
    issue[1].1 = "issues".into();
    assert_eq!(
        post(rig.addr(), &issue, BODY.as_bytes()),
        (202, "not a push: nothing to do\n".into())
    );
    let mut tag = signed(Forge::GitLab, SECRET, BODY.as_bytes());
    tag[0].1 = "Tag Push Hook".into();
    assert_eq!(post(rig.addr(), &tag, BODY.as_bytes()).0, 202);
    assert_eq!(rig.pushes(), 0);
}

#[test]
fn bodies_that_cannot_be_checked_are_refused() {
    let rig = Rig::new(ServerLimits {
        max_body_bytes: 64,
        body_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    });
    // Larger than the cap: refused before it is read.
    let big = vec![b'x'; 65];
    assert_eq!(
        post(rig.addr(), &signed(Forge::GitHub, SECRET, &big), &big).0,
        413
    );
    // Fewer bytes than its Content-Length, the rest never comes.
    let mut s = TcpStream::connect(rig.addr()).unwrap();
    let body = b"{}";
    let mut head = "POST /hooks/git HTTP/1.1\r\nContent-Length: 40\r\n".to_owned();
    for (k, v) in signed(Forge::GitHub, SECRET, body) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n{}");
    s.write_all(head.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    assert!(raw.starts_with("HTTP/1.1 408 "), "{raw}");
    // Chunked: no length to check against.
    let mut chunked = signed(Forge::GitHub, SECRET, b"");
    chunked.push(("Transfer-Encoding", "chunked".into()));
    assert_eq!(post(rig.addr(), &chunked, b"").0, 411);
    assert_eq!(rig.pushes(), 0);
}

#[test]
fn the_webhook_needs_no_access_credential_but_the_rest_does() {
    let rig = Rig::guarded(
        ServerLimits::default(),
        Some(proxops_http::Access::Bearer(Secret::new("dash"))),
    );
    let addr = rig.addr();
    assert_eq!(support::get(addr, "/status").status, 401);
    assert_eq!(support::get(addr, "/healthz").status, 200);
    let (status, _) = post(
        addr,
        &signed(Forge::GitHub, SECRET, BODY.as_bytes()),
        BODY.as_bytes(),
    );
    assert_eq!(status, 202);
    assert_eq!(rig.pushes(), 1);
}
