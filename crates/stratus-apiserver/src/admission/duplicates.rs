//! Duplicate fields in a JSON request body (`{"name": "a", "name": "b"}`):
//! JSON decoding keeps the last, and kube-apiserver reports them as
//! `fieldValidation` says (a warning, or under `Strict` a 400), like
//! unknown fields. Found in one pass over the bytes, without building the
//! document.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

struct Walk<'a> {
    path: String,
    out: &'a RefCell<Vec<String>>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let path = join(&self.path, &key);
            if seen.contains(&key) {
                self.out.borrow_mut().push(path.clone());
            } else {
                seen.push(key);
            }
            map.next_value_seed(Walk {
                path,
                out: self.out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                out: self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}

/// The paths of the duplicated fields of a JSON document
/// (`metadata.name`, `spec.containers[0].image`); none for a body that is
/// not JSON (its parse error is reported elsewhere).
pub(crate) fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let out = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let walk = Walk {
        path: String::new(),
        out: &out,
    };
    if walk.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    out.into_inner()
}

#[cfg(test)]
mod tests {
    use super::duplicate_fields;

    #[test]
    fn duplicates_are_found_with_their_paths() {
        assert!(duplicate_fields(br#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#).is_empty());
        assert_eq!(
            duplicate_fields(
                br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"x": [{"k": 1, "k": 2}]}, "spec": {}}"#
            ),
            ["metadata.name", "spec.x[0].k", "spec"]
        );
        assert_eq!(
            duplicate_fields(br#"{"a\u0062": 1, "ab": 2}"#),
            ["ab"],
            "escaped keys compare decoded"
        );
        assert!(duplicate_fields(b"not json").is_empty());
    }
}
