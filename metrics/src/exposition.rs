//! A strict parser of the OpenMetrics / Prometheus text exposition format, as
//! prometheus-client writes it, for tests that compare scraped values with other
//! sources. Strict: every line must be a `# HELP`, `# TYPE` or `# UNIT` line, a sample
//! of a declared family (with a suffix its type allows), or the final `# EOF`; names,
//! label syntax and escapes, and values are checked; no sample appears twice; counters
//! are finite and non-negative; each histogram's buckets are cumulative, in increasing
//! `le` order, and end with `+Inf` equal to its `_count`.

use std::collections::{BTreeMap, BTreeSet};

/// The labels of a sample, by name.
pub type Labels = BTreeMap<String, String>;

/// A label set as a sortable key.
type LabelKey = Vec<(String, String)>;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (with its suffix: `x_total`, `h_bucket`).
    pub name: String,
    /// Its labels.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
}

/// One metric family (from its `# TYPE` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The family's name (without suffixes).
    pub name: String,
    /// Its type: `counter`, `gauge`, `histogram`, `summary`, `info`, `stateset`,
    /// `gaugehistogram` or `unknown`.
    pub kind: String,
    /// Its `# HELP` text, if any.
    pub help: Option<String>,
    /// Its `# UNIT`, if any.
    pub unit: Option<String>,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// The families, by name.
    pub families: BTreeMap<String, Family>,
    /// The samples, in the order of the text.
    pub samples: Vec<Sample>,
}

/// Why a text is not a valid exposition: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("exposition line {line}: {what}")]
pub struct ParseError {
    /// The line (1-based; 0 for the text as a whole).
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl Exposition {
    /// The value of the sample `name` whose labels are exactly `labels`, if present.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// The sum of every sample named `name` (all label sets); 0 if there is none.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    /// The samples named `name`.
    pub fn all(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

fn err(line: usize, what: impl Into<String>) -> ParseError {
    ParseError {
        line,
        what: what.into(),
    }
}

fn valid_metric_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

fn valid_label_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ if s.is_empty() || s.contains(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c))) => {
            None
        }
        _ => s.parse().ok(),
    }
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str, line: usize) -> Result<(Labels, &str), ParseError> {
    let mut labels = Labels::new();
    let mut rest = s
        .strip_prefix('{')
        .ok_or_else(|| err(line, "expected '{'"))?;
    if let Some(r) = rest.strip_prefix('}') {
        return Ok((labels, r));
    }
    loop {
        let eq = rest
            .find('=')
            .ok_or_else(|| err(line, "a label without '='"))?;
        let name = &rest[..eq];
        if !valid_label_name(name) {
            return Err(err(line, format!("bad label name {name:?}")));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or_else(|| err(line, format!("label {name}: value not quoted")))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(err(line, format!("label {name}: unterminated value"))),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(err(line, format!("label {name}: bad escape {other:?}"))),
                },
                Some((_, '\n')) => return Err(err(line, "newline inside a label value")),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(err(line, format!("label {name} twice")));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
            if let Some(r) = rest.strip_prefix('}') {
                return Ok((labels, r));
            }
        } else if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        } else {
            return Err(err(line, "expected ',' or '}' after a label"));
        }
    }
}

/// The suffixes a sample of a family of type `kind` may add to the family's name.
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created"],
        "histogram" | "gaugehistogram" => {
            &["_bucket", "_count", "_sum", "_created", "_gcount", "_gsum"]
        }
        "summary" => &["", "_count", "_sum", "_created"],
        "info" => &["_info"],
        _ => &[""],
    }
}

