//! Untrusted bytes as the page shows them. The templates escape HTML; this module makes the
//! rest visible: invalid UTF-8 becomes U+FFFD (or the bytes are shown as hex), and every
//! control character (ESC of a terminal sequence, a bidirectional override) becomes a
//! visible escape such as `\u{1b}`, so a payload cannot hide or reorder what is shown.

use sluice_core::untrusted::escape_controls;
use std::fmt::Write;

/// One line of text: lossy UTF-8, every control character escaped (newlines too).
pub fn line(bytes: &[u8]) -> String {
    escape_controls(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Multi-line text: lossy UTF-8, line breaks kept, every other control character escaped.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .split('\n')
        .map(|l| escape_controls(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A header's value on one line: as [`line()`] when it is UTF-8, else its bytes in hex
/// (`ff 00 41`), flagged so the page says it is hex.
pub fn header_value(bytes: &[u8], hex_view: bool) -> (String, bool) {
    match std::str::from_utf8(bytes) {
        Ok(text) if !hex_view => (escape_controls(text).into_owned(), false),
        _ => {
            let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            (hex.join(" "), true)
        }
    }
}

/// A hex dump: offset, 16 bytes in hex, and their printable ASCII (others as `.`).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 + 16);
    for (row, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", row * 16);
        for i in 0..16 {
            match chunk.get(i) {
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(line(b"a\x1b[31mb\nc"), "a\\u{1b}[31mb\\nc");
        assert_eq!(text(b"a\x1b]0;x\x07\nb"), "a\\u{1b}]0;x\\u{7}\nb");
        assert_eq!(line(b"\xff<"), "\u{fffd}<");
        assert_eq!(line("\u{202e}evil".as_bytes()), "\\u{202e}evil");
    }

    #[test]
    fn a_header_value_is_text_or_hex() {
        assert_eq!(
            header_value(b"a\x1b[31m", false),
            ("a\\u{1b}[31m".into(), false)
        );
        assert_eq!(header_value(b"\xff\x00<", false), ("ff 00 3c".into(), true));
        assert_eq!(header_value(b"ok", true), ("6f 6b".into(), true));
        assert_eq!(header_value(b"", false), (String::new(), false));
    }

    #[test]
    fn hex_shows_every_byte() {
        let dump = hex(b"<script>\x1b\x00");
        assert!(dump.starts_with("00000000  3c 73 63 72 69 70 74 3e 1b 00"));
        assert!(dump.trim_end().ends_with("<script>.."));
        assert_eq!(hex(b""), "");
        assert_eq!(hex(&[0u8; 17]).lines().count(), 2);
    }
}
