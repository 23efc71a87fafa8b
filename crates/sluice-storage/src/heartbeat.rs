//! Health without an HTTP server: each pipeline touches its own file on every loop turn,
//! at most about once a second. A write error warns once and never stops ingestion;
//! `sluice health` reads the files' modification times.
//!
//! The directory often lives in a shared place such as `/tmp`, so it is handled as if
//! another user could have prepared it: it is created with mode 0700 (an existing one is
//! set to 0700, which fails unless this user owns it), a symbolic link in its place or in
//! place of a heartbeat file is refused, and each heartbeat is written to a temporary file
//! opened without following links and renamed over the heartbeat file, so sluice never
//! writes through a link to somewhere else.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The minimum time between two writes.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The mode of the heartbeat directory: only its owner may enter it.
pub const DIR_MODE: u32 = 0o700;

/// The heartbeat file of one pipeline.
pub fn path(dir: &Path, pipeline: &str) -> PathBuf {
    dir.join(format!("{pipeline}.heartbeat"))
}

/// Why a heartbeat could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeartbeatError {
    /// The heartbeat directory is a symbolic link.
    #[error(
        "heartbeat directory {0} is a symbolic link; refusing to use it (set STORAGE_HEARTBEAT_DIR to a real directory)"
    )]
    DirIsSymlink(PathBuf),
    /// Something other than a directory is in the heartbeat directory's place.
    #[error("heartbeat directory {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The heartbeat file is a symbolic link.
    #[error("heartbeat file {0} is a symbolic link; refusing to replace it (remove it)")]
    FileIsSymlink(PathBuf),
    /// The file system refused an operation (e.g. the directory belongs to another user).
    #[error("heartbeat {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> HeartbeatError {
    let path = path.to_owned();
    move |source| HeartbeatError::Io {
        action,
        path,
        source,
    }
}

/// Creates `dir` with mode 0700 (parents too), or checks an existing one: not a link, a
/// directory, and set to mode 0700.
pub fn prepare_dir(dir: &Path) -> Result<(), HeartbeatError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(HeartbeatError::DirIsSymlink(dir.to_owned()));
        }
        Ok(meta) if !meta.is_dir() => return Err(HeartbeatError::NotADirectory(dir.to_owned())),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)
                .map_err(io("cannot create directory", dir))?;
        }
        Err(error) => return Err(io("cannot inspect directory", dir)(error)),
    }
    // Open the directory itself (never a link) and set its mode through that handle: a
    // directory of another user cannot be chmod-ed, so it is refused here.
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(dir)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => HeartbeatError::DirIsSymlink(dir.to_owned()),
            Some(libc::ENOTDIR) => HeartbeatError::NotADirectory(dir.to_owned()),
            _ => io("cannot open directory", dir)(error),
        })?;
    let mode = handle
        .metadata()
        .map_err(io("cannot inspect directory", dir))?
        .permissions()
        .mode();
    if mode & 0o777 != DIR_MODE {
        handle
            .set_permissions(Permissions::from_mode(DIR_MODE))
            .map_err(io("cannot set mode 0700 on directory", dir))?;
    }
    Ok(())
}

/// Writes the heartbeat file of `pipeline` in `dir`: a temporary file opened without
/// following links, renamed over the heartbeat file; a link in either place is refused.
pub fn write(dir: &Path, pipeline: &str) -> Result<(), HeartbeatError> {
    let contents = format!("{:?}\n", SystemTime::now());
    replace(dir, &format!("{pipeline}.heartbeat"), &contents)
}

/// The file in the heartbeat directory where `sluice run` lists the pipelines it runs, one
/// name a line: what `sluice health` checks when it is not told which (a container's
/// health check runs without the process's arguments).
pub const MANIFEST: &str = "pipelines.list";

/// Lists `pipelines` in the heartbeat directory's [`MANIFEST`] (as a heartbeat is written),
/// under this process's id.
pub fn write_manifest(dir: &Path, pipelines: &[String]) -> Result<(), HeartbeatError> {
    let mut contents = format!("pid {}\n", std::process::id());
    for name in pipelines {
        contents.push_str(name);
        contents.push('\n');
    }
    replace(dir, MANIFEST, &contents)
}

/// The pipelines the [`MANIFEST`] lists, while the process that wrote it runs (its
/// `/proc` entry exists); `None` when there is none, it is a link, or its writer is gone (a
/// one-off `sluice run` that shared the directory and ended, say).
pub fn read_manifest(dir: &Path) -> Option<Vec<String>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(MANIFEST))
        .ok()?;
    let text = std::io::read_to_string(file).ok()?;
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let pid: u32 = lines.next()?.strip_prefix("pid ")?.parse().ok()?;
    // Without a /proc to ask, the list is taken as it is.
    if Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists() {
        return None;
    }
    Some(lines.map(str::to_owned).collect())
}

