//! Headless Chromium (the Debian package chromium, installed by
//! tools/install-test-tools.sh) driven by its command line: the DOM of a
//! page after its scripts ran (`--dump-dom`), and screenshots.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one Chromium run may take before the test gives up on it.
const RUN_AT_MOST: Duration = Duration::from_secs(90);

pub struct Browser {
    bin: PathBuf,
}

impl Browser {
    /// Chromium from `$PROXOPS_TOOLS_DIR/bin`, else `PATH`; missing is a
    /// failure naming the install script, never a skipped test.
    pub fn find() -> Browser {
        Browser {
            bin: super::sops::tool("chromium")
                .is_file()
                .then(|| super::sops::tool("chromium"))
                .or_else(|| on_path("chromium"))
                .unwrap_or_else(|| {
                    panic!(
                        "chromium not found: run tools/install-test-tools.sh (it installs the Debian package chromium)"
                    )
                }),
        }
    }

    /// The page's DOM once loaded, as HTML.
    pub fn dom(&self, url: &str) -> String {
        let out = self.run(&["--dump-dom", url]);
        String::from_utf8(out).unwrap()
    }

    /// A PNG of the page in a `width`×`height` window, written to `to`.
    pub fn screenshot(&self, url: &str, (width, height): (u32, u32), to: &Path) {
        let shot = format!("--screenshot={}", to.display());
        let size = format!("--window-size={width},{height}");
        self.run(&[&shot, &size, "--hide-scrollbars", url]);
        let png = std::fs::read(to).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "not a PNG: {}",
            to.display()
        );
        // The IHDR chunk: width and height, big-endian, at bytes 16..24.
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((w, h), (width, height), "{}", to.display());
    }

    /// One Chromium run with a fresh profile; its standard output.
    fn run(&self, args: &[&str]) -> Vec<u8> {
        let profile = tempfile::tempdir().unwrap();
        // Output to files, not pipes: a DOM larger than a pipe's buffer
        // must not stall Chromium while the test waits for it.
        let stdout = profile.path().join("stdout");
        let stderr = profile.path().join("stderr");
        let mut child = Command::new(&self.bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.path().join("profile").display()
            ))
            .args(args)
            .env("HOME", profile.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > RUN_AT_MOST {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium {args:?} did not finish in {RUN_AT_MOST:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "chromium {args:?}: {status}\n{}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        std::fs::read(&stdout).unwrap()
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
