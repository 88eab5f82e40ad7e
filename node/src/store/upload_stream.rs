//! C built while U arrives (issue 23 #2): each upload request's blocks, once durably
//! in U's files, go to a thread of the deal's own that feeds them to a
//! [`dpor_core::c_stream::CStream`]; `upload_finish` then takes C from it instead
//! of reading U back, converting it to records and running the whole `c_rebuild`.
//!
//! The stream is only a shortcut, never the record: U's files and the deal's metadata
//! stay the truth, and `upload_finish` falls back to `c_rebuild` of U read back whenever
//! the stream is missing (the node restarted mid-upload, the upload began before the
//! budget allowed one), broken (a push refused) or not complete. Its memory
//! (16·N·width bytes, what `c_rebuild` needs at its peak anyway) is counted against
//! [`super::StoreConfig::upload_stream_bytes`], store-wide.

use dpor_core::block::BlockFormat;
use dpor_core::c_stream::CStream;
use dpor_core::field::Fp;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Default of [`super::StoreConfig::upload_stream_bytes`]: 2 GiB, one upload of up to
/// 512 MiB at β = 4096 (N = 2^17: 16·N·587 bytes ≈ 1.2 GB) or several smaller ones.
pub const DEFAULT_UPLOAD_STREAM_BYTES: u64 = 2 << 30;

/// One upload's stream: the sender to its thread and the blocks sent so far.
#[derive(Debug)]
pub(crate) struct UploadStream {
    /// Blocks handed to the thread (the next request's `start` if it continues).
    next: u64,
    tx: mpsc::Sender<(u64, Arc<Vec<Vec<u8>>>)>,
    thread: JoinHandle<Option<CStream>>,
    /// Released from the store's budget when the stream is dropped.
    _reservation: Reservation,
}

/// Bytes of the store-wide budget held by one stream.
#[derive(Debug)]
pub(crate) struct Reservation {
    bytes: u64,
    used: Arc<AtomicU64>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Takes `bytes` of `budget` from `used` if they fit.
pub(crate) fn reserve(used: &Arc<AtomicU64>, budget: u64, bytes: u64) -> Option<Reservation> {
    used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(bytes).filter(|t| *t <= budget)).ok()?;
    Some(Reservation { bytes, used: Arc::clone(used) })
}

impl UploadStream {
    /// Starts the thread of a stream for N = 2^`log_blocks` blocks of `format`, holding
    /// `reservation`; `None` if the thread cannot be started (the upload then builds C
    /// at the end).
    pub(crate) fn start(deal: u64, format: BlockFormat, log_blocks: u32, reservation: Reservation) -> Option<Self> {
        let (tx, rx) = mpsc::channel::<(u64, Arc<Vec<Vec<u8>>>)>();
        let thread = std::thread::Builder::new()
            .name(format!("c-stream-{deal}"))
            .spawn(move || {
                let mut stream = match CStream::new(log_blocks, format.width()) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(deal, "C cannot be built while U arrives ({e}); it is built at the end");
                        return None;
                    }
                };
                for (start, blocks) in rx {
                    if let Err(e) = stream.push_blocks(&format, start, &blocks) {
                        tracing::warn!(deal, "C stopped being built while U arrives ({e}); it is built at the end");
                        return None;
                    }
                }
                Some(stream)
            })
            .ok()?;
        Some(Self { next: 0, tx, thread, _reservation: reservation })
    }

    /// The index the next pushed blocks must start at.
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// Hands blocks `start..` (durably in U) to the thread. `false` if the thread has
    /// stopped (the caller drops the stream).
    pub(crate) fn push(&mut self, start: u64, blocks: Arc<Vec<Vec<u8>>>) -> bool {
        let count = blocks.len() as u64;
        if start != self.next || self.tx.send((start, blocks)).is_err() {
            return false;
        }
        self.next += count;
        true
    }

    /// Waits for the thread and returns C (`[X | Y]`, 2N blocks of records' width) if
    /// all N blocks went through it; `None` otherwise.
    pub(crate) fn finish(self) -> Option<Vec<Fp>> {
        let Self { tx, thread, _reservation, .. } = self;
        drop(tx);
        thread.join().ok().flatten().and_then(|s| s.finish().ok())
    }
}
