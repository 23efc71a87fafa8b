-- A table no code of sluice knows, as the user's own migration creates it: the fourth topic
-- of docs/sinks.md's example ("A full example: a fourth topic"; app-permissions.toml beside it
-- lands in it).
CREATE TABLE app_permissions (
    application_id   BIGINT NOT NULL REFERENCES apps_registry_application (id),
    permission       VARCHAR(128) NOT NULL,
    granted          BOOLEAN NOT NULL,
    protection_level VARCHAR(32),
    observed_at      TIMESTAMPTZ NOT NULL,
    source_offset    BIGINT NOT NULL,
    first_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (application_id, permission)
);
