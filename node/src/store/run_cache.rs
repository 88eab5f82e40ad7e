//! Runs kept in memory after they are written (issue 23 #3), so that the write that
//! consumes them (HAdd of a higher level, §5.4) takes their field elements from here
//! instead of reading the run file back and converting it.
//!
//! A batch of 512 writes leaves its levels ≥ 9 on disk and a later batch consumes
//! them: without this cache each of those levels was written, read back and converted
//! once per 2^(ℓ+1) writes (the batch that built level 12 in the bench spent 95–122 ms
//! of its 210 ms loop reading levels 9–11 back, into fresh zeroed pages).
//!
//! An entry is keyed by (deal, run id, run root): the root is the Merkle root of the
//! run's coded blocks, so an entry can only ever stand for the bytes its file holds
//! (a run id reused with other contents, after a refused batch or a new upload of the
//! deal, has another root and misses). Consuming an entry removes it. The store holds
//! at most `StoreConfig::run_cache_bytes` of elements; the oldest entries go first. The
//! cache is only memory: after a restart every run is read from its file as before.

use super::error::Result;
use super::{lock, runs, DealState, Store};
use alloy_primitives::B256;
use dpor_core::state::RunId;
use dpor_core::Fp;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Default [`RunCache`] budget: 256 MiB of field elements (levels 9–13 of a
/// 256 MiB file at β = 4 KiB, 149 MB, fit with room to spare).
pub const DEFAULT_RUN_CACHE_BYTES: u64 = 256 << 20;

impl Store {
    /// Level `level`'s run `run` (root `root`) of the deal of `st`, as HAdd consumes it:
    /// from the cache if it holds it, else read from its file.
    ///
    /// Errors: as [`runs::read_elements`] (I/O, non-canonical elements: `Corrupt`).
    pub(crate) fn consumed_level(&self, st: &DealState, level: u32, run: RunId, root: B256) -> Result<Vec<Fp>> {
        let size = 2u64 << level;
        let elements = (size as usize).saturating_mul(st.format.width());
        match self.run_cache.take(st.meta.params.deal, run, root, elements) {
            Some(blocks) => Ok(blocks),
            None => runs::read_elements(&st.dir, run, &st.format, size),
        }
    }

    /// Keeps a level's run just written (its file holds `blocks`, under `root`) for the
    /// write that will consume it. C is not kept (no write consumes it).
    pub(crate) fn keep_written(&self, deal: u64, run: RunId, root: B256, blocks: Vec<Fp>) {
        if run.tag.as_level().is_some() {
            self.run_cache.insert(deal, run, root, blocks);
        }
    }

    /// Forgets the kept runs of `deal` (a new upload or a resize replaces them all).
    pub(crate) fn forget_kept_runs(&self, deal: u64) {
        self.run_cache.forget_deal(deal);
    }
}

/// (deal, run, root of the run's coded blocks).
type Key = (u64, RunId, B256);

/// The store's cache of recently written runs (module docs).
#[derive(Debug)]
pub(crate) struct RunCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// key → (insertion number, the run's elements, flat).
    entries: BTreeMap<Key, (u64, Vec<Fp>)>,
    /// insertion number → key, oldest first.
    order: BTreeMap<u64, Key>,
    /// Bytes of elements held.
    bytes: usize,
    next: u64,
}

impl Inner {
    /// Removes the entry of `key` (from both maps and the byte count) and returns it.
    fn remove(&mut self, key: &Key) -> Option<Vec<Fp>> {
        let (seq, blocks) = self.entries.remove(key)?;
        self.order.remove(&seq);
        self.bytes -= std::mem::size_of_val(blocks.as_slice());
        Some(blocks)
    }
}

impl RunCache {
    /// A cache holding at most `budget_bytes` bytes of elements (0 keeps nothing).
    pub(crate) fn new(budget_bytes: u64) -> Self {
        RunCache { budget: usize::try_from(budget_bytes).unwrap_or(usize::MAX), inner: Mutex::new(Inner::default()) }
    }

    /// The budget, in bytes of elements.
    #[cfg(test)]
    fn budget_bytes(&self) -> usize {
        self.budget
    }

