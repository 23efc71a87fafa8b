-- reviews: one row per review, updated as it changes (docs/ARCHITECTURE.md#tables).
-- Natural key review_id. first_seen_at is set once; sentiment is never written by sluice.
CREATE TABLE reviews (
    id              BIGSERIAL PRIMARY KEY,
    review_id       VARCHAR(255) NOT NULL,
    application_id  BIGINT NOT NULL REFERENCES {{applications_table}} (id),
    user_name       VARCHAR(255),
    score           SMALLINT NOT NULL,
    content         TEXT,
    thumbs_up_count INTEGER NOT NULL,
    app_version     VARCHAR(64),
    reviewed_at     TIMESTAMPTZ NOT NULL,
    reply_content   TEXT,
    replied_at      TIMESTAMPTZ,
    last_synced_at  TIMESTAMPTZ NOT NULL,
    first_seen_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    sentiment       VARCHAR(32),
    CONSTRAINT reviews_natural_key UNIQUE (review_id)
);
-- PostgreSQL does not index a foreign key by itself.
CREATE INDEX reviews_application_id_idx ON reviews (application_id);
COMMENT ON TABLE reviews IS 'sluice: one row per review, newest crawl wins (topic reviews)';
