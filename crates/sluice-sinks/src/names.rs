//! Table and column names of declared sinks, and how every generated statement writes them.
//!
//! A name is taken exactly as the table has it in the catalog (`order`, `CamelCase`,
//! `unit price`): PostgreSQL folds an unquoted name to lower case, so every name is written
//! quoted, with `"` doubled inside — no name can end the identifier early, so none can inject
//! SQL, and a reserved word (`order`, `user`, `end`) is a plain name. A table is `[schema.]table`:
//! the first `.` separates the schema, so a table or schema name cannot hold a `.` itself.

/// Longest identifier PostgreSQL keeps (`NAMEDATALEN - 1` bytes); a longer one is truncated.
const MAX_NAME_BYTES: usize = 63;

/// A legal column (or schema, or table) name: 1–63 bytes, without U+0000.
pub fn is_column_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES && !name.contains('\0')
}

/// A legal `[schema.]table`: one or two legal names, neither holding a `.`.
pub fn is_table_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() <= 2 && parts.iter().all(|p| is_column_name(p))
}

/// A name as a quoted SQL identifier: `order` → `"order"`, `a"b` → `"a""b"`.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A `[schema.]table` as quoted SQL: `sales.Order Lines` → `"sales"."Order Lines"`.
pub fn quote_table(table: &str) -> String {
    match table.split_once('.') {
        Some((schema, name)) => format!("{}.{}", quote_ident(schema), quote_ident(name)),
        None => quote_ident(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_with_quotes_doubled() {
        assert_eq!(quote_ident("order"), "\"order\"");
        assert_eq!(quote_ident("CamelCase"), "\"CamelCase\"");
        assert_eq!(quote_ident("unit price"), "\"unit price\"");
        assert_eq!(
            quote_ident("x\"); DROP TABLE t; --"),
            "\"x\"\"); DROP TABLE t; --\""
        );
        assert_eq!(
            quote_table("sales.Order Lines"),
            "\"sales\".\"Order Lines\""
        );
        assert_eq!(quote_table("user"), "\"user\"");
    }

    #[test]
    fn legal_names_are_any_text_of_1_to_63_bytes_without_nul() {
        for name in ["order", "CamelCase", "unit price", "a\"b", &"x".repeat(63)] {
            assert!(is_column_name(name), "{name}");
        }
        for name in ["", "a\0b", &"x".repeat(64)] {
            assert!(!is_column_name(name), "{name:?}");
        }
        assert!(is_table_name("sales.Order Lines"));
        assert!(is_table_name("Events; DROP"));
        assert!(!is_table_name("a.b.c"));
        assert!(!is_table_name("a."));
        assert!(!is_table_name(""));
    }
}
