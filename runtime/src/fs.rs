//! Atomic replacement of a file: the new bytes go to a temporary file beside it, which is
//! flushed, synced and renamed over the target, and the directory is synced. Readers see the
//! old file or the new one, never a mix, even if the writer is killed or the machine stops.
//! Checkpoints, histories and plots are written this way.

use std::fmt;
use std::format;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A failure to inject into [`write_atomic_failing`], to test that a failed write leaves the
/// old file as it was and no temporary file behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Writing the temporary file fails after this many bytes.
    AfterBytes(usize),
    /// Flushing the temporary file fails.
    Flush,
    /// Syncing the temporary file to disk fails.
    Sync,
    /// Renaming it over the target fails.
    Rename,
    /// Syncing the directory fails, after the rename: the new file is in place, but it may
    /// not survive a power failure.
    SyncDir,
}

/// A failed atomic write: the file (or directory) involved, the step that failed, and the
/// error of the operating system.
#[derive(Debug)]
pub struct WriteError {
    /// The file (or directory) involved.
    pub path: PathBuf,
    /// What was being done (`create`, `write`, `flush`, `sync`, `rename`, `sync directory`).
    pub action: &'static str,
    /// The error of the operating system.
    pub source: io::Error,
}

impl WriteError {
    fn new(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        WriteError {
            path: path.into(),
            action,
            source,
        }
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: {} failed: {}",
            self.path.display(),
            self.action,
            self.source
        )
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Temporary files created by this process, so that two writes never pick the same name.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with `bytes` atomically; on failure the old file (if any) is untouched and
/// the temporary file removed. A process killed while writing leaves its temporary file
/// (`.<name>.<pid>.<n>.tmp` beside the target) but never a partial target.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("fusegraph-atomic-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use fusegraph_runtime::fs::{write_atomic, write_atomic_failing, Fault};
/// let path = dir.join("run.safetensors");
/// write_atomic(&path, b"old").unwrap();
/// assert!(write_atomic_failing(&path, b"new", Fault::Sync).is_err());
/// assert_eq!(std::fs::read(&path).unwrap(), b"old");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), WriteError> {
    write(path.as_ref(), bytes, None)
}

/// [`write_atomic`] with a failure injected at one step.
pub fn write_atomic_failing(
    path: impl AsRef<Path>,
    bytes: &[u8],
    fault: Fault,
) -> Result<(), WriteError> {
    write(path.as_ref(), bytes, Some(fault))
}

/// An error when `fault` is the step `at`.
fn inject(fault: Option<Fault>, at: Fault) -> io::Result<()> {
    if fault == Some(at) {
        Err(io::Error::other(format!("injected failure: {at:?}")))
    } else {
        Ok(())
    }
}

fn write(path: &Path, bytes: &[u8], fault: Option<Fault>) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp, file) = create_temp(path, dir)?;
    let done = fill(&tmp, file, bytes, fault).and_then(|()| {
        inject(fault, Fault::Rename)
            .and_then(|()| fs::rename(&tmp, path))
            .map_err(|e| WriteError::new(path, "rename", e))
    });
    if let Err(e) = done {
        // The write failed; the old file is as it was. Removing the temporary file is best
        // effort: the error to report is the first one.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir, fault)
}

/// A new temporary file beside `path`, with a name no other writer uses.
fn create_temp(path: &Path, dir: &Path) -> Result<(PathBuf, File), WriteError> {
    let name = path
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut attempt = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}-{nanos}.tmp", process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(WriteError::new(tmp, "create", e)),
        }
    }
}

/// Writes, flushes and syncs the temporary file.
fn fill(tmp: &Path, mut file: File, bytes: &[u8], fault: Option<Fault>) -> Result<(), WriteError> {
    let io = |action| move |e| WriteError::new(tmp, action, e);
    let limit = match fault {
        Some(Fault::AfterBytes(k)) => k.min(bytes.len()),
        _ => bytes.len(),
    };
    file.write_all(&bytes[..limit]).map_err(io("write"))?;
    if limit < bytes.len() {
        inject(fault, Fault::AfterBytes(limit)).map_err(io("write"))?;
    }
    inject(fault, Fault::Flush)
        .and_then(|()| file.flush())
        .map_err(io("flush"))?;
    inject(fault, Fault::Sync)
        .and_then(|()| file.sync_all())
        .map_err(io("sync"))
}

/// Syncs the directory, so that the rename survives a power failure (on unix; elsewhere the
/// file system does not offer it).
fn sync_dir(dir: &Path, fault: Option<Fault>) -> Result<(), WriteError> {
    inject(fault, Fault::SyncDir).map_err(|e| WriteError::new(dir, "sync directory", e))?;
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| WriteError::new(dir, "sync directory", e))?;
    Ok(())
}
