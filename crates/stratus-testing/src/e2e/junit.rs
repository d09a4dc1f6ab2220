//! Reports as JUnit XML, for CI systems.

use crate::conformance::{Outcome, Report};

fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&apos;".to_owned(),
            c if c.is_control() && c != '\n' && c != '\t' => " ".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// The suites as one JUnit `<testsuites>` document: one `<testsuite>` per
/// `(name, report)`, a `<failure>` per failed check, `<skipped>` for
/// skipped checks and for checks left `NotImplemented`.
///
/// ```
/// use stratus_testing::conformance::Report;
/// use stratus_testing::e2e::junit_xml;
///
/// let xml = junit_xml(&[("virtual-node", &Report::default())]);
/// assert!(xml.contains("<testsuite name=\"virtual-node\" tests=\"0\" failures=\"0\" skipped=\"0\">"));
/// ```
pub fn junit_xml(suites: &[(&str, &Report)]) -> String {
    let count = |report: &Report, f: fn(&Outcome) -> bool| {
        report.checks.iter().filter(|c| f(&c.outcome)).count()
    };
    let failed = |o: &Outcome| matches!(o, Outcome::Failed(_));
    let skipped = |o: &Outcome| matches!(o, Outcome::Skipped(_) | Outcome::NotImplemented(_));
    let (mut tests, mut failures, mut skips) = (0, 0, 0);
    let mut body = String::new();
    for (name, report) in suites {
        let (t, f, s) = (
            report.checks.len(),
            count(report, failed),
            count(report, skipped),
        );
        tests += t;
        failures += f;
        skips += s;
        let name = escape(name);
        body.push_str(&format!(
            "  <testsuite name=\"{name}\" tests=\"{t}\" failures=\"{f}\" skipped=\"{s}\">\n"
        ));
        for check in &report.checks {
            let case = format!(
                "    <testcase classname=\"{name}\" name=\"{}\"",
                escape(check.name)
            );
            match &check.outcome {
                Outcome::Passed => body.push_str(&format!("{case}/>\n")),
                Outcome::Failed(why) => body.push_str(&format!(
                    "{case}>\n      <failure message=\"{}\"/>\n    </testcase>\n",
                    escape(why)
                )),
                Outcome::Skipped(why) => body.push_str(&format!(
                    "{case}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    escape(why)
                )),
                Outcome::NotImplemented(why) => body.push_str(&format!(
                    "{case}>\n      <skipped message=\"left to implement: {}\"/>\n    </testcase>\n",
                    escape(why)
                )),
            }
        }
        body.push_str("  </testsuite>\n");
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skips}\">\n{body}</testsuites>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_skips_are_counted_and_escaped() {
        let mut report = Report::default();
        report.push("ok", Outcome::Passed);
        report.push("broken <one>", Outcome::Failed("a \"quote\" & more".into()));
        report.push("absent", Outcome::Skipped("no logs".into()));
        let xml = junit_xml(&[("ccm", &report)]);
        assert!(
            xml.contains("<testsuites tests=\"3\" failures=\"1\" skipped=\"1\">"),
            "{xml}"
        );
        assert!(xml.contains("name=\"broken &lt;one&gt;\""), "{xml}");
        assert!(
            xml.contains("message=\"a &quot;quote&quot; &amp; more\""),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"no logs\"/>"), "{xml}");
    }
}
