-- One statement per batch. Natural key analysis_id: DO NOTHING (docs/ARCHITECTURE.md#tables).
-- domains arrives as one JSON array per row (NULL allowed), rebuilt in order.
INSERT INTO network_metrics (
    analysis_id, application_id, captured_at, duration_seconds, packet_count, total_bytes,
    bytes_sent, bytes_received, dns_queries, tls_handshakes, plaintext_http_requests, domains
)
SELECT analysis_id, application_id, captured_at, duration_seconds, packet_count, total_bytes,
       bytes_sent, bytes_received, dns_queries, tls_handshakes, plaintext_http_requests,
       CASE WHEN domains IS NULL THEN NULL ELSE ARRAY(
           SELECT e.value FROM jsonb_array_elements_text(domains) WITH ORDINALITY AS e(value, n)
           ORDER BY e.n) END
FROM UNNEST(
    $1::uuid[], $2::bigint[], $3::timestamptz[], $4::float8[], $5::bigint[], $6::bigint[],
    $7::bigint[], $8::bigint[], $9::int[], $10::int[], $11::int[], $12::jsonb[]
) AS t(analysis_id, application_id, captured_at, duration_seconds, packet_count, total_bytes,
       bytes_sent, bytes_received, dns_queries, tls_handshakes, plaintext_http_requests, domains)
ON CONFLICT (analysis_id) DO NOTHING
RETURNING TRUE AS inserted
