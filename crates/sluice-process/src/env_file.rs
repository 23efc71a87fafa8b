//! The `.env` file: it fills in the variables the process environment does not set (the
//! environment wins).

use std::path::PathBuf;

/// A `.env` file exists but cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct EnvFileError {
    /// The file.
    path: PathBuf,
    /// What went wrong.
    #[source]
    source: dotenvy::Error,
}

/// Loads `.env` from the working directory, and only from there (a parent directory's file
/// would configure every command run below it unseen), into the process environment;
/// `Ok(None)` when there is none.
pub(crate) fn load() -> Result<Option<PathBuf>, EnvFileError> {
    let path = std::env::current_dir()
        .map(|dir| dir.join(".env"))
        .unwrap_or_else(|_| PathBuf::from(".env"));
    match dotenvy::from_path(&path) {
        Ok(()) => Ok(Some(path)),
        Err(error) if error.not_found() => Ok(None),
        Err(source) => Err(EnvFileError { path, source }),
    }
}
