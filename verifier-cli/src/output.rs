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
