//! Finding and loading age identities the way sops 3.11 does: `SOPS_AGE_KEY`
//! (inline text), `SOPS_AGE_KEY_FILE`, and the default key file in the user
//! configuration directory, all of them together. The environment comes in
//! as a value ([`IdentitySources`]) so nothing here reads process state
//! except [`IdentitySources::from_process_env`]. Identity text is never
//! echoed in an error, not even a line of it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::SopsError;

/// Where sops looks for age identities, as values.
#[derive(Clone, Default)]
pub struct IdentitySources {
    /// `SOPS_AGE_KEY`: identity text, may hold several lines.
    pub sops_age_key: Option<String>,
    /// `SOPS_AGE_KEY_FILE`.
    pub sops_age_key_file: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<PathBuf>,
    /// Which rule locates the user configuration directory.
    pub platform: ConfigDirRule,
}

/// How the user configuration directory is found (Go `os.UserConfigDir`,
/// with sops' macOS exception).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConfigDirRule {
    /// Linux and other Unix: `$XDG_CONFIG_HOME` if set and absolute, else
    /// `$HOME/.config`.
    #[default]
    Xdg,
    /// macOS: sops honours `$XDG_CONFIG_HOME` if set, else Go's
    /// `$HOME/Library/Application Support`.
    MacOs,
}

impl fmt::Debug for IdentitySources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentitySources")
            .field(
                "sops_age_key",
                &self.sops_age_key.as_ref().map(|_| "<redacted>"),
            )
            .field("sops_age_key_file", &self.sops_age_key_file)
            .field("home", &self.home)
            .field("xdg_config_home", &self.xdg_config_home)
            .field("platform", &self.platform)
            .finish()
    }
}

impl IdentitySources {
    /// Reads the four variables from the process environment. Empty
    /// variables count as unset, except `SOPS_AGE_KEY` which sops reads as
    /// (empty) text.
    pub fn from_process_env() -> Self {
        let path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        IdentitySources {
            sops_age_key: std::env::var("SOPS_AGE_KEY").ok(),
            sops_age_key_file: path("SOPS_AGE_KEY_FILE"),
            home: path("HOME"),
            xdg_config_home: path("XDG_CONFIG_HOME"),
            platform: if cfg!(target_os = "macos") {
                ConfigDirRule::MacOs
            } else {
                ConfigDirRule::Xdg
            },
        }
    }

    /// sops' default key file: `<user config dir>/sops/age/keys.txt`.
    pub fn default_key_file(&self) -> Option<PathBuf> {
        let xdg = self
            .xdg_config_home
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let config_dir = match self.platform {
            ConfigDirRule::MacOs => match xdg {
                Some(dir) => Some(dir.clone()),
                None => self
                    .home
                    .as_ref()
                    .map(|h| h.join("Library").join("Application Support")),
            },
            // Go refuses a relative $XDG_CONFIG_HOME; sops then has no
            // default location.
            ConfigDirRule::Xdg => match xdg {
                Some(dir) if dir.is_absolute() => Some(dir.clone()),
                Some(_) => None,
                None => self.home.as_ref().map(|h| h.join(".config")),
            },
        }?;
        Some(config_dir.join("sops").join("age").join("keys.txt"))
    }
}

/// The loaded age identities, plus where they were looked for.
pub struct Identities {
    keys: Vec<age::x25519::Identity>,
    searched: Vec<String>,
}

impl fmt::Debug for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Identities(<redacted>, {} keys, searched: {:?})",
            self.keys.len(),
            self.searched
        )
    }
}

