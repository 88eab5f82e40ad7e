//! What the store tells the node's metrics (docs/OPERATIONS.md, "Metrics"): every
//! deferred run it builds (a [`RebuildObserver`]) and its space ([`Store::space`]).

use super::error::Result;
use super::{space, Store};
use dpor_core::RunId;
use std::sync::Arc;
use std::time::Duration;

/// Called once for every deferred run built (by the background [`super::Builder`] or
/// by an operation that needed the run first), after its files are written and
/// fsynced: `c` is true for a C run, false for a level of H; `took` is the build's
/// wall time. Runs on the building thread: keep it cheap.
pub type RebuildObserver = Arc<dyn Fn(bool, Duration) + Send + Sync>;

/// Where the store keeps its [`RebuildObserver`] (set once).
#[derive(Default)]
pub(crate) struct ObserverSlot(std::sync::OnceLock<RebuildObserver>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "ObserverSlot(set)"
        } else {
            "ObserverSlot(none)"
        })
    }
}

/// The store's disk space, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceReport {
    /// Bytes of all files under the store's folder (metadata included).
    pub used: u64,
    /// Bytes still available to it: the lesser of the quota left and the file
    /// system's free space (what an upload or write is checked against).
    pub available: u64,
}

impl Store {
    /// Sets the observer of deferred builds (the first call wins; later ones are ignored).
    pub fn observe_rebuilds(&self, observer: RebuildObserver) {
        let _ = self.rebuild_observer.0.set(observer);
    }

    /// Tells the observer, if any, that `run` was built in `took`.
    pub(crate) fn rebuilt(&self, run: RunId, took: Duration) {
        if let Some(f) = self.rebuild_observer.0.get() {
            f(run.tag.as_level().is_none(), took);
        }
    }

    /// The store's used and available space (one walk of its folder).
    ///
    /// Errors: [`super::StoreError::Io`] if the folder cannot be listed.
    pub fn space(&self) -> Result<SpaceReport> {
        let used = space::usage(&self.dir)?;
        let fs_free = fs2::available_space(&self.dir).unwrap_or(u64::MAX);
        let quota_left = self
            .config
            .quota_bytes
            .map_or(u64::MAX, |q| q.saturating_sub(used));
        Ok(SpaceReport {
            used,
            available: fs_free.min(quota_left),
        })
    }
}
