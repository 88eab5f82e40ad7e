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
