//! Go's metric flags applied to the `/metrics` text: `--disabled-metrics`
//! (families left out) and `--allow-metric-labels` (label values outside an
//! allow-list written as `unexpected`, series that then coincide summed).

use std::collections::{BTreeMap, BTreeSet};

/// A bad metrics flag value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsFilterError {
    /// An `--allow-metric-labels` entry is not `metric,label=v1,v2`.
    #[error(
        "--allow-metric-labels {0:?}: expected <metric>,<label>='<value>,<value>' (for example workqueue_depth,name='service,Nodes')"
    )]
    AllowLabels(String),
}

/// What `/metrics` leaves out or rewrites.
///
/// ```
/// use stratus_runtime::metrics::MetricsFilter;
///
/// let filter = MetricsFilter::new(
///     &["b".into()],
///     &["a,name='x'".into()],
/// )
/// .unwrap();
/// let text = "# TYPE a gauge\na{name=\"x\"} 1\na{name=\"y\"} 2\na{name=\"z\"} 3\n# TYPE b gauge\nb 1\n# EOF\n";
/// assert_eq!(
///     filter.apply(text),
///     "# TYPE a gauge\na{name=\"x\"} 1\na{name=\"unexpected\"} 5\n# EOF\n"
/// );
/// ```
#[derive(Debug, Clone, Default)]
pub struct MetricsFilter {
    disabled: BTreeSet<String>,
    allowed: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

/// The value written for a label value outside its allow-list (Go's).
pub const UNEXPECTED: &str = "unexpected";

impl MetricsFilter {
    /// The filter of `--disabled-metrics` (metric names) and
    /// `--allow-metric-labels` entries (`metric,label='v1,v2'`; several
    /// entries may share one value, separated by spaces).
    pub fn new(disabled: &[String], allow_labels: &[String]) -> Result<Self, MetricsFilterError> {
        let mut filter = Self {
            disabled: disabled
                .iter()
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty())
                .collect(),
            ..Default::default()
        };
        for value in allow_labels {
            for (metric, label, values) in parse_allow(value)? {
                filter
                    .allowed
                    .entry(metric)
                    .or_default()
                    .entry(label)
                    .or_default()
                    .extend(values);
            }
        }
        Ok(filter)
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.disabled.is_empty() && self.allowed.is_empty()
    }

    /// The exposition `text` filtered.
    pub fn apply(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut family = String::new();
        let mut skip = false;
        // The samples of the current family, merged by series.
        let mut samples: Vec<(String, f64, String)> = Vec::new();
        let flush = |samples: &mut Vec<(String, f64, String)>, out: &mut String| {
            for (series, value, original) in samples.drain(..) {
                if original.is_empty() {
                    out.push_str(&format!("{series} {value}\n"));
                } else {
                    out.push_str(&original);
                    out.push('\n');
                }
            }
        };
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                let mut words = rest.split_whitespace();
                let (kind, name) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                if matches!(kind, "HELP" | "TYPE" | "UNIT") && name != family {
                    flush(&mut samples, &mut out);
                    family = name.to_owned();
                    skip = self.disabled.contains(&family)
                        || self.disabled.contains(&format!("{family}_total"));
                }
                if kind == "EOF" {
                    flush(&mut samples, &mut out);
                    skip = false;
                }
                if !skip {
                    out.push_str(line);
                    out.push('\n');
                }
                continue;
            }
            if skip {
                continue;
            }
            let rules = self
                .allowed
                .get(&family)
                .or_else(|| self.allowed.get(&format!("{family}_total")));
            match rules.and_then(|r| rewrite(line, r)) {
                Some((series, value)) => match samples.iter_mut().find(|(s, _, _)| *s == series) {
                    Some(existing) => {
                        existing.1 += value;
                        existing.2.clear();
                    }
                    None => samples.push((series, value, String::new())),
                },
                None => samples.push((String::new(), 0.0, line.to_owned())),
            }
        }
        flush(&mut samples, &mut out);
        out
    }
}

/// The sample `line` with disallowed label values replaced: its series
/// text and value; `None` when it cannot be read (kept as is).
fn rewrite(line: &str, rules: &BTreeMap<String, BTreeSet<String>>) -> Option<(String, f64)> {
    let open = line.find('{')?;
    let close = line.rfind('}')?;
    let name = &line[..open];
    let labels = parse_labels(&line[open + 1..close])?;
    let value: f64 = line[close + 1..].split_whitespace().next()?.parse().ok()?;
    let labels: Vec<String> = labels
        .into_iter()
        .map(|(k, v)| {
            let v = match rules.get(&k) {
                Some(allowed) if !allowed.contains(&v) => UNEXPECTED.to_owned(),
                _ => v,
            };
            format!("{k}=\"{}\"", escape(&v))
        })
        .collect();
    Some((format!("{name}{{{}}}", labels.join(",")), value))
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `a="x",b="y\"z"` → pairs, unescaped.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_owned();
        rest = rest[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.push((key, value));
        rest = rest[end + 1..].trim_start_matches(',').trim_start();
    }
    Some(out)
}

/// One `--allow-metric-labels` value: `metric,label='v1,v2'` entries.
fn parse_allow(value: &str) -> Result<Vec<(String, String, Vec<String>)>, MetricsFilterError> {
    let bad = || MetricsFilterError::AllowLabels(value.to_owned());
    let mut out = Vec::new();
    let mut rest = value.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(bad)?;
        let (metric, label) = rest[..eq].split_once(',').ok_or_else(bad)?;
        let (metric, label) = (metric.trim(), label.trim());
        if metric.is_empty() || label.is_empty() {
            return Err(bad());
        }
        rest = &rest[eq + 1..];
        let values = if let Some(quoted) = rest.strip_prefix('\'') {
            let end = quoted.find('\'').ok_or_else(bad)?;
            rest = &quoted[end + 1..];
            &quoted[..end]
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let v = &rest[..end];
            rest = &rest[end..];
            v
        };
        out.push((
            metric.to_owned(),
            label.to_owned(),
            values.split(',').map(|v| v.trim().to_owned()).collect(),
        ));
        rest = rest.trim_start_matches([',', ' ', '\t']);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_lists_parse_in_go_syntax() {
        let parsed = parse_allow("m1,l1='v1,v2', m1,l2='v3' m2,l1=v4").unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0].2, ["v1", "v2"]);
        assert_eq!(parsed[2], ("m2".into(), "l1".into(), vec!["v4".into()]));
        assert!(parse_allow("no-label='x'").is_err());
        assert!(parse_allow("m,l='open").is_err());
    }

    #[test]
    fn counters_match_with_and_without_total() {
        let filter = MetricsFilter::new(&["c_total".into()], &[]).unwrap();
        let text = "# HELP c A.\n# TYPE c counter\nc_total 1\n# TYPE d gauge\nd 2\n# EOF\n";
        assert_eq!(filter.apply(text), "# TYPE d gauge\nd 2\n# EOF\n");
    }

    #[test]
    fn escaped_label_values_survive() {
        let filter = MetricsFilter::new(&[], &["m,a='x'".into()]).unwrap();
        let text = "# TYPE m gauge\nm{a=\"x\",b=\"q\\\"z\"} 1\n# EOF\n";
        assert_eq!(filter.apply(text), text);
    }
}
