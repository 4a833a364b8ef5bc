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

/// Replaces `path` with `bytes` atomically; on failure the old file (if any) is untouched, the
/// temporary file removed, and the error names `path` (a missing directory is a `create`
/// error of `path`). A process killed while writing leaves its temporary file
/// (`.<name>.<pid>.<n>-<nanos>.tmp` beside the target) but never a partial target; the next
/// successful write of the same target, from another process, removes such files of that
/// target (and of other processes: one process's own are those it is writing). Two
/// processes writing the same target at once is not supported: one may remove the other's
/// temporary file, whose write then fails (leaving a whole target still).
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
    let done = fill(path, file, bytes, fault).and_then(|()| {
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
    remove_stale_temps(path, dir);
    sync_dir(dir, fault)
}

/// The file name of `path`, which its temporary files start with.
fn target_name(path: &Path) -> std::borrow::Cow<'_, str> {
    path.file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy())
}

/// Removes the temporary files of `path` in `dir` that other processes left (killed while
/// writing), best effort: a file that cannot be listed or removed stays.
fn remove_stale_temps(path: &Path, dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let name = target_name(path);
    for entry in entries.flatten() {
        let file = entry.file_name();
        let pid = file.to_str().and_then(|f| temp_pid(f, &name));
        if pid.is_some_and(|pid| pid != process::id()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The process id in `file` when it is a temporary file of the target `name`:
/// `.<name>.<pid>.<n>-<nanos>.tmp`, each number decimal digits.
fn temp_pid(file: &str, name: &str) -> Option<u32> {
    let middle = file
        .strip_prefix('.')?
        .strip_prefix(name)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let (pid, rest) = middle.split_once('.')?;
    let (n, nanos) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(pid) && digits(n) && digits(nanos)) {
        return None;
    }
    pid.parse().ok()
}

/// A new temporary file beside `path`, with a name no other writer uses; an error names
/// `path`, the file the caller asked for.
fn create_temp(path: &Path, dir: &Path) -> Result<(PathBuf, File), WriteError> {
    let name = target_name(path);
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
            Err(e) => return Err(WriteError::new(path, "create", e)),
        }
    }
}

/// Writes, flushes and syncs the temporary file of `path` (which errors name).
fn fill(path: &Path, mut file: File, bytes: &[u8], fault: Option<Fault>) -> Result<(), WriteError> {
    let io = |action| move |e| WriteError::new(path, action, e);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::{String, ToString};
    use std::vec::Vec;

    /// A fresh directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fusegraph-fs-{}-{name}", process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_missing_directory_names_the_path_given() {
        let dir = scratch("missing");
        let path = dir.0.join("absent").join("run.safetensors");
        let err = write_atomic(&path, b"x").unwrap_err();
        assert_eq!((err.path.as_path(), err.action), (path.as_path(), "create"));
        assert!(err
            .to_string()
            .starts_with(&format!("`{}`: create failed:", path.display())));
    }

    #[test]
    fn a_write_removes_the_temporary_files_killed_writers_left_of_its_target() {
        let dir = scratch("stale");
        let own = format!(".run.bin.{}.7-7.tmp", process::id());
        let kept = [
            own.as_str(),
            ".other.bin.12.0-5.tmp",
            ".run.bin.notes.tmp",
            ".run.bin.12.0.tmp",
            "run.bin.12.0-5.tmp",
            ".run.bin.12.0-5.tmp.bak",
        ];
        let stale = [
            ".run.bin.12.0-5.tmp",
            ".run.bin.4294967295.31-999999999.tmp",
        ];
        for name in kept.iter().chain(&stale) {
            fs::write(dir.0.join(name), b"partial").unwrap();
        }
        write_atomic(dir.0.join("run.bin"), b"whole").unwrap();
        let mut expected: Vec<String> = kept.iter().map(|n| String::from(*n)).collect();
        expected.push("run.bin".into());
        expected.sort();
        assert_eq!(names(&dir.0), expected);
        assert_eq!(fs::read(dir.0.join("run.bin")).unwrap(), b"whole");
    }

    #[test]
    fn temporary_names_parse_back_to_their_process() {
        assert_eq!(temp_pid(".a.b.12.3-4.tmp", "a.b"), Some(12));
        assert_eq!(temp_pid(".a.b.12.3-4.tmp", "a"), None);
        assert_eq!(temp_pid(".a.99999999999.3-4.tmp", "a"), None);
        assert_eq!(temp_pid(".a.1.-4.tmp", "a"), None);
    }
}
