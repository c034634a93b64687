//! Credentials (spec §4): per-cluster effective PVE credentials from SOPS,
//! the environment and configuration, in that order of precedence, and the
//! cloud-init material a SOPS file carries. Decrypted values stay in memory
//! as `Secret`s; errors name the cluster, the file and the key, never a value.

use std::path::{Path, PathBuf};

use proxops_core::config::{AccessRefs, AuthMethod, ClusterConfig, Config};
use proxops_core::drift::CloudInitSecrets;
use proxops_core::secret::Secret;
use proxops_sops::{IdentitySources, SecretDocument};

use crate::exit::Failure;

/// What one cluster connects with.
#[derive(Debug, Clone)]
pub struct ClusterCredentials {
    pub auth: AuthMethod,
    pub user: Option<String>,
    pub token_id: Option<String>,
    pub token: Option<Secret>,
    /// A composed `user@realm!tokenid=secret`.
    pub token_value: Option<Secret>,
    pub password: Option<Secret>,
    pub cloud_init: CloudInitSecrets,
    /// Where `user` came from when it is a SOPS value ("the value of SOPS
    /// key … in …"): messages name it so, never by its value.
    pub user_origin: Option<String>,
    /// Where each credential came from, for messages.
    pub origins: Origins,
}

/// Where each credential field came from: an environment variable, a SOPS
/// key in a file, or a configuration key. Names only, never a value.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    pub user: String,
    pub token_id: String,
    pub token: String,
    pub token_value: String,
    pub password: String,
}

impl Origins {
    /// The environment and configuration origins (SOPS ones are set by
    /// [`resolve`]); an environment variable wins when set non-empty, as
    /// it does in the configuration's layering.
    fn bootstrap() -> Origins {
        fn env_or(var: &str, key: &str) -> String {
            if std::env::var(var).is_ok_and(|v| !v.trim().is_empty()) {
                var.to_owned()
            } else {
                format!("{key} in the configuration")
            }
        }
        Origins {
            user: env_or("PROXOPS_PVE_USER", "pve.user (or --pve-user)"),
            token_id: "pve.token-id in the configuration".to_owned(),
            token: env_or("PROXOPS_PVE_TOKEN", "pve.token"),
            token_value: env_or("PROXOPS_PVE_TOKEN_VALUE", "pve.token-value"),
            password: env_or("PROXOPS_PVE_PASSWORD", "pve.password"),
        }
    }
}

impl ClusterCredentials {
    /// The `Authorization: PVEAPIToken=` value, when token auth has one.
    pub fn api_token(&self) -> Option<Secret> {
        if let Some(v) = &self.token_value {
            return Some(v.clone());
        }
        match (&self.user, &self.token_id, &self.token) {
            (Some(u), Some(id), Some(t)) => Some(Secret::new(format!("{u}!{id}={}", t.expose()))),
            _ => None,
        }
    }

    /// The PVE user as a message may name it: its SOPS origin, or the
    /// value when it came from configuration or the environment.
    pub fn user_shown(&self) -> String {
        match (&self.user_origin, &self.user) {
            (Some(origin), _) => origin.clone(),
            (None, Some(user)) => format!("{user:?}"),
            (None, None) => "not set".to_owned(),
        }
    }

    /// Rule 4 of §3.4: enough to talk to PVE.
    pub fn check(&self, cluster: &str) -> Result<(), Failure> {
        let ok = match self.auth {
            AuthMethod::Token => self.api_token().is_some(),
            AuthMethod::Ticket => self.user.is_some() && self.password.is_some(),
        };
        if ok {
            Ok(())
        } else {
            let need = match self.auth {
                AuthMethod::Token => {
                    "a user and an API token (PROXOPS_PVE_TOKEN_VALUE=user@realm!tokenid=secret, or user + token-id + token)"
                }
                AuthMethod::Ticket => {
                    "a user and a password (PROXOPS_PVE_USER and PROXOPS_PVE_PASSWORD, or SOPS)"
                }
            };
            Err(Failure::input(format!(
                "invalid configuration: cluster {cluster:?}: no effective PVE user/token/password after credential resolution: {} auth needs {need}; fails closed",
                self.auth.as_str()
            )))
        }
    }
}

/// The folder of the file that declared a cluster, where the cluster's own
/// relative file names start: below `root` unless it is absolute.
pub fn declaring_dir(declared_in: &str, root: Option<&Path>) -> PathBuf {
    let declared = Path::new(declared_in);
    let dir = declared.parent().unwrap_or(Path::new(""));
    if declared.is_absolute() {
        dir.to_path_buf()
    } else {
        root.map(|r| r.join(dir))
            .unwrap_or_else(|| dir.to_path_buf())
    }
}