    /// Keeps run `run` of deal `deal`, whose file holds `blocks` (flat elements) under
    /// the root `root`, evicting the oldest entries to stay within the budget. A run
    /// larger than the budget is not kept.
    pub(crate) fn insert(&self, deal: u64, run: RunId, root: B256, blocks: Vec<Fp>) {
        let size = std::mem::size_of_val(blocks.as_slice());
        if size > self.budget || root == B256::ZERO {
            return;
        }
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        inner.remove(&(deal, run, root));
        while inner.bytes + size > self.budget {
            let Some((_, key)) = inner.order.pop_first() else { break };
            inner.remove(&key);
        }
        let seq = inner.next;
        inner.next += 1;
        inner.order.insert(seq, (deal, run, root));
        inner.entries.insert((deal, run, root), (seq, blocks));
        inner.bytes += size;
    }

    /// Removes and returns run `run` of deal `deal` if it is held under root `root`
    /// (and has `elements` elements: anything else is dropped and missed).
    pub(crate) fn take(&self, deal: u64, run: RunId, root: B256, elements: usize) -> Option<Vec<Fp>> {
        let blocks = lock(&self.inner).remove(&(deal, run, root))?;
        (blocks.len() == elements).then_some(blocks)
    }

    /// Drops every entry of deal `deal` (its runs are being replaced wholesale).
    pub(crate) fn forget_deal(&self, deal: u64) {
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        let keys: Vec<Key> = inner
            .entries
            .range((deal, RunId { tag: dpor_core::RunTag(0), built_at: 0 }, B256::ZERO)..)
            .take_while(|(k, _)| k.0 == deal)
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            inner.remove(&key);
        }
    }

    /// Bytes of elements held now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        lock(&self.inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_core::RunTag;

    fn run(level: u32, built_at: u64) -> RunId {
        RunId { tag: RunTag::level(level), built_at }
    }

    fn elements(n: usize, salt: u64) -> Vec<Fp> {
        (0..n as u64).map(|i| Fp::from(i ^ salt)).collect()
    }

    #[test]
    fn a_run_is_taken_once_and_only_under_its_root_and_deal() {
        let cache = RunCache::new(1 << 20);
        let (r, root) = (run(3, 40), B256::repeat_byte(7));
        cache.insert(1, r, root, elements(64, 5));
        assert_eq!(cache.take(1, r, B256::repeat_byte(8), 64), None, "another root misses");
        assert_eq!(cache.take(2, r, root, 64), None, "another deal misses");
        assert_eq!(cache.take(1, r, root, 64), Some(elements(64, 5)));
        assert_eq!(cache.take(1, r, root, 64), None, "taken once");
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn the_oldest_entries_go_first_and_the_budget_holds() {
        let cache = RunCache::new(3 * 64 * 8);
        for i in 0..5u64 {
            cache.insert(1, run(2, i), B256::repeat_byte(i as u8 + 1), elements(64, i));
            assert!(cache.bytes() <= cache.budget_bytes());
        }
        assert_eq!(cache.take(1, run(2, 0), B256::repeat_byte(1), 64), None);
        assert_eq!(cache.take(1, run(2, 1), B256::repeat_byte(2), 64), None);
        for i in 2..5u64 {
            assert_eq!(cache.take(1, run(2, i), B256::repeat_byte(i as u8 + 1), 64), Some(elements(64, i)));
        }
        // Larger than the budget, or with a zero root (a deferred run): not kept.
        cache.insert(1, run(9, 9), B256::repeat_byte(9), elements(4 * 64, 9));
        cache.insert(1, run(9, 10), B256::ZERO, elements(64, 9));
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn a_wrong_shape_misses_and_forget_deal_drops_only_that_deal() {
        let cache = RunCache::new(1 << 20);
        let root = B256::repeat_byte(3);
        cache.insert(1, run(1, 1), root, elements(32, 1));
        assert_eq!(cache.take(1, run(1, 1), root, 33), None);
        cache.insert(1, run(1, 2), root, elements(32, 1));
        cache.insert(2, run(1, 2), root, elements(32, 2));
        cache.insert(3, run(1, 2), root, elements(32, 3));
        cache.forget_deal(2);
        assert_eq!(cache.take(2, run(1, 2), root, 32), None);
        assert_eq!(cache.take(1, run(1, 2), root, 32), Some(elements(32, 1)));
        assert_eq!(cache.take(3, run(1, 2), root, 32), Some(elements(32, 3)));
    }
}
