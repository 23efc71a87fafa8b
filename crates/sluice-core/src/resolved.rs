//! A decoded message bound to its application id, ready for the database.

/// A message whose `package_name` resolved to an application id.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved<T> {
    /// Index of the source record in its batch (to dead-letter it if the row fails).
    pub record: usize,
    /// The application's database id.
    pub application_id: i64,
    /// The decoded message.
    pub message: T,
}