impl Identities {
    /// Loads every identity from every source, as sops does. A source that
    /// is set but broken (unreadable file, a public recipient instead of an
    /// identity, a line that is no identity) is an error; finding none at
    /// all is not (it becomes [`SopsError::NoIdentity`] when decrypting).
    pub fn load(sources: &IdentitySources) -> Result<Identities, SopsError> {
        let mut ids = Identities {
            keys: Vec::new(),
            searched: Vec::new(),
        };
        if let Some(text) = &sources.sops_age_key {
            ids.searched.push("SOPS_AGE_KEY".into());
            ids.add_text(text, "SOPS_AGE_KEY")?;
        }
        if let Some(path) = &sources.sops_age_key_file {
            let origin = format!("SOPS_AGE_KEY_FILE={}", path.display());
            ids.searched.push(origin.clone());
            let text = read_key_file(path).map_err(|reason| SopsError::InvalidIdentity {
                origin: origin.clone(),
                reason,
            })?;
            ids.add_text(&text, &origin)?;
        }
        match sources.default_key_file() {
            Some(path) => {
                let origin = path.display().to_string();
                ids.searched.push(origin.clone());
                match std::fs::metadata(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    _ => {
                        let text =
                            read_key_file(&path).map_err(|reason| SopsError::InvalidIdentity {
                                origin: origin.clone(),
                                reason,
                            })?;
                        ids.add_text(&text, &origin)?;
                    }
                }
            }
            None => ids
                .searched
                .push("default key file (no HOME or XDG_CONFIG_HOME)".into()),
        }
        Ok(ids)
    }

    /// Identities from age-keygen text (`#` comments allowed).
    pub fn from_text(text: &str, origin: &str) -> Result<Identities, SopsError> {
        let mut ids = Identities {
            keys: Vec::new(),
            searched: vec![origin.to_string()],
        };
        ids.add_text(text, origin)?;
        Ok(ids)
    }

    /// How many identities were loaded.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No identity was loaded.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Where identities were looked for, for error messages.
    pub fn searched(&self) -> &[String] {
        &self.searched
    }

    pub(crate) fn as_dyn(&self) -> impl Iterator<Item = &dyn age::Identity> {
        self.keys.iter().map(|k| k as &dyn age::Identity)
    }

    fn add_text(&mut self, text: &str, origin: &str) -> Result<(), SopsError> {
        let invalid = |reason: String| SopsError::InvalidIdentity {
            origin: origin.to_string(),
            reason,
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.starts_with("age1") {
                return Err(invalid(format!(
                    "line {}: this is a public age recipient, not an identity (use the AGE-SECRET-KEY-1… line printed by age-keygen)",
                    n + 1
                )));
            }
            if line.starts_with("AGE-PLUGIN-") {
                return Err(invalid(format!(
                    "line {}: age plugin identities are not supported",
                    n + 1
                )));
            }
            if line.starts_with("-----BEGIN") {
                return Err(invalid(format!(
                    "line {}: SSH or armored keys are not supported; use an age identity",
                    n + 1
                )));
            }
            // The parse error text is not used: it could quote the key.
            let key = age::x25519::Identity::from_str(line)
                .map_err(|_| invalid(format!("line {}: not a valid age identity", n + 1)))?;
            self.keys.push(key);
        }
        Ok(())
    }
}

fn read_key_file(path: &std::path::Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {}", e.kind()))?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn default_key_file_prefers_absolute_xdg_config_home() {
        let mut s = IdentitySources {
            home: Some("/home/op".into()),
            ..Default::default()
        };
        assert_eq!(
            s.default_key_file().as_deref(),
            Some(Path::new("/home/op/.config/sops/age/keys.txt"))
        );
        s.xdg_config_home = Some("/cfg".into());
        assert_eq!(
            s.default_key_file().as_deref(),
            Some(Path::new("/cfg/sops/age/keys.txt"))
        );
        s.xdg_config_home = Some("relative".into());
        assert_eq!(s.default_key_file(), None);
    }

    #[test]
    fn macos_uses_application_support_unless_xdg_is_set() {
        let mut s = IdentitySources {
            home: Some("/Users/op".into()),
            platform: ConfigDirRule::MacOs,
            ..Default::default()
        };
        assert_eq!(
            s.default_key_file().as_deref(),
            Some(Path::new(
                "/Users/op/Library/Application Support/sops/age/keys.txt"
            ))
        );
        s.xdg_config_home = Some("/x".into());
        assert_eq!(
            s.default_key_file().as_deref(),
            Some(Path::new("/x/sops/age/keys.txt"))
        );
    }
}
