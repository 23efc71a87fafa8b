//! One pass over a record's JSON object that keeps only the top-level fields a sink reads.
//!
//! The decoder's common case: the record is a JSON object and every rule holds. Reading it
//! into a whole `serde_json::Value` tree builds a map of every key (an allocation each) and
//! every value the sink never reads. This pass streams the object instead: a key the sink
//! reads lands its value in the key's slot, any other value is read and dropped as it is read
//! (no tree is built), with the whole parse's checks: a number beyond f64, a lone surrogate
//! or nesting beyond 128 levels makes the record not JSON on both paths. A record the pass does not take — not an object, not JSON — returns `None`, and
//! the decoder reads it the full way, which names the reason.
//!
//! A field read as a NUMERIC also keeps its number's text, so the column gets the record's
//! digits, not those of the nearest f64.
//!
//! Duplicate keys: the last one wins, as in the full parse.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// The top-level field names a sink reads; slot `i` holds the value of `names[i]`.
#[derive(Debug, Clone, Default)]
pub(super) struct FieldSlots {
    names: Vec<String>,
    /// Per slot: whether its value's text is kept too (a NUMERIC, a NUMERIC[], JSON).
    texts: Vec<bool>,
    /// Per slot: whether only timestamp columns read its whole value, so a registry record's
    /// timestamp may be given as its instant (`decode/scanned.rs`).
    instants: Vec<bool>,
}

/// A scanned record: per slot, the field's value (`None`: absent) and, for a slot that keeps
/// it, the value's text as the record wrote it (borrowed from a JSON record, owned when an Avro
/// record's field was written out: `decode/scanned.rs`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Scanned<'t> {
    pub(super) values: Vec<Option<Value>>,
    pub(super) texts: Vec<Option<Cow<'t, str>>>,
    /// Per slot, a timestamp given as its instant (an Avro record's; empty for JSON).
    pub(super) instants: Vec<Option<DateTime<Utc>>>,
}

impl FieldSlots {
    /// The slot of top-level field `name`, added if new.
    pub(super) fn slot(&mut self, name: &str) -> usize {
        if let Some(slot) = self.position(name) {
            return slot;
        }
        self.names.push(name.to_owned());
        self.texts.push(false);
        self.instants.push(false);
        self.names.len() - 1
    }

    /// Keeps the number text of slot `slot`'s field.
    pub(super) fn keep_text(&mut self, slot: usize) {
        if let Some(keep) = self.texts.get_mut(slot) {
            *keep = true;
        }
    }

    /// Marks slot `slot` as read only by timestamp columns.
    pub(super) fn read_as_instant(&mut self, slot: usize) {
        if let Some(instant) = self.instants.get_mut(slot) {
            *instant = true;
        }
    }

    /// Per slot, whether only timestamp columns read it.
    pub(super) fn instants(&self) -> &[bool] {
        &self.instants
    }

    /// The slots' field names, slot by slot.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    /// Per slot, whether its value's text is kept.
    pub(super) fn texts(&self) -> &[bool] {
        &self.texts
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The values of the slots' fields in `text`, or `None` when `text` is not one JSON
    /// object.
    pub(super) fn scan<'t>(&self, text: &'t str) -> Option<Scanned<'t>> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let scanned = Scan(self).deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        Some(scanned)
    }
}

/// The seed of one object's scan.
struct Scan<'s>(&'s FieldSlots);

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = Scanned<'de>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = Scanned<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let slots = self.0.names.len();
        let mut scanned = Scanned {
            values: vec![None; slots],
            texts: vec![None; slots],
            instants: Vec::new(),
        };
        while let Some(slot) = map.next_key_seed(Key(self.0))? {
            let Some(slot) = slot.filter(|slot| *slot < slots) else {
                map.next_value_seed(Discard)?;
                continue;
            };
            if self.0.texts.get(slot) == Some(&true) {
                let raw: &'de RawValue = map.next_value()?;
                let text = raw.get();
                scanned.values[slot] = Some(serde_json::from_str(text).map_err(de::Error::custom)?);
                // A number, an array whose numbers are read from it (a NUMERIC[]), a JSON
                // column's value: its reader tells them apart.
                scanned.texts[slot] = Some(Cow::Borrowed(text));
            } else {
                scanned.values[slot] = Some(map.next_value()?);
                scanned.texts[slot] = None;
            }
        }
        Ok(scanned)
    }
}

/// A value read with every check of a full parse and kept nowhere.
struct Discard;

impl<'de> DeserializeSeed<'de> for Discard {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Discard {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Discard)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Discard)?.is_some() {
            map.next_value_seed(Discard)?;
        }
        Ok(())
    }
}

/// A key, as the slot it fills (`None`: a field the sink does not read); borrowed from the
/// input when it has no escapes.
struct Key<'s>(&'s FieldSlots);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Key<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.position(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slots(names: &[&str]) -> FieldSlots {
        let mut slots = FieldSlots::default();
        for name in names {
            slots.slot(name);
        }
        slots
    }

    #[test]
    fn keeps_the_fields_read_and_skips_the_rest() {
        let slots = slots(&["a", "c", "missing"]);
        let text = r#"{"a": 1, "b": {"deep": [1, 2, {"x": "y"}]}, "c": "t\"ext", "z": null}"#;
        assert_eq!(
            slots.scan(text).map(|s| s.values),
            Some(vec![Some(json!(1)), Some(json!("t\"ext")), None])
        );
    }

    #[test]
    fn an_escaped_key_still_finds_its_slot_and_the_last_duplicate_wins() {
        let slots = slots(&["ab"]);
        assert_eq!(
            slots.scan(r#"{"a\u0062": 1, "ab": 2}"#).map(|s| s.values),
            Some(vec![Some(json!(2))])
        );
    }

    #[test]
    fn what_is_not_one_object_is_left_to_the_full_parse() {
        let slots = slots(&["a"]);
        for text in [
            "[1]",
            "1",
            "null",
            r#"{"a": 1} x"#,
            r#"{"a": }"#,
            r#"{"a": NaN}"#,
            "",
        ] {
            assert_eq!(slots.scan(text), None, "{text}");
        }
        assert_eq!(
            slots.scan(r#" {"a": null} "#).map(|s| s.values),
            Some(vec![Some(Value::Null)])
        );
    }

    #[test]
    fn a_kept_slot_keeps_its_values_text_as_written() {
        let mut slots = slots(&["n", "m"]);
        slots.keep_text(0);
        let text = r#"{"n": 12345678901234.5678, "m": 1.5}"#;
        let scanned = slots.scan(text).unwrap();
        assert_eq!(scanned.texts, [Some("12345678901234.5678".into()), None]);
        assert_eq!(scanned.values[1], Some(json!(1.5)));
        let scanned = slots.scan(r#"{"n": "12"}"#).unwrap();
        assert_eq!(
            (scanned.texts[0].as_deref(), &scanned.values[0]),
            (Some(r#""12""#), &Some(json!("12")))
        );
    }

    #[test]
    fn a_slot_is_added_once() {
        let mut slots = FieldSlots::default();
        assert_eq!(
            (slots.slot("a"), slots.slot("b"), slots.slot("a")),
            (0, 1, 0)
        );
    }
}
