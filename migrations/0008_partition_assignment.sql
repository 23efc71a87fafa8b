-- Sequential partition assignment (docs/ARCHITECTURE.md#partition-assignment): each mailbox user is pinned to one partition of
-- a topic; partitions fill in order up to a cap, and a full last partition opens the next.
--
-- Concurrency: sluice_outbox::assign_partition serialises allocation per topic with a
-- transaction-scoped advisory lock, so only one transaction at a time reads the last
-- partition's count and bumps it (or opens the next partition). The keys and checks below
-- are the database's own guard on top of that lock: a user is assigned at most once per
-- topic, a partition row exists at most once, and a count never goes negative.

-- One row per (topic, user): the user's partition; never updated, so an assignment is stable.
-- user_id is the canonical mailbox user id, never an e-mail or a display name.
CREATE TABLE user_partition_assignments (
    topic       VARCHAR(249) NOT NULL,
    user_id     VARCHAR(255) NOT NULL,
    partition   INTEGER      NOT NULL CHECK (partition >= 0),
    assigned_at TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, user_id)
);

CREATE INDEX user_partition_assignments_topic_partition
    ON user_partition_assignments (topic, partition);

-- One row per opened partition: how many users it holds. Rows are opened in order
-- (0, 1, 2, ...), so the row with the highest partition is the one being filled.
CREATE TABLE topic_partition_counts (
    topic     VARCHAR(249) NOT NULL,
    partition INTEGER      NOT NULL CHECK (partition >= 0),
    users     INTEGER      NOT NULL DEFAULT 0 CHECK (users >= 0),
    PRIMARY KEY (topic, partition)
);