/// Replaces the file `name` in `dir` with `contents`: a temporary file opened without
/// following links, renamed over it; a link in either place is refused.
fn replace(dir: &Path, name: &str, contents: &str) -> Result<(), HeartbeatError> {
    prepare_dir(dir)?;
    let target = dir.join(name);
    if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(HeartbeatError::FileIsSymlink(target));
    }
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => HeartbeatError::FileIsSymlink(temp.clone()),
            _ => io("cannot write", &temp)(error),
        })?;
    file.write_all(contents.as_bytes())
        .map_err(io("cannot write", &temp))?;
    drop(file);
    // rename(2) replaces the directory entry; it never follows a link at the target.
    std::fs::rename(&temp, &target).map_err(io("cannot rename onto", &target))
}

/// A rate-limited heartbeat writer.
#[derive(Debug)]
pub struct Heartbeat {
    dir: PathBuf,
    pipeline: String,
    last: Option<Instant>,
    warned: bool,
}

impl Heartbeat {
    /// A heartbeat for `pipeline` in `dir` (created on first beat).
    pub fn new(dir: &Path, pipeline: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            pipeline: pipeline.to_owned(),
            last: None,
            warned: false,
        }
    }

    /// Touches the file unless it was touched less than [`INTERVAL`] ago.
    pub fn beat(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < INTERVAL) {
            return;
        }
        self.last = Some(Instant::now());
        if let Err(error) = write(&self.dir, &self.pipeline) {
            if !self.warned {
                self.warned = true;
                tracing::warn!(pipeline = %self.pipeline, %error,
                    "cannot write the heartbeat file; ingestion continues, health checks will fail");
            }
        } else {
            self.warned = false;
        }
    }
}

/// How old a heartbeat file is, or `None` if it is missing (or is not a regular file: a
/// symbolic link is never a heartbeat).
pub fn age(dir: &Path, pipeline: &str) -> Option<Duration> {
    let meta = std::fs::symlink_metadata(path(dir, pipeline)).ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta.modified().ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO),
    )
}

