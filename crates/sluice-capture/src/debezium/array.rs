//! PostgreSQL's array text output (`{a,"b c",NULL}`, `[0:1]={1,2}`) read as its elements:
//! what an array column's value is made of before each element becomes JSON by its element
//! type (docs/capture.md#values). A sub-array (a multi-dimensional value) is a NULL element,
//! as Debezium writes it.

/// The elements of an array's text, `None` for an SQL NULL or a sub-array.
pub(super) fn elements(text: &str) -> Result<Vec<Option<String>>, &'static str> {
    // Bounds other than 1 are written before the value: `[0:2]={…}`.
    let body = match text.strip_prefix('[') {
        Some(_) => text.split_once('=').ok_or("bounds without a value")?.1,
        None => text,
    };
    let inner = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or("not {…}")?;
    let mut out = Vec::new();
    if inner.is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        match chars.peek() {
            // A multi-dimensional array: Debezium's element converter gets each sub-array
            // and writes null for it; so does this, rather than stop the capture.
            Some('{') => {
                skip_sub_array(&mut chars)?;
                out.push(None);
            }
            Some('"') => {
                chars.next();
                let mut element = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => element.push(chars.next().ok_or("an unfinished escape")?),
                        Some('"') => break,
                        Some(c) => element.push(c),
                        None => return Err("an unfinished quote"),
                    }
                }
                out.push(Some(element));
            }
            _ => {
                let mut element = String::new();
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    element.push(c);
                    chars.next();
                }
                // array_out quotes an element whose text is NULL; unquoted, it is the NULL.
                out.push((element != "NULL").then_some(element));
            }
        }
        match chars.next() {
            Some(',') => {}
            None => return Ok(out),
            Some(_) => return Err("text after a quoted element"),
        }
    }
}

/// Consumes one balanced `{…}` (quotes and escapes inside it respected).
fn skip_sub_array(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<(), &'static str> {
    let (mut depth, mut quoted) = (0usize, false);
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('\\', true) => {
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            ('{', false) => depth += 1,
            ('}', false) => {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
            _ => {}
        }
    }
    Err("an unfinished sub-array")
}

#[cfg(test)]
mod tests {
    use super::elements;

    fn some(items: &[&str]) -> Vec<Option<String>> {
        items.iter().map(|s| Some((*s).to_owned())).collect()
    }

    #[test]
    fn array_out_is_read_back() {
        assert_eq!(elements("{}"), Ok(vec![]));
        assert_eq!(elements("{1,2,3}"), Ok(some(&["1", "2", "3"])));
        assert_eq!(
            elements(r#"{a,"b c","\"q\"",NULL,"NULL","","x\\y"}"#),
            Ok(vec![
                Some("a".into()),
                Some("b c".into()),
                Some("\"q\"".into()),
                None,
                Some("NULL".into()),
                Some(String::new()),
                Some("x\\y".into()),
            ])
        );
        assert_eq!(elements(r#"{"a,b","{c}"}"#), Ok(some(&["a,b", "{c}"])));
        assert_eq!(elements("[0:1]={7,8}"), Ok(some(&["7", "8"])));
    }

    #[test]
    fn a_sub_array_is_a_null_as_debezium_writes_it() {
        assert_eq!(elements("{{1,2},{3,4}}"), Ok(vec![None, None]));
        assert_eq!(elements(r#"{{"}",b},{c}}"#), Ok(vec![None, None]));
    }

    #[test]
    fn what_is_no_array_is_refused() {
        assert!(elements("{{1,2}").is_err());
        assert!(elements("1,2").is_err());
        assert!(elements(r#"{"a}"#).is_err());
        assert!(elements(r#"{"a"b}"#).is_err());
    }
}
