//! Progress reports from long flows (upload, download, extract, edits): the library
//! draws nothing; a caller that shows progress (the CLI's bars) implements
//! [`Progress`] and passes it in.

/// A sink for the progress of one flow, in the flow's unit (bytes for upload, download
/// and extract; blocks for edits).
pub trait Progress: Send + Sync {
    /// The total, once known.
    fn set_length(&self, total: u64);
    /// `delta` more done.
    fn inc(&self, delta: u64);
    /// `done` so far.
    fn set_position(&self, done: u64);
}

/// A sink for notes a flow has for the user while it runs (an interrupted request it
/// settled, checks it made, a write across shards it completed): each a line of text
/// the CLI prints on stderr as it comes, so that `--json` output stays one object.
pub trait Notes: Send + Sync {
    /// One note.
    fn note(&self, line: &str);
}

/// A [`Notes`] that drops every note.
pub struct Quiet;

impl Notes for Quiet {
    fn note(&self, _line: &str) {}
}
