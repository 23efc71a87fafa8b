//! Strings and JSON documents: multibyte, escapes, quotes, characters a naive writer breaks.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::types::{Known, known_failing};

/// Characters of generated text: ASCII, multibyte (2, 3 and 4 bytes), a combining accent,
/// quotes, backslashes, controls, array-literal punctuation, separators.
const CHARS: &[char] = &[
    'a',
    'b',
    'Z',
    '0',
    '9',
    ' ',
    '-',
    'é',
    'ß',
    'Ω',
    '日',
    '本',
    '😀',
    '🎉',
    '"',
    '\'',
    '\\',
    '/',
    '\n',
    '\t',
    '\r',
    '\u{1}',
    '\u{1f}',
    '\u{7f}',
    '{',
    '}',
    ',',
    '[',
    ']',
    '\u{301}',
    '\u{2028}',
    '\u{feff}',
    '\u{10ffff}',
];

/// Text of at most `limit` characters (`None`: no limit, sometimes long), often exactly at
/// the limit, sometimes empty or a word a parser might take for something else.
pub fn random_text(rng: &mut StdRng, limit: Option<usize>) -> String {
    if rng.random_bool(0.08) {
        let word = *["", "NULL", "null", "true", "0", " "]
            .choose(rng)
            .expect("words");
        if limit.is_none_or(|n| word.chars().count() <= n) {
            return word.to_owned();
        }
    }
    let len = match limit {
        Some(n) if rng.random_bool(0.4) => n,
        Some(n) => rng.random_range(0..=n),
        None if rng.random_bool(0.05) => rng.random_range(1000..4000),
        None => rng.random_range(0..30),
    };
    (0..len)
        .map(|_| *CHARS.choose(rng).expect("chars"))
        .collect()
}

/// `text` as a JSON string, each character written raw or escaped at random (astral ones as
/// surrogate pairs).
pub fn json_string(text: &str, rng: &mut StdRng) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if rng.random_bool(0.5) => out.push_str("\\n"),
            '\t' if rng.random_bool(0.5) => out.push_str("\\t"),
            '/' if rng.random_bool(0.5) => out.push_str("\\/"),
            c if u32::from(c) < 0x20 || rng.random_bool(0.1) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON document (never more than three levels deep), with random whitespace; its
/// numbers are ones an f64 holds exactly as written.
pub fn json_doc(rng: &mut StdRng, depth: usize) -> String {
    let ws = |rng: &mut StdRng| *["", " ", "\n  ", "\t"].choose(rng).expect("spaces");
    let kinds = if depth >= 3 { 4 } else { 6 };
    match rng.random_range(0..kinds) {
        0 => (*["true", "false", "null"].choose(rng).expect("literals")).to_owned(),
        1 => (*[
            "0",
            "-0",
            "1",
            "-17",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615",
        ]
        .choose(rng)
        .expect("integers"))
        .to_owned(),
        // Known failing: digits an f64 does not hold are rounded to it.
        2 if known_failing(Known::JsonDigits) && rng.random_bool(0.3) => (*[
            "12345678901234567890123",
            "0.1000000000000000055511151231257827",
            "-9223372036854775809",
        ]
        .choose(rng)
        .expect("long numbers"))
        .to_owned(),
        2 => (*["1.5", "-0.25", "1e2", "3.14159", "2.5E-3", "100.0"]
            .choose(rng)
            .expect("decimals"))
        .to_owned(),
        3 => json_string(&random_text(rng, Some(12)), rng),
        4 => {
            let items: Vec<String> = (0..rng.random_range(0..4))
                .map(|_| format!("{}{}", ws(rng), json_doc(rng, depth + 1)))
                .collect();
            format!("[{}{}]", items.join(","), ws(rng))
        }
        _ => {
            let members: Vec<String> = (0..rng.random_range(0..4))
                .map(|i| {
                    let key = format!("{}{i}", random_text(rng, Some(4)));
                    format!(
                        "{}{}:{}{}",
                        ws(rng),
                        json_string(&key, rng),
                        ws(rng),
                        json_doc(rng, depth + 1)
                    )
                })
                .collect();
            format!("{{{}{}}}", members.join(","), ws(rng))
        }
    }
}