/// Parses `text` (see the module docs for what is checked).
///
/// # Errors
/// The first [`ParseError`] found.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    let mut seen: BTreeSet<(String, LabelKey)> = BTreeSet::new();
    let mut owner: Vec<String> = Vec::new(); // family of each sample, by index
    let mut eof = false;
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect();
    for (i, raw) in lines.iter().enumerate() {
        let n = i + 1;
        if eof {
            return Err(err(n, "text after # EOF"));
        }
        if raw.is_empty() {
            return Err(err(n, "empty line"));
        }
        if let Some(meta) = raw.strip_prefix('#') {
            if *raw == "# EOF" {
                eof = true;
                continue;
            }
            let meta = meta
                .strip_prefix(' ')
                .ok_or_else(|| err(n, "'#' not followed by a space"))?;
            let mut parts = meta.splitn(3, ' ');
            let (what, name, rest) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next(),
            );
            if !valid_metric_name(name) {
                return Err(err(n, format!("bad metric name {name:?}")));
            }
            let fam = out
                .families
                .entry(name.to_string())
                .or_insert_with(|| Family {
                    name: name.to_string(),
                    kind: String::new(),
                    help: None,
                    unit: None,
                });
            match (what, rest) {
                ("TYPE", Some(t)) => {
                    const TYPES: [&str; 8] = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "info",
                        "stateset",
                        "gaugehistogram",
                        "unknown",
                    ];
                    if !TYPES.contains(&t) {
                        return Err(err(n, format!("unknown type {t:?}")));
                    }
                    if !fam.kind.is_empty() {
                        return Err(err(n, format!("family {name} typed twice")));
                    }
                    if owner.iter().any(|o| o == name) {
                        return Err(err(n, format!("# TYPE of {name} after its samples")));
                    }
                    fam.kind = t.to_string();
                }
                ("HELP", Some(h)) => fam.help = Some(h.to_string()),
                ("HELP", None) => fam.help = Some(String::new()),
                ("UNIT", Some(u)) => {
                    if !name.ends_with(&format!("_{u}")) {
                        return Err(err(
                            n,
                            format!("family {name} has unit {u} but its name does not end in _{u}"),
                        ));
                    }
                    fam.unit = Some(u.to_string());
                }
                _ => return Err(err(n, format!("unknown comment line {raw:?}"))),
            }
            continue;
        }
        let name_end = raw
            .find(['{', ' '])
            .ok_or_else(|| err(n, "a sample without a value"))?;
        let name = &raw[..name_end];
        if !valid_metric_name(name) {
            return Err(err(n, format!("bad metric name {name:?}")));
        }
        let (labels, rest) = if raw[name_end..].starts_with('{') {
            parse_labels(&raw[name_end..], n)?
        } else {
            (Labels::new(), &raw[name_end..])
        };
        let rest = rest
            .strip_prefix(' ')
            .ok_or_else(|| err(n, "expected one space before the value"))?;
        let mut fields = rest.split(' ');
        let value_text = fields.next().unwrap_or("");
        let value =
            parse_value(value_text).ok_or_else(|| err(n, format!("bad value {value_text:?}")))?;
        if let Some(ts) = fields.next() {
            parse_value(ts)
                .filter(|t| t.is_finite())
                .ok_or_else(|| err(n, format!("bad timestamp {ts:?}")))?;
        }
        if fields.next().is_some() {
            return Err(err(n, "extra fields after the value"));
        }
        // The family: the longest declared name this sample's name extends by an allowed suffix.
        let fam = out
            .families
            .values()
            .filter(|f| !f.kind.is_empty())
            .filter(|f| {
                suffixes(&f.kind)
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(f.name.as_str()))
            })
            .max_by_key(|f| f.name.len())
            .ok_or_else(|| err(n, format!("sample {name} of no declared family")))?;
        if fam.kind == "counter" && name.ends_with("_total") && !(value.is_finite() && value >= 0.0)
        {
            return Err(err(n, format!("counter {name} = {value}")));
        }
        let key = (
            name.to_string(),
            labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        );
        if !seen.insert(key) {
            return Err(err(n, format!("sample {name}{labels:?} twice")));
        }
        owner.push(fam.name.clone());
        out.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    if !eof {
        return Err(err(0, "no # EOF line at the end"));
    }
    check_histograms(&out)?;
    Ok(out)
}

