//! The table the exactly-once tests apply records to: `counted`, whose trigger logs every
//! applied row into `applications`, and its always-update mapping (`{prefix}-counted`).

/// The tables and the trigger.
pub const DDL: &str = r"
    CREATE TABLE counted (id BIGINT PRIMARY KEY, v BIGINT NOT NULL);
    CREATE TABLE applications (id BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
    CREATE FUNCTION log_application() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO applications (id) VALUES (NEW.id);
        RETURN NEW;
    END $$;
    CREATE TRIGGER counted_applied AFTER INSERT OR UPDATE ON counted
        FOR EACH ROW EXECUTE FUNCTION log_application();";

/// The sink: always-update, 500-record batches.
pub const MAPPING: &str = r#"
[[sink]]
name = "counted"
topic = "{prefix}-counted"
table = "counted"
key = ["id"]
conflict = "always-update"
batch_size = 500
[sink.columns]
id = { field = "id" }
v = { field = "v" }
"#;

/// Records `ids` for the counted sink: key and value carry the id.
pub fn records(ids: std::ops::Range<i64>) -> Vec<sluice_testkit::RawRecord> {
    ids.map(|id| {
        (
            Some(id.to_string().into_bytes()),
            Some(format!(r#"{{"id": {id}, "v": {id}}}"#).into_bytes()),
        )
    })
    .collect()
}

/// [`DDL`] with a statement trigger that makes every batch's transaction last at least
/// `seconds` (the longer a batch is in flight, the likelier a rebalance meets one).
pub fn slow_ddl(seconds: f64) -> String {
    format!(
        "{DDL}
        CREATE FUNCTION slow_batch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$;
        CREATE TRIGGER counted_slow AFTER INSERT OR UPDATE ON counted
            FOR EACH STATEMENT EXECUTE FUNCTION slow_batch();"
    )
}