/// Where a cluster's `secrets-file` is, on disk: relative to the file that
/// declared the cluster, and inside the repository (the work tree root, or
/// for a `--config` file outside any work tree, that file's directory).
/// The path is resolved through every symlink before it is checked, so
/// neither `..` nor a link can lead a repository to make this host decrypt
/// a SOPS file of its choosing and send the credentials in it to an
/// endpoint of its choosing. Refusals are exit 2 and name the declaring
/// file and the key.
pub fn secrets_path(cc: &ClusterConfig, root: Option<&Path>) -> Result<Option<PathBuf>, Failure> {
    let Some(file) = cc.secrets_file.as_ref() else {
        return Ok(None);
    };
    let key = format!("pve.clusters.{}.secrets-file", cc.name.as_str());
    confined_path(file, &cc.declared_in, root)
        .map(Some)
        .map_err(|why| unconfined(&cc.declared_in, &key, &why))
}

/// [`secrets_path`], its refusal said without where the file was named
/// (`validate` names the file and key itself).
pub fn secrets_path_alone(
    cc: &ClusterConfig,
    root: Option<&Path>,
) -> Result<Option<PathBuf>, String> {
    match cc.secrets_file.as_ref() {
        None => Ok(None),
        Some(file) => confined_path(file, &cc.declared_in, root).map(Some),
    }
}

/// The refusal of a file named by `key` in `declared_in` that is not
/// confined to the repository (exit 2).
fn unconfined(declared_in: &str, key: &str, why: &str) -> Failure {
    Failure::input(format!(
        "invalid configuration: {declared_in}: {key}: {why}"
    ))
}

/// `file`, named by `key` in `declared_in`, on disk and confined to the
/// repository as [`secrets_path`] says.
fn confined_path(file: &str, declared_in: &str, root: Option<&Path>) -> Result<PathBuf, String> {
    let refuse =
        |why: String| format!("{file:?} {why}: the repository may name only files inside it");
    let p = Path::new(file);
    if p.is_absolute() {
        return Err(refuse("is an absolute path".to_owned()));
    }
    let base = declaring_dir(declared_in, root);
    let path = base.join(p);
    // A file of the host's own configuration (a --config outside the
    // work tree) names files beside it; only a repository's are fenced in.
    let outside_tree = Path::new(declared_in).is_absolute()
        && root.is_none_or(|r| {
            let r = r.canonicalize().unwrap_or_else(|_| r.to_path_buf());
            !Path::new(declared_in).starts_with(&r)
        });
    let fence = match root {
        Some(r) if !outside_tree => r.to_path_buf(),
        _ => base,
    };
    let fence = if fence.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        fence
    };
    // A file that does not exist cannot lead anywhere: reading it fails
    // with its own message.
    let Ok(real) = path.canonicalize() else {
        return Ok(path);
    };
    let fence = fence
        .canonicalize()
        .map_err(|e| refuse(format!("cannot be checked ({}: {e})", fence.display())))?;
    if !real.starts_with(&fence) {
        return Err(refuse(format!(
            "resolves to {}, outside {}",
            real.display(),
            fence.display()
        )));
    }
    Ok(real)
}

fn sops_key(reference: &str) -> String {
    if reference.contains('.') {
        reference.to_owned()
    } else {
        format!("secrets.{reference}")
    }
}