/// Each histogram series: buckets in increasing `le`, cumulative, `+Inf` last and
/// equal to `_count`.
fn check_histograms(e: &Exposition) -> Result<(), ParseError> {
    for f in e.families.values().filter(|f| f.kind == "histogram") {
        let mut series: BTreeMap<LabelKey, Vec<(f64, f64)>> = BTreeMap::new();
        for s in e.all(&format!("{}_bucket", f.name)) {
            let le = s
                .labels
                .get("le")
                .and_then(|v| parse_value(v))
                .ok_or_else(|| err(0, format!("{} bucket without a valid le", f.name)))?;
            let key = s
                .labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, buckets) in series {
            let labels: Labels = key.iter().cloned().collect();
            for w in buckets.windows(2) {
                if !(w[0].0 < w[1].0 && w[0].1 <= w[1].1) {
                    return Err(err(
                        0,
                        format!(
                            "{} {labels:?}: buckets not increasing and cumulative: {buckets:?}",
                            f.name
                        ),
                    ));
                }
            }
            let last = buckets.last().copied().unwrap_or((0.0, 0.0));
            let count = e
                .samples
                .iter()
                .find(|s| s.name == format!("{}_count", f.name) && s.labels == labels)
                .map(|s| s.value);
            if last.0 != f64::INFINITY || count != Some(last.1) {
                return Err(err(
                    0,
                    format!(
                        "{} {labels:?}: +Inf bucket {last:?} against _count {count:?}",
                        f.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# HELP a_total_bytes Bytes.\n# TYPE a_total_bytes counter\na_total_bytes_total{kind=\"x\\\"y\"} 12\n\
# TYPE g gauge\ng 1.5e3\n# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n\
h_seconds_sum{k=\"r\"} 0.5\nh_seconds_count{k=\"r\"} 3\nh_seconds_bucket{le=\"0.1\",k=\"r\"} 1\n\
h_seconds_bucket{le=\"1.0\",k=\"r\"} 3\nh_seconds_bucket{le=\"+Inf\",k=\"r\"} 3\n# EOF\n";

    #[test]
    fn parses_what_prometheus_client_writes() {
        let e = parse(GOOD).unwrap();
        assert_eq!(
            e.value("a_total_bytes_total", &[("kind", "x\"y")]),
            Some(12.0)
        );
        assert_eq!(e.value("g", &[]), Some(1500.0));
        assert_eq!(e.value("h_seconds_count", &[("k", "r")]), Some(3.0));
        assert_eq!(e.families["h_seconds"].unit.as_deref(), Some("seconds"));
        assert_eq!(e.sum("h_seconds_bucket"), 7.0);
    }

    #[test]
    fn refuses_every_kind_of_damage() {
        let bad = [
            GOOD.replace("# EOF\n", ""),          // no EOF
            GOOD.replace("g 1.5e3", "g 1.5e3x"),  // bad value
            GOOD.replace("g 1.5e3", "g  1"),      // two spaces
            GOOD.replace("# TYPE g gauge\n", ""), // undeclared family
            GOOD.replace("{kind=", "{1kind="),    // bad label name
            GOOD.replace("\\\"y\"}", "\\\"y}"),   // unterminated label
            GOOD.replace("h_seconds_count{k=\"r\"} 3", "h_seconds_count{k=\"r\"} 4"), // +Inf != count
            GOOD.replace("le=\"1.0\",k=\"r\"} 3", "le=\"1.0\",k=\"r\"} 0"), // not cumulative
            GOOD.replace("g 1.5e3\n", "g 1.5e3\ng 2\n"),                    // duplicate sample
            GOOD.replace("kind=\"x\\\"y\"} 12", "kind=\"x\\\"y\"} -1"),     // negative counter
            GOOD.replace("# EOF\n", "# EOF\ng 1\n"),                        // after EOF
            GOOD.replace("# TYPE g gauge", "# TYPE g gauges"),              // unknown type
            GOOD.replace("# TYPE g gauge", "#TYPE g gauge"),                // bad comment
            GOOD.replace("# UNIT h_seconds seconds", "# UNIT h_seconds bytes"), // unit not in name
            GOOD.replace("\ng 1.5e3\n", "\n\ng 1.5e3\n"),                   // empty line
        ];
        for (i, b) in bad.iter().enumerate() {
            assert_ne!(b, GOOD, "case {i} changed nothing");
            assert!(parse(b).is_err(), "case {i} parsed:\n{b}");
        }
    }
}
