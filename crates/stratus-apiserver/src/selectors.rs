//! Label and field selectors, parsed as the API server parses them.

use std::borrow::Cow;

use serde_json::Value;

use crate::admission::validation::{label_key_errors, label_value_errors};

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

/// A token of the label selector language, as kube's lexer makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    ClosePar,
    Comma,
    Not,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosePar,
        "," => Token::Comma,
        "!" => Token::Not,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The tokens of `input`, ending with `Token::End`. Operators are the
/// longest run of symbols that is one; identifiers run to a symbol or a
/// blank.
fn lex(input: &str) -> Vec<(Token, &str)> {
    let b = input.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        while pos < b.len() && matches!(b[pos], b' ' | b'\t' | b'\r' | b'\n') {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Token::End, ""));
            return out;
        }
        let start = pos;
        if special(b[pos]) {
            let mut last = None;
            while pos < b.len() && special(b[pos]) {
                match keyword(&input[start..=pos]) {
                    Some(t) => last = Some((t, pos + 1)),
                    None if last.is_some() => break,
                    None => {}
                }
                pos += 1;
            }
            // Every single symbol is a token, so `last` is set.
            let (token, end) = last.unwrap_or((Token::Identifier, pos));
            pos = end;
            out.push((token, &input[start..end]));
        } else {
            while pos < b.len()
                && !special(b[pos])
                && !matches!(b[pos], b' ' | b'\t' | b'\r' | b'\n')
            {
                pos += 1;
            }
            let word = &input[start..pos];
            let token = match keyword(word) {
                Some(t @ (Token::In | Token::NotIn)) => t,
                _ => Token::Identifier,
            };
            out.push((token, word));
        }
    }
}

/// kube's recursive-descent parser over the tokens, with its messages.
struct Parser<'a> {
    tokens: Vec<(Token, &'a str)>,
    at: usize,
}

impl<'a> Parser<'a> {
    /// The next token; in a value position `in` and `notin` are words.
    fn peek(&self, values: bool) -> (Token, &'a str) {
        let (t, lit) = self.tokens[self.at.min(self.tokens.len() - 1)];
        match t {
            Token::In | Token::NotIn if values => (Token::Identifier, lit),
            _ => (t, lit),
        }
    }

    fn next(&mut self, values: bool) -> (Token, &'a str) {
        let t = self.peek(values);
        self.at += 1;
        t
    }

