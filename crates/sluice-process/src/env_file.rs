//! The `.env` file: it fills in the variables the process environment does not set (the
//! environment wins).

use std::path::PathBuf;

/// A `.env` file exists but cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error(".env: {0}")]
pub struct EnvFileError(#[source] dotenvy::Error);

/// Loads `.env` from the working directory (or the nearest parent that has one) into the
/// process environment; `Ok(None)` when there is none.
pub(crate) fn load() -> Result<Option<PathBuf>, EnvFileError> {
    match dotenvy::dotenv() {
        Ok(path) => Ok(Some(path)),
        Err(error) if error.not_found() => Ok(None),
        Err(error) => Err(EnvFileError(error)),
    }
}
