//! Creating users and sending their commands.

use crate::{AGGREGATE_TYPE, EVENT_TYPE, MailboxError};
use serde_json::{Value, json};
use sluice_kafka::Admin;
use sluice_outbox::{NewEvent, assign_partition, enqueue};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

/// The value of a mailbox command record.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandPayload {
    /// The canonical mailbox user id (also the record key).
    pub user_id: String,
    /// The sender's sequence number of the command for this user.
    pub seq: i64,
    /// The command; `{"op": "reject"}` is rejected by the handler; `{"op": "flaky",
    /// "fail_times": N}` and `{"op": "fail"}` make it fail (see [`CommandPayload::demo_failure`]).
    pub command: Value,
}

impl CommandPayload {
    /// The JSON record value.
    pub fn to_json(&self) -> Value {
        json!({"user_id": self.user_id, "seq": self.seq, "command": self.command})
    }

    /// Reads a record value; `None` when a field is missing or of the wrong type.
    pub fn from_json(value: &Value) -> Option<CommandPayload> {
        Some(CommandPayload {
            user_id: value.get("user_id")?.as_str()?.to_owned(),
            seq: value.get("seq")?.as_i64()?,
            command: value.get("command")?.clone(),
        })
    }

    /// Why the handler fails on this command on purpose, if it does (demonstration ops of
    /// the retry topics), given how many times it already failed on the record:
    /// `{"op": "flaky", "fail_times": N}` fails on its first N deliveries (`attempt < N`),
    /// `{"op": "fail"}` on every one.
    pub fn demo_failure(&self, attempt: u32) -> Option<String> {
        match self.command.get("op").and_then(Value::as_str) {
            Some("fail") => Some(format!(
                "demo op fail: fails on every delivery ({})",
                attempt + 1
            )),
            Some("flaky") => {
                let times = self
                    .command
                    .get("fail_times")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                (u64::from(attempt) < times).then(|| {
                    format!(
                        "demo op flaky: fails on the first {times} deliveries, this is delivery {}",
                        attempt + 1
                    )
                })
            }
            _ => None,
        }
    }

    /// Whether the handler rejects this command.
    pub fn is_reject(&self) -> bool {
        self.command.get("op").and_then(Value::as_str) == Some("reject")
    }
}

/// Creates mailbox user `user_id` (the canonical mailbox user id, never an e-mail address or
/// a display name): assigns it a partition of `topic` with at most `cap` users per partition
/// (growing the topic when needed) and records the user with a zeroed state. Idempotent:
/// an existing user keeps its partition. Returns the partition.
pub async fn create_user(
    conn: &mut PgConnection,
    admin: &Admin,
    topic: &str,
    user_id: &str,
    cap: i32,
) -> Result<i32, MailboxError> {
    let partition = assign_partition(conn, admin, topic, user_id, cap).await?;
    let mut tx = conn.begin().await?;
    sqlx::query(
        "INSERT INTO mailbox_users (user_id, partition) VALUES ($1, $2)
         ON CONFLICT (user_id) DO NOTHING",
    )
    .bind(user_id)
    .bind(partition)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO mailbox_state (user_id, applied, rejected) VALUES ($1, 0, 0)
         ON CONFLICT (user_id) DO NOTHING",
    )
    .bind(user_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(partition)
}

/// Enqueues command `seq` of `user_id` in the caller's transaction (nothing is committed
/// here) and returns the outbox event id. The record is keyed by the user id and sent to
/// the user's partition; its value is `{user_id, seq, command}`. A user's commands are
/// delivered in the order they are enqueued.
pub async fn send_command(
    conn: &mut PgConnection,
    topic: &str,
    user_id: &str,
    seq: i64,
    command: Value,
) -> Result<Uuid, MailboxError> {
    let partition: Option<i32> =
        sqlx::query_scalar("SELECT partition FROM mailbox_users WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(&mut *conn)
            .await?;
    let partition = partition.ok_or_else(|| MailboxError::UnknownUser(user_id.to_owned()))?;
    let payload = CommandPayload {
        user_id: user_id.to_owned(),
        seq,
        command,
    };
    let event = NewEvent::new(
        topic,
        AGGREGATE_TYPE,
        user_id,
        EVENT_TYPE,
        payload.to_json(),
    )
    .with_partition_key(user_id)
    .with_partition(partition);
    Ok(enqueue(conn, &event).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(command: Value) -> CommandPayload {
        CommandPayload {
            user_id: "u".into(),
            seq: 1,
            command,
        }
    }

    #[test]
    fn demo_ops_fail_on_purpose() {
        let flaky = payload(json!({"op": "flaky", "fail_times": 2}));
        assert!(flaky.demo_failure(0).is_some());
        assert!(flaky.demo_failure(1).is_some());
        assert_eq!(flaky.demo_failure(2), None);
        let fail = payload(json!({"op": "fail"}));
        assert!((0..10).all(|a| fail.demo_failure(a).is_some()));
        assert_eq!(payload(json!({"op": "send"})).demo_failure(0), None);
        assert_eq!(payload(json!({"op": "reject"})).demo_failure(0), None);
    }
}
