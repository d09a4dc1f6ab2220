//! Label and field selectors, parsed as the API server parses them.

use std::collections::BTreeMap;

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<(String, LabelOp)>,
}

fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

fn valid_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && value
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && value
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric()))
}

/// Split on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3`.
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        for raw in split_top_level(input) {
            let part = raw.trim();
            if part.is_empty() {
                return Err(format!(
                    "unable to parse requirement: found '', expected: identifier in {input:?}"
                ));
            }
            let req = Self::parse_requirement(part)
                .ok_or_else(|| format!("unable to parse requirement: {part:?}"))?;
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    fn parse_requirement(part: &str) -> Option<(String, LabelOp)> {
        if let Some(key) = part.strip_prefix('!') {
            let key = key.trim();
            return valid_label_key(key).then(|| (key.to_owned(), LabelOp::DoesNotExist));
        }
        for (op, build) in [
            ("!=", LabelOp::NotEquals as fn(String) -> LabelOp),
            ("==", LabelOp::Equals),
            ("=", LabelOp::Equals),
        ] {
            if let Some((k, v)) = part.split_once(op) {
                let (k, v) = (k.trim(), v.trim());
                return (valid_label_key(k) && valid_label_value(v))
                    .then(|| (k.to_owned(), build(v.to_owned())));
            }
        }
        for (op, is_gt) in [(">", true), ("<", false)] {
            if let Some((k, v)) = part.split_once(op) {
                let (k, v) = (k.trim(), v.trim());
                let n: i64 = v.parse().ok()?;
                return valid_label_key(k).then(|| {
                    (
                        k.to_owned(),
                        if is_gt {
                            LabelOp::Gt(n)
                        } else {
                            LabelOp::Lt(n)
                        },
                    )
                });
            }
        }
        let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
        if words.len() == 2 {
            let key = words[0].trim();
            let rest = words[1].trim();
            let (negate, list) = if let Some(l) = rest.strip_prefix("notin") {
                (true, l)
            } else if let Some(l) = rest.strip_prefix("in") {
                (false, l)
            } else {
                return None;
            };
            let list = list.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<String> = list
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect();
            if !valid_label_key(key) || values.iter().any(|v| !valid_label_value(v)) {
                return None;
            }
            if !negate && values.is_empty() {
                return None;
            }
            return Some((
                key.to_owned(),
                if negate {
                    LabelOp::NotIn(values)
                } else {
                    LabelOp::In(values)
                },
            ));
        }
        valid_label_key(part).then(|| (part.to_owned(), LabelOp::Exists))
    }

    /// True if `labels` satisfy every requirement.
    pub(crate) fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let value = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                LabelOp::Equals(v) => value == Some(v.as_str()),
                LabelOp::NotEquals(v) => value != Some(v.as_str()),
                LabelOp::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::NotIn(vs) => value.is_none_or(|x| !vs.iter().any(|v| v == x)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::Gt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                LabelOp::Lt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// A parsed field selector: `field=value` / `field!=value` terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence {other:?}"
                    ));
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Split on unescaped `sep`.
fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

impl FieldSelector {
    /// Parse `a=b,c!=d` (with `\` escapes).
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        for part in split_unescaped(input, ',') {
            let part = part.trim();
            let (field, negate, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ));
            };
            if field.trim().is_empty() {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ));
            }
            terms.push((field.trim().to_owned(), negate, unescape(value)?));
        }
        Ok(Self { terms })
    }

    /// The fields the selector names.
    pub(crate) fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|(f, _, _)| f.as_str())
    }

    /// True if every term holds for the object's field values.
    pub(crate) fn matches(&self, fields: &BTreeMap<&'static str, String>) -> bool {
        self.terms.iter().all(|(field, negate, value)| {
            let actual = fields.get(field.as_str()).map(String::as_str).unwrap_or("");
            (actual == value) != *negate
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Whether a label selector object (`matchLabels` / `matchExpressions`,
/// as in a PodDisruptionBudget or an aggregation rule) matches `labels`; an
/// empty selector matches everything.
pub(crate) fn object_selector_matches(
    selector: &Value,
    labels: Option<&serde_json::Map<String, Value>>,
) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs_ok = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                    .unwrap_or_default();
                match e
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                {
                    "In" => label(key).is_some_and(|v| values.contains(&v)),
                    "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                    "Exists" => label(key).is_some(),
                    "DoesNotExist" => label(key).is_none(),
                    _ => false,
                }
            })
        });
    labels_ok && exprs_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn every_label_operator() {
        let l = labels(json!({"app": "web", "tier": "front", "rank": "5"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("app!=db"));
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web)"));
        assert!(m("missing notin (x)"));
        assert!(m("app"));
        assert!(!m("!app"));
        assert!(m("!missing"));
        assert!(m("rank>3,rank<6"));
        assert!(!m("rank>5"));
        assert!(m("app=web,tier in (front),!missing"));
        assert!(m(""));
        assert!(
            !LabelSelector::parse("missing in (a)")
                .unwrap()
                .matches(None)
        );
        assert!(LabelSelector::parse("missing!=a").unwrap().matches(None));
    }

    #[test]
    fn invalid_label_selectors() {
        for bad in [
            "a=b=c",
            "a in x",
            "a in ()",
            "=b",
            "a,,b",
            "a b",
            "-a=b",
            "a>x",
            "a in (b c)",
            "a=-b",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors() {
        let fields = BTreeMap::from([
            ("spec.nodeName", "n1".to_owned()),
            ("status.phase", "Running".to_owned()),
        ]);
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&fields);
        assert!(m("spec.nodeName=n1"));
        assert!(m("spec.nodeName==n1,status.phase!=Pending"));
        assert!(!m("spec.nodeName=n2"));
        assert!(m("spec.schedulerName="), "absent fields are empty");
        let escaped = FieldSelector::parse("metadata.name=a\\,b").unwrap();
        assert!(escaped.matches(&BTreeMap::from([("metadata.name", "a,b".to_owned())])));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert!(FieldSelector::parse("=x").is_err());
        assert!(FieldSelector::parse("a=\\q").is_err());
    }
}