/// The reader thread's progress, as seen by the writer that owns the heartbeat: the file is
/// only touched while both halves of the pipeline make progress, and not while the reader
/// sees a consumer error repeating (a stalled topic is not healthy).
#[derive(Debug, Clone)]
pub struct ReaderLiveness(
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

/// A reader that blocks longer than this (outside of waiting for the writer) is stuck.
pub const READER_STALL: Duration = Duration::from_secs(30);

const WAITING_FOR_WRITER: u64 = u64::MAX;

/// Now, in Unix milliseconds; never the [`WAITING_FOR_WRITER`] marker.
fn now_ms() -> u64 {
    sluice_core::clock::unix_ms().min(WAITING_FOR_WRITER - 1)
}

impl Default for ReaderLiveness {
    fn default() -> Self {
        Self(
            std::sync::Arc::new(std::sync::atomic::AtomicU64::new(now_ms())),
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        )
    }
}

impl ReaderLiveness {
    /// The reader turned its loop.
    pub fn turn(&self) {
        self.0.store(now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The reader is blocked handing a batch to the (busy) writer: that is the writer's
    /// time, not a stuck reader.
    pub fn waiting_for_writer(&self) {
        self.0
            .store(WAITING_FOR_WRITER, std::sync::atomic::Ordering::Relaxed);
    }

    /// The reader sees a consumer error repeating (`true`) or not (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.1.store(failing, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the reader turned its loop within `within` (or waits for the writer), and
    /// no consumer error is repeating.
    pub fn is_alive(&self, within: Duration) -> bool {
        if self.1.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let last = self.0.load(std::sync::atomic::Ordering::Relaxed);
        last == WAITING_FOR_WRITER
            || now_ms().saturating_sub(last)
                <= u64::try_from(within.as_millis()).unwrap_or(u64::MAX)
    }
}

/// When a writer last turned its loop (or waited out a retry back-off).
#[derive(Debug, Clone)]
pub struct WriterLiveness(Arc<AtomicU64>);

impl Default for WriterLiveness {
    fn default() -> Self {
        Self(Arc::new(AtomicU64::new(sluice_core::clock::unix_ms())))
    }
}

impl WriterLiveness {
    /// The writer made progress.
    pub fn turn(&self) {
        self.0
            .store(sluice_core::clock::unix_ms(), Ordering::Relaxed);
    }

    /// Whether it made progress within `within`.
    pub fn is_alive(&self, within: Duration) -> bool {
        let last = self.0.load(Ordering::Relaxed);
        let within = u64::try_from(within.as_millis()).unwrap_or(u64::MAX);
        sluice_core::clock::unix_ms().saturating_sub(last) <= within
    }
}

#[cfg(test)]
mod manifest_tests {
    use super::*;

    #[test]
    fn the_manifest_counts_while_its_writer_runs() {
        let dir = std::env::temp_dir().join(format!("sluice-manifest-{}", std::process::id()));
        write_manifest(&dir, &["a".to_owned(), "b".to_owned()]).unwrap();
        assert_eq!(
            read_manifest(&dir),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        // A writer that is gone (no process has the largest pid there is).
        std::fs::write(dir.join(MANIFEST), "pid 4294967295\na\n").unwrap();
        assert_eq!(read_manifest(&dir), None);
        std::fs::write(dir.join(MANIFEST), "a\n").unwrap();
        assert_eq!(read_manifest(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_is_alive_while_turning_or_waiting_for_the_writer() {
        let liveness = ReaderLiveness::default();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness
            .0
            .store(now_ms() - 5_000, std::sync::atomic::Ordering::Relaxed);
        assert!(!liveness.is_alive(Duration::from_secs(1)), "stale");
        liveness.waiting_for_writer();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness.turn();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness.set_failing(true);
        assert!(
            !liveness.is_alive(Duration::from_secs(1)),
            "a stalling topic"
        );
        liveness.set_failing(false);
        assert!(liveness.is_alive(Duration::from_secs(1)));
    }

    #[test]
    fn heartbeat_writes_at_most_once_per_interval() {
        let dir = std::env::temp_dir().join(format!("sluice-hb-test-{}", std::process::id()));
        let mut heartbeat = Heartbeat::new(&dir, "reviews");
        heartbeat.beat();
        let first = std::fs::metadata(path(&dir, "reviews"))
            .and_then(|m| m.modified())
            .unwrap();
        heartbeat.beat();
        let second = std::fs::metadata(path(&dir, "reviews"))
            .and_then(|m| m.modified())
            .unwrap();
        assert_eq!(first, second, "rate-limited");
        assert!(age(&dir, "reviews").is_some_and(|a| a < Duration::from_secs(5)));
        assert_eq!(age(&dir, "missing"), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-hb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn the_directory_is_created_with_mode_0700_and_an_open_one_is_closed() {
        let root = scratch("mode");
        let dir = root.join("nested").join("heartbeat");
        write(&dir, "reviews").unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.join("nested")), 0o700, "created parents too");
        assert_eq!(mode(&path(&dir, "reviews")), 0o600);
        std::fs::set_permissions(&dir, Permissions::from_mode(0o777)).unwrap();
        write(&dir, "reviews").unwrap();
        assert_eq!(mode(&dir), 0o700, "an existing directory is set to 0700");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            leftovers,
            vec![std::ffi::OsString::from("reviews.heartbeat")]
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_symlink_in_place_of_the_directory_is_refused() {
        let root = scratch("dirlink");
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, Permissions::from_mode(0o755)).unwrap();
        let dir = root.join("heartbeat");
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let error = write(&dir, "reviews").unwrap_err();
        assert!(matches!(error, HeartbeatError::DirIsSymlink(_)), "{error}");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            0,
            "nothing written"
        );
        assert_eq!(mode(&elsewhere), 0o755, "the link's target is left alone");
        let mut heartbeat = Heartbeat::new(&dir, "reviews");
        heartbeat.beat();
        assert!(heartbeat.warned, "beat() warns and carries on");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_symlink_as_the_heartbeat_file_is_refused() {
        let root = scratch("filelink");
        let dir = root.join("heartbeat");
        write(&dir, "app-stats").unwrap();
        let victim = root.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, path(&dir, "reviews")).unwrap();
        let error = write(&dir, "reviews").unwrap_err();
        assert!(matches!(error, HeartbeatError::FileIsSymlink(_)), "{error}");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            std::fs::symlink_metadata(path(&dir, "reviews"))
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link is left for an operator to look at"
        );
        assert_eq!(
            age(&dir, "reviews"),
            None,
            "a link is never a fresh heartbeat"
        );
        // A link planted at the temporary file's name is not followed either.
        let temp = dir.join(format!(".app-stats.heartbeat.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &temp).unwrap();
        let error = write(&dir, "app-stats").unwrap_err();
        assert!(matches!(error, HeartbeatError::FileIsSymlink(_)), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_writer_is_alive_while_it_turns() {
        let liveness = WriterLiveness::default();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness
            .0
            .store(sluice_core::clock::unix_ms() - 5_000, Ordering::Relaxed);
        assert!(!liveness.is_alive(Duration::from_secs(1)), "stale");
        liveness.turn();
        assert!(liveness.is_alive(Duration::from_secs(1)));
    }
}
