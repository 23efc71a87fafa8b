-- app_stats: one row per app per crawl; append-only (docs/ARCHITECTURE.md#tables).
-- Natural key (application_id, crawled_at): the same pair again is a redelivery.
CREATE TABLE app_stats (
    id             BIGSERIAL PRIMARY KEY,
    application_id BIGINT NOT NULL REFERENCES {{applications_table}} (id),
    crawled_at     TIMESTAMPTZ NOT NULL,
    title          VARCHAR(255),
    score          DOUBLE PRECISION,
    ratings        BIGINT,
    reviews_count  BIGINT,
    installs_min   BIGINT,
    installs_real  BIGINT,
    histogram      BIGINT[],
    price          DOUBLE PRECISION,
    free           BOOLEAN,
    version        VARCHAR(64),
    updated_at     TIMESTAMPTZ,
    inserted_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT app_stats_natural_key UNIQUE (application_id, crawled_at)
);
-- The UNIQUE index leads with application_id, so it also serves the foreign key
-- (lookups and cascades from the applications table) without a second index.
COMMENT ON TABLE app_stats IS 'sluice: one row per app per crawl (topic app-stats)';
