//! Command output: a human text (default) and a JSON value (`--json`), so every
//! command prints the same facts both ways.

/// What a command reports on success.
#[derive(Debug, Clone)]
pub struct Output {
    /// Lines for people.
    pub human: String,
    /// The same facts for scripts.
    pub json: serde_json::Value,
}

impl Output {
    /// An output from both forms.
    pub fn new(human: impl Into<String>, json: serde_json::Value) -> Self {
        Self { human: human.into(), json }
    }
}

/// The library's notes ([`dpor_client::progress::Notes`]) printed on stderr as they come.
pub struct Stderr;

impl dpor_client::progress::Notes for Stderr {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}
