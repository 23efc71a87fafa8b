//! A sink's `[[sink.route]]` entries (docs/sinks.md#routes): each route's condition and
//! its own table, columns, key and policy, the rest taken from its sink.

use serde::Deserialize;
use toml::{Table, Value};

use super::{At, RawConflict, columns_entry, conflict, mappings, updates};
use crate::model::{ColumnMapping, Constant, FieldPath, Sink};
use crate::problems::{MappingError, MappingProblem};
use crate::{SinkRoute, TableTemplate, Unrouted, When, WhenSource};

/// One `[[sink.route]]` without its `columns`: which records, and the table they go to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    /// The condition.
    when: RawWhen,
    /// The table, `[schema.]table` (placeholders allowed, as a sink's).
    table: String,
    /// The natural key (with `columns = "auto"`, default: the primary key).
    #[serde(default)]
    key: Vec<String>,
    /// What a second delivery of a key does.
    conflict: Option<RawConflict>,
    /// Mapped columns written on insert only.
    #[serde(default)]
    insert_only: Vec<String>,
    /// Table columns never written.
    #[serde(default)]
    never_written: Vec<String>,
}

/// `when = { field | header | key = "…", equals = … }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWhen {
    field: Option<String>,
    header: Option<String>,
    key: Option<String>,
    equals: Value,
}

/// A sink's settings its routes take from it, each route giving its own.
const ROUTE_OWN_KEYS: [&str; 6] = [
    "table",
    "columns",
    "key",
    "conflict",
    "insert_only",
    "never_written",
];

/// The sink's `route` entries, taken out of its table, once the keys a sink with routes
/// leaves to them (and `unrouted` without routes) are refused.
pub(super) fn take_routes(table: &mut Table, at: &At<'_>) -> Result<Vec<Value>, MappingError> {
    let routes = match table.remove("route") {
        None => Vec::new(),
        Some(Value::Array(routes)) => routes,
        Some(_) => {
            return Err(at.key(
                "route",
                "must be an array of tables `[[sink.route]]`".into(),
            ));
        }
    };
    if !routes.is_empty()
        && let Some(own) = ROUTE_OWN_KEYS.iter().find(|key| table.contains_key(**key))
    {
        return Err(at.invalid(MappingProblem::RouteOwnKey { key: own }));
    }
    if routes.is_empty() && table.contains_key("unrouted") {
        return Err(at.invalid(MappingProblem::UnroutedWithoutRoutes));
    }
    Ok(routes)
}

/// Each route of `routes` parsed and added to `parent`.
pub(super) fn add_routes(
    parent: &mut Sink,
    routes: Vec<Value>,
    at: &At<'_>,
) -> Result<(), MappingError> {
    for (index, value) in routes.into_iter().enumerate() {
        let route = format!("route[{}]", index + 1);
        let Value::Table(mut table) = value else {
            return Err(at.key(&route, "must be a table".into()));
        };
        let (columns, auto_columns) = columns_entry(table.remove("columns"))
            .map_err(|(key, message)| at.key(&format!("{route}.{key}"), message))?;
        let raw: RawRoute = Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| at.key(&route, e.message().to_owned()))?;
        let mapped = mappings(columns, &format!("{route}.columns")).map_err(|e| e.at(at))?;
        let routed = sink_route(parent, raw, mapped, auto_columns)
            .map_err(|problem| at.invalid(problem.in_route(format!("#{}", index + 1))))?;
        parent.routes.push(routed);
    }
    Ok(())
}

/// A route's sink: `parent` (topics, group, format, batches) with the route's table,
/// columns, key and policy.
fn sink_route(
    parent: &Sink,
    raw: RawRoute,
    columns: Vec<ColumnMapping>,
    auto_columns: bool,
) -> Result<SinkRoute, MappingProblem> {
    let when = when(raw.when)?;
    let updates = updates(auto_columns, &columns, &raw.key, &raw.insert_only);
    let table_template =
        TableTemplate::parse(&raw.table).map_err(|reason| MappingProblem::BadTableTemplate {
            table: raw.table.clone(),
            reason,
        })?;
    Ok(SinkRoute {
        when,
        sink: Sink {
            table: raw.table,
            table_template,
            conflict: conflict(raw.conflict, updates),
            key: raw.key,
            insert_only: raw.insert_only,
            never_written: raw.never_written,
            columns,
            auto_columns,
            routes: Vec::new(),
            unrouted: Unrouted::default(),
            ..parent.clone()
        },
    })
}

/// A route's condition: exactly one of `field`, `header`, `key`, and `equals` a string, an
/// integer or a boolean.
fn when(raw: RawWhen) -> Result<When, MappingProblem> {
    let bad = |reason: &str| MappingProblem::BadWhen {
        reason: reason.to_owned(),
    };
    let source = match (raw.field, raw.header, raw.key) {
        (Some(field), None, None) => WhenSource::Field(
            FieldPath::parse(&field).ok_or_else(|| bad("`field` is a path `a.b` of names"))?,
        ),
        (None, Some(header), None) if !header.is_empty() => WhenSource::Header(header),
        (None, Some(_), None) => return Err(bad("`header` names a header")),
        (None, None, Some(key)) if key.is_empty() => WhenSource::Key(None),
        (None, None, Some(key)) => WhenSource::Key(Some(
            FieldPath::parse(&key).ok_or_else(|| bad("`key` is a path `a.b` of names"))?,
        )),
        _ => return Err(bad("exactly one of `field`, `header`, `key` is required")),
    };
    let equals = match raw.equals {
        Value::String(text) => Constant::Text(text),
        Value::Integer(int) => Constant::Int(int),
        Value::Boolean(flag) => Constant::Bool(flag),
        _ => return Err(bad("`equals` is a string, an integer or a boolean")),
    };
    Ok(When { source, equals })
}
