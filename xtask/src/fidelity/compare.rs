//! How two answers are compared: the fields masked because they differ between any two servers, and the first difference.

use super::*;

/// Fields whose values differ between any two servers (or runs).
const MASKED: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "lastTransitionTime",
    "lastHeartbeatTime",
    "lastProbeTime",
    "lastUpdateTime",
    "continue",
    "clusterIP",
    "clusterIPs",
    "nodePort",
    "remainingItemCount",
    "generateName",
];

fn mask(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Some(masked) = mask_uids(s) {
                *s = masked;
            }
            if let Some(masked) = mask_current_revision(s) {
                *s = masked;
            }
        }
        Value::Object(map) => {
            let generated = map.contains_key("generateName");
            for (key, v) in map.iter_mut() {
                if MASKED.contains(&key.as_str()) || (generated && key == "name") {
                    *v = json!("<masked>");
                } else {
                    mask(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        _ => {}
    }
}

/// `s` with every UID in it (8-4-4-4-12 hex digits) masked, or `None`
/// when it holds none: error messages quote the UIDs they compare.
fn mask_uids(s: &str) -> Option<String> {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = s.as_bytes();
    let is_uid = |at: usize| {
        let mut i = at;
        for (n, len) in SHAPE.iter().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'-') {
                    return false;
                }
                i += 1;
            }
            for _ in 0..*len {
                if !bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    return false;
                }
                i += 1;
            }
        }
        true
    };
    let mut out = String::new();
    let (mut i, mut last, mut found) = (0, 0, false);
    while i + 36 <= bytes.len() {
        if is_uid(i) {
            out.push_str(&s[last..i]);
            out.push_str("<uid>");
            i += 36;
            last = i;
            found = true;
        } else {
            i += 1;
        }
    }
    found.then(|| {
        out.push_str(&s[last..]);
        out
    })
}

/// `s` with the revision after `current: ` masked (the 504 for a
/// resourceVersion not reached quotes the server's own), or `None`.
fn mask_current_revision(s: &str) -> Option<String> {
    const MARK: &str = "current: ";
    let at = s.find(MARK)? + MARK.len();
    let digits = s[at..].bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| format!("{}<revision>{}", &s[..at], &s[at + digits..]))
}

/// Keeps, of a list answer's items, the corpus's own objects (labelled
/// `app=fidelity`): the real control plane's bootstrap objects (its system
/// ClusterRoles and PriorityClasses, the controller manager's
/// `kube-root-ca.crt` ConfigMap) are not the harness's to have.
fn corpus_items_only(value: &mut Value) {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    if let (true, Some(Value::Array(items))) = (is_list, value.get_mut("items")) {
        items.retain(|item| item["metadata"]["labels"]["app"] == "fidelity");
    }
}

/// A body as comparable JSON: one document, or a watch's events.
pub(super) fn comparable(body: &[u8]) -> Value {
    if let Ok(mut v) = serde_json::from_slice::<Value>(body) {
        mask(&mut v);
        corpus_items_only(&mut v);
        return v;
    }
    let events: Option<Vec<Value>> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).ok())
        .collect();
    match events {
        Some(mut events) if !events.is_empty() => {
            events.iter_mut().for_each(mask);
            Value::Array(events)
        }
        _ => Value::String(String::from_utf8_lossy(body).into_owned()),
    }
}

/// The first place two values differ, as a JSON pointer and both sides.
pub(super) fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                first_difference(&format!("{path}/{k}"), va, vb)
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (va, vb))| first_difference(&format!("{path}/{i}"), va, vb)),
        _ if a == b => None,
        _ => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 200 {
                    format!("{}…", s.chars().take(200).collect::<String>())
                } else {
                    s
                }
            };
            Some(format!(
                "{}: harness {} / kube-apiserver {}",
                if path.is_empty() { "/" } else { path },
                short(a),
                short(b)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_in_messages_are_masked() {
        assert_eq!(
            mask_uids("UID in record (1d43c573-8f1b-4fd6-8f9c-b329edc4d70c)."),
            Some("UID in record (<uid>).".to_owned())
        );
        assert_eq!(mask_uids("no uid here, 1d43c573-8f1b"), None);
    }

    #[test]
    fn list_answers_keep_the_corpus_objects() {
        let mut list = json!({"kind": "ConfigMapList", "items": [
            {"metadata": {"name": "kube-root-ca.crt"}},
            {"metadata": {"name": "alpha", "labels": {"app": "fidelity"}}},
        ]});
        corpus_items_only(&mut list);
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(list["items"][0]["metadata"]["name"], "alpha");
    }
}
