//! One pass over a record's JSON object that keeps only the top-level fields a sink reads.
//!
//! The decoder's common case: the record is a JSON object and every rule holds. Reading it
//! into a whole `serde_json::Value` tree builds a map of every key (an allocation each) and
//! every value the sink never reads. This pass streams the object instead: a key the sink
//! reads lands its value in the key's slot, any other value is skipped (checked for syntax
//! only). A record the pass does not take — not an object, not JSON — returns `None`, and
//! the decoder reads it the full way, which names the reason.
//!
//! Duplicate keys: the last one wins, as in the full parse.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// The top-level field names a sink reads; slot `i` holds the value of `names[i]`.
#[derive(Debug, Clone, Default)]
pub(super) struct FieldSlots {
    names: Vec<String>,
}

impl FieldSlots {
    /// The slot of top-level field `name`, added if new.
    pub(super) fn slot(&mut self, name: &str) -> usize {
        if let Some(slot) = self.position(name) {
            return slot;
        }
        self.names.push(name.to_owned());
        self.names.len() - 1
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The values of the slots' fields in `text` (`None` in a slot: the field is absent), or
    /// `None` when `text` is not one JSON object.
    pub(super) fn scan(&self, text: &str) -> Option<Vec<Option<Value>>> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let values = Scan(self).deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        Some(values)
    }
}

/// The seed of one object's scan.
struct Scan<'s>(&'s FieldSlots);

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = Vec<Option<Value>>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = Vec<Option<Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = vec![None; self.0.names.len()];
        while let Some(slot) = map.next_key_seed(Key(self.0))? {
            match slot.and_then(|slot| values.get_mut(slot)) {
                Some(value) => *value = Some(map.next_value::<Value>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(values)
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
            slots.scan(text),
            Some(vec![Some(json!(1)), Some(json!("t\"ext")), None])
        );
    }

    #[test]
    fn an_escaped_key_still_finds_its_slot_and_the_last_duplicate_wins() {
        let slots = slots(&["ab"]);
        assert_eq!(
            slots.scan(r#"{"a\u0062": 1, "ab": 2}"#),
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
            slots.scan(r#" {"a": null} "#),
            Some(vec![Some(Value::Null)])
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