/// Decrypts a cluster's SOPS file (if it has one) and resolves its
/// credentials. Exit-2 failures name cluster, file and key.
pub fn resolve(
    cfg: &Config,
    cc: &ClusterConfig,
    root: Option<&Path>,
    sources: &IdentitySources,
) -> Result<ClusterCredentials, Failure> {
    let cluster = cc.name.as_str();
    let doc = decrypt(cc, root, sources)?;
    let refs = cc.secrets.pve.clone().unwrap_or_default();
    let lookup = |field: &str, reference: &Option<String>| -> Result<Option<Secret>, Failure> {
        let Some(r) = reference else { return Ok(None) };
        let Some((doc, label)) = &doc else {
            return Err(Failure::input(format!(
                "credentials: cluster {cluster:?}: secrets.pve.{field} refers to SOPS key {r:?} but the cluster has no secrets-file"
            )));
        };
        let key = sops_key(r);
        match doc.get_text(&key) {
            Some(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_owned()))),
            _ => Err(Failure::input(format!(
                "credentials: cluster {cluster:?}: {label} has no non-empty value at {key:?} (referenced by secrets.pve.{field}); fails closed"
            ))),
        }
    };
    let s_user = lookup("user", &refs.user)?;
    let user_origin = match (&refs.user, &doc, &s_user) {
        (Some(r), Some((_, label)), Some(_)) => Some(format!(
            "the value of SOPS key {:?} in {label} (secrets.pve.user)",
            sops_key(r)
        )),
        _ => None,
    };
    let s_token_id = lookup("token-id", &refs.token_id)?;
    let s_token = lookup("token", &refs.token)?;
    let s_password = lookup("password", &refs.password)?;
    let mut origins = Origins::bootstrap();
    if let Some((_, label)) = &doc {
        let from_sops = |field: &str, reference: &Option<String>, origin: &mut String| {
            if let Some(r) = reference {
                *origin = format!(
                    "SOPS key {:?} in {label} (secrets.pve.{field})",
                    sops_key(r)
                );
            }
        };
        from_sops("user", &refs.user, &mut origins.user);
        from_sops("token-id", &refs.token_id, &mut origins.token_id);
        from_sops("token", &refs.token, &mut origins.token);
        from_sops("password", &refs.password, &mut origins.password);
    }
    let any_sops =
        s_user.is_some() || s_token_id.is_some() || s_token.is_some() || s_password.is_some();
    // A referenced git token must resolve too (fail closed), even before
    // URL mode uses it.
    let git_ref = cc.secrets.git.as_ref().and_then(|g| g.token.clone());
    lookup("git.token", &git_ref)?;

    let mut cloud_init = CloudInitSecrets::default();
    if let Some((doc, _)) = &doc {
        for (path, value) in doc.leaves() {
            if let Some(name) = path.strip_prefix("cloud-init.ssh-keys.") {
                cloud_init
                    .ssh_keys
                    .insert(name.to_owned(), value.to_string());
            } else if let Some(name) = path.strip_prefix("cloud-init.passwords.") {
                cloud_init
                    .passwords
                    .insert(name.to_owned(), Secret::new(value.to_string()));
            }
        }
    }
    Ok(ClusterCredentials {
        auth: cfg.auth,
        user: s_user
            .map(|s| s.expose().to_owned())
            .or_else(|| cfg.user.clone()),
        token_id: s_token_id
            .map(|s| s.expose().to_owned())
            .or_else(|| cfg.token_id.clone()),
        token: s_token.or_else(|| cfg.token.clone()),
        token_value: if any_sops {
            None
        } else {
            cfg.token_value.clone()
        },
        password: s_password.or_else(|| cfg.password.clone()),
        cloud_init,
        user_origin,
        origins,
    })
}

/// Decrypts a cluster's SOPS file, if it names one; the label is the
/// file's (shortened) path for messages.
fn decrypt(
    cc: &ClusterConfig,
    root: Option<&Path>,
    sources: &IdentitySources,
) -> Result<Option<(SecretDocument, String)>, Failure> {
    let Some(path) = secrets_path(cc, root)? else {
        return Ok(None);
    };
    let label = short(&path);
    let doc = proxops_sops::decrypt_file(&path, sources).map_err(|e| {
        Failure::input(format!(
            "credentials: cluster {:?}: cannot decrypt {label} ({}): {e}",
            cc.name.as_str(),
            e.class()
        ))
    })?;
    Ok(Some((doc, label)))
}

/// The one git token of the one git source (spec §4.3): the SOPS value a
/// cluster's `secrets.git.token` references (it must resolve non-empty; two
/// clusters resolving different tokens is a "git token conflict" and fails
/// closed), else `PROXOPS_GIT_TOKEN`, else `git.token` (those two are
/// already layered into `cfg.git_token`). Exit-2 failures never show a value.
pub fn git_token(
    cfg: &Config,
    root: Option<&Path>,
    sources: &IdentitySources,
) -> Result<Option<Secret>, Failure> {
    let mut chosen: Option<(&str, Secret)> = None;
    for cc in cfg.clusters.values() {
        let Some(reference) = cc.secrets.git.as_ref().and_then(|g| g.token.as_deref()) else {
            continue;
        };
        let cluster = cc.name.as_str();
        let Some((doc, label)) = decrypt(cc, root, sources)? else {
            return Err(Failure::input(format!(
                "credentials: cluster {cluster:?}: secrets.git.token refers to SOPS key {reference:?} but the cluster has no secrets-file"
            )));
        };
        let key = sops_key(reference);
        let token = match doc.get_text(&key) {
            Some(v) if !v.trim().is_empty() => Secret::new(v.trim().to_owned()),
            _ => {
                return Err(Failure::input(format!(
                    "credentials: cluster {cluster:?}: {label} has no non-empty value at {key:?} (referenced by secrets.git.token); fails closed"
                )));
            }
        };
        match &chosen {
            Some((first, t)) if *t != token => {
                return Err(Failure::input(format!(
                    "credentials: git token conflict: clusters {first:?} and {cluster:?} resolve different SOPS git tokens, but one git source takes one token; fails closed"
                )));
            }
            Some(_) => {}
            None => chosen = Some((cluster, token)),
        }
    }
    Ok(chosen.map(|(_, t)| t).or_else(|| cfg.git_token.clone()))
}

