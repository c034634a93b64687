//! Reading a local file someone else may have prepared (a `ca-file` a
//! repository names, a plan file, a record in the data directory): a
//! regular file only, at most a cap. A symlink to `/dev/zero` or a FIFO is
//! refused at once, never read forever or waited on.
//!
//! Must never: read without a cap, or block on opening a FIFO.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// The most a PEM file of CA certificates may hold.
pub const PEM_MAX_BYTES: u64 = 1024 * 1024;

/// `O_NONBLOCK`: opening a FIFO for reading returns at once instead of
/// waiting for a writer (its value on the architectures Linux shares it
/// on; elsewhere the type check before opening is what stands).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "powerpc64",
    target_arch = "s390x"
))]
pub const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "powerpc64",
    target_arch = "s390x"
)))]
pub const O_NONBLOCK: i32 = 0;

pub fn not_regular(path: &Path, meta: &Metadata) -> io::Error {
    let what = if meta.file_type().is_symlink() {
        "a symbolic link"
    } else if meta.is_dir() {
        "a directory"
    } else {
        "a device, FIFO or socket"
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is {what}, not a regular file", path.display()),
    )
}

/// Opens `path` for reading without waiting on a FIFO, and checks that
/// what was opened is a regular file (and, when `expected` is given, the
/// very file `lstat` found there).
fn open_regular(path: &Path, expected: Option<&Metadata>) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    if let Some(seen) = expected
        && (seen.dev(), seen.ino()) != (meta.dev(), meta.ino())
    {
        return Err(io::Error::other(format!(
            "{} was replaced while it was being opened",
            path.display()
        )));
    }
    Ok(file)
}

/// Reads a regular file of at most `cap` bytes (a link to one is
/// followed): anything else, or more, is an error that says so.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    read_from(open_regular(path, None)?, path, cap)
}

/// As [`read_capped`], but `path` itself must be the regular file: a
/// symlink there is refused, not followed.
pub fn read_capped_nofollow(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    read_from(open_regular(path, Some(&meta))?, path, cap)
}

fn read_from(file: File, path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {cap} bytes", path.display()),
        ));
    }
    Ok(bytes)
}