    fn parse(&mut self) -> Result<Vec<(String, LabelOp)>, String> {
        let mut out = Vec::new();
        loop {
            match self.peek(true) {
                (Token::Identifier | Token::Not, _) => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    out.push(r);
                    match self.next(true) {
                        (Token::End, _) => return Ok(out),
                        (Token::Comma, _) => {
                            let (t, lit) = self.peek(true);
                            if !matches!(t, Token::Identifier | Token::Not) {
                                return Err(format!(
                                    "found '{lit}', expected: identifier after ','"
                                ));
                            }
                        }
                        (_, lit) => {
                            return Err(format!("found '{lit}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                (Token::End, _) => return Ok(out),
                (_, lit) => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<(String, LabelOp), String> {
        let (mut t, mut key) = self.next(true);
        let negated = t == Token::Not;
        if negated {
            (t, key) = self.next(true);
        }
        if t != Token::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let errs = label_key_errors(key);
        if !errs.is_empty() {
            return Err(format!(": Invalid value: {key:?}: {}", errs.join("; ")));
        }
        let unary = matches!(self.peek(true).0, Token::End | Token::Comma);
        if negated || unary {
            return Ok((
                key.to_owned(),
                if negated {
                    LabelOp::DoesNotExist
                } else {
                    LabelOp::Exists
                },
            ));
        }
        let op = match self.next(false) {
            (t @ (Token::In | Token::NotIn), _) => t,
            (
                t @ (Token::Equals
                | Token::DoubleEquals
                | Token::NotEquals
                | Token::GreaterThan
                | Token::LessThan),
                _,
            ) => t,
            (_, lit) => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let values = if matches!(op, Token::In | Token::NotIn) {
            self.value_set()?
        } else {
            vec![self.exact_value()?]
        };
        // `NewRequirement`'s checks, all of them, then aggregated.
        let mut errs = Vec::new();
        let mut number = None;
        if matches!(op, Token::GreaterThan | Token::LessThan) {
            match values[0].parse::<i64>() {
                Ok(n) => number = Some(n),
                Err(_) => errs.push(format!(
                    "values[0]: Invalid value: {:?}: for 'Gt', 'Lt' operators, the value must be an integer",
                    values[0]
                )),
            }
        }
        for (i, v) in values.iter().enumerate() {
            let why = label_value_errors(v);
            if !why.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {v:?}: {}",
                    why.join("; ")
                ));
            }
        }
        match errs.len() {
            0 => {}
            1 => return Err(errs.remove(0)),
            _ => return Err(format!("[{}]", errs.join(", "))),
        }
        let value = || values[0].clone();
        let op = match (op, number) {
            (Token::In, _) => LabelOp::In(values),
            (Token::NotIn, _) => LabelOp::NotIn(values),
            (Token::NotEquals, _) => LabelOp::NotEquals(value()),
            (Token::GreaterThan, Some(n)) => LabelOp::Gt(n),
            (Token::LessThan, Some(n)) => LabelOp::Lt(n),
            _ => LabelOp::Equals(value()),
        };
        Ok((key.to_owned(), op))
    }

    /// `(a, b, ...)`: empty members are the empty value.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (t, lit) = self.next(true);
        if t != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (t, lit) = self.peek(true);
        let mut set: Vec<String> = Vec::new();
        let insert = |v: &str, set: &mut Vec<String>| {
            if !set.iter().any(|s| s == v) {
                set.push(v.to_owned());
            }
        };
        match t {
            Token::ClosePar => {
                self.at += 1;
                return Ok(vec![String::new()]);
            }
            Token::Identifier | Token::Comma => {}
            _ => return Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
        loop {
            match self.next(true) {
                (Token::Identifier, word) => {
                    insert(word, &mut set);
                    match self.peek(true) {
                        (Token::Comma, _) => continue,
                        (Token::ClosePar, _) => break,
                        (_, lit2) => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                (Token::Comma, _) => {
                    if set.is_empty() {
                        insert("", &mut set);
                    }
                    match self.peek(true).0 {
                        Token::ClosePar => {
                            insert("", &mut set);
                            break;
                        }
                        Token::Comma => insert("", &mut set),
                        _ => {}
                    }
                }
                (_, lit) => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
        if self.next(true).0 != Token::ClosePar {
            return Err(format!("found '{lit}', expected: ')'"));
        }
        set.sort();
        Ok(set)
    }

    /// The one value of `=`, `==`, `!=`, `<` or `>` (empty before a comma
    /// or the end).
    fn exact_value(&mut self) -> Result<String, String> {
        if matches!(self.peek(true).0, Token::End | Token::Comma) {
            return Ok(String::new());
        }
        match self.next(true) {
            (Token::Identifier, word) => Ok(word.to_owned()),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3` as kube-apiserver
    /// does, failing with its messages.
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        let mut parser = Parser {
            tokens: lex(input),
            at: 0,
        };
        Ok(Self {
            requirements: parser.parse()?,
        })
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

    /// The value an equality term requires of `field`, if one does.
    pub(crate) fn required(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, negate, _)| f == field && !negate)
            .map(|(_, _, v)| v.as_str())
    }

    /// True if every term holds for the object whose field values `value`
    /// gives (empty for a field the object has not).
    pub(crate) fn matches<'a>(&self, value: impl Fn(&str) -> Cow<'a, str>) -> bool {
        self.terms
            .iter()
            .all(|(field, negate, expected)| (value(field) == expected.as_str()) != *negate)
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
    use std::collections::BTreeMap;

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
        // `in ()` holds the empty value.
        let empty = labels(json!({"a": ""}));
        assert!(
            LabelSelector::parse("a in ()")
                .unwrap()
                .matches(Some(&empty))
        );
    }

    #[test]
    fn label_selector_errors_are_kubes() {
        let e = |s: &str| LabelSelector::parse(s).unwrap_err();
        assert_eq!(
            e("app===x!"),
            "unable to parse requirement: found '=', expected: identifier"
        );
        assert_eq!(e("a,,b"), "found ',', expected: identifier after ','");
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(
            e("a in x"),
            "unable to parse requirement: found 'x' expected: '('"
        );
        assert_eq!(
            e("a>x"),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(e("-a=b").starts_with(
            "unable to parse requirement: : Invalid value: \"-a\": name part must consist of"
        ));
    }

    #[test]
    fn invalid_label_selectors() {
        for bad in [
            "a=b=c",
            "a in x",
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
        let value = |f: &str| Cow::Owned(fields.get(f).cloned().unwrap_or_default());
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(value);
        assert!(m("spec.nodeName=n1"));
        assert!(m("spec.nodeName==n1,status.phase!=Pending"));
        assert!(!m("spec.nodeName=n2"));
        assert!(m("spec.schedulerName="), "absent fields are empty");
        let escaped = FieldSelector::parse("metadata.name=a\\,b").unwrap();
        assert!(
            escaped.matches(|f: &str| Cow::Borrowed(if f == "metadata.name" { "a,b" } else { "" }))
        );
        assert!(FieldSelector::parse("nonsense").is_err());
        assert!(FieldSelector::parse("=x").is_err());
        assert!(FieldSelector::parse("a=\\q").is_err());
    }
}