/// The daemon's own credentials (`daemon:`), decrypted from
/// `daemon.secrets-file`.
#[derive(Debug, Default)]
pub struct DaemonSecrets {
    pub access: Option<AccessCredential>,
    /// The secret forges sign `POST /hooks/git` with.
    pub webhook: Option<Secret>,
    /// Each notification target with its URL and token.
    pub notify: Vec<TargetSecrets>,
}

/// The credential every request but `/healthz` must carry.
#[derive(Debug, Clone)]
pub enum AccessCredential {
    Bearer(Secret),
    Basic { user: Secret, password: Secret },
}

/// One notification target with its secrets.
#[derive(Debug, Clone)]
pub struct TargetSecrets {
    pub target: proxops_core::config::NotifyTarget,
    pub url: Secret,
    pub token: Option<Secret>,
}

/// Decrypts `daemon.secrets-file` (when the configuration names one) and
/// resolves every key `daemon:` references; each must exist and be
/// non-empty (fails closed, exit 2, naming the file and key, never a
/// value).
pub fn daemon_secrets(
    cfg: &Config,
    root: Option<&Path>,
    sources: &IdentitySources,
) -> Result<DaemonSecrets, Failure> {
    let d = &cfg.daemon;
    let Some(file) = &d.secrets_file else {
        return Ok(DaemonSecrets::default());
    };
    let path = confined_path(file, &d.declared_in, root)
        .map_err(|why| unconfined(&d.declared_in, "daemon.secrets-file", &why))?;
    let label = short(&path);
    let doc = proxops_sops::decrypt_file(&path, sources).map_err(|e| {
        Failure::input(format!(
            "credentials: daemon: cannot decrypt {label} ({}): {e}",
            e.class()
        ))
    })?;
    let get = |field: &str, reference: &str| -> Result<Secret, Failure> {
        let key = sops_key(reference);
        match doc.get_text(&key) {
            Some(v) if !v.trim().is_empty() => Ok(Secret::new(v.trim().to_owned())),
            _ => Err(Failure::input(format!(
                "credentials: daemon: {label} has no non-empty value at {key:?} (referenced by {field}); fails closed"
            ))),
        }
    };
    let access = match &d.access {
        None => None,
        Some(AccessRefs::Token(t)) => {
            Some(AccessCredential::Bearer(get("daemon.access.token", t)?))
        }
        Some(AccessRefs::Basic { user, password }) => Some(AccessCredential::Basic {
            user: get("daemon.access.user", user)?,
            password: get("daemon.access.password", password)?,
        }),
    };
    let webhook = d
        .webhook_secret
        .as_deref()
        .map(|k| get("daemon.git-webhook.secret", k))
        .transpose()?;
    let mut notify = Vec::new();
    for t in &d.notify {
        let field = |f: &str| format!("daemon.notify {:?} {f}", t.name);
        notify.push(TargetSecrets {
            target: t.clone(),
            url: get(&field("url"), &t.url)?,
            token: t
                .token
                .as_deref()
                .map(|k| get(&field("token"), k))
                .transpose()?,
        });
    }
    Ok(DaemonSecrets {
        access,
        webhook,
        notify,
    })
}

fn short(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars().count() > 80 {
        format!(
            "…{}",
            s.chars()
                .rev()
                .take(79)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<String>()
        )
    } else {
        s
    }
}

/// `proxops secrets check FILE`.
pub fn check(file: &Path) -> Result<crate::exit::Exit, Failure> {
    use sha2::{Digest, Sha256};
    let doc = proxops_sops::decrypt_file(file, &IdentitySources::from_process_env())
        .map_err(|e| Failure::input(format!("{}: {e}", e.class())))?;
    let mut lines = String::new();
    for (path, value) in doc.leaves() {
        let digest = Sha256::digest(value.as_bytes());
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        lines.push_str(&format!("{path}\tsha256:{hex}\n"));
    }
    crate::out::print(&lines)?;
    Ok(crate::exit::Exit::Ok)
}
