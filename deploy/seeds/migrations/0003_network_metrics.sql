-- network_metrics: one row per analysed capture (docs/ARCHITECTURE.md#tables).
-- Natural key analysis_id: a re-run of the analysis gets a new UUID.
CREATE TABLE network_metrics (
    id                      BIGSERIAL PRIMARY KEY,
    analysis_id             UUID NOT NULL,
    application_id          BIGINT NOT NULL REFERENCES {{applications_table}} (id),
    captured_at             TIMESTAMPTZ NOT NULL,
    duration_seconds        DOUBLE PRECISION NOT NULL,
    packet_count            BIGINT NOT NULL,
    total_bytes             BIGINT NOT NULL,
    bytes_sent              BIGINT,
    bytes_received          BIGINT,
    dns_queries             INTEGER,
    tls_handshakes          INTEGER,
    plaintext_http_requests INTEGER,
    domains                 TEXT[],
    inserted_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT network_metrics_natural_key UNIQUE (analysis_id)
);
CREATE INDEX network_metrics_application_id_idx ON network_metrics (application_id);
COMMENT ON TABLE network_metrics IS 'sluice: one row per analysed capture (topic network-metrics)';
