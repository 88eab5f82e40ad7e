//! U's blocks as of a deferred C-rebuild (§6.1 of the paper, "Deamortization";
//! `deferred.rs`), saved before later writes overwrite them, in one file per deal,
//! [`FILE`].
//!
//! A record is `u64le(index) ‖ block` ([`record_bytes`]: 8 + β bytes). Only the first
//! [`DealMeta::snapshot_records`](super::meta::DealMeta::snapshot_records) records
//! count. A batch appends its records after them and syncs the file before the
//! flushed sled write that raises the count. So a crash before that commit leaves
//! records past the count; they are ignored, and the next append overwrites them.
//! When the C build commits, the count drops to zero and the file stays: the next C
//! build writes over it in place, so no block is allocated or freed.
//!
//! Why a file and not sled: these blocks used to be sled entries (`meta::snapshot_key`,
//! one 4 KiB value per block). `script/bench`'s whole C-rebuild period saved 72 MB
//! of them during one C build, all freed at once when the build committed. sled then
//! shrank its log by about 350 truncations of 512 KiB, each an `fsync` and, on a
//! file system mounted with `discard`, a synchronous discard. The next write's sled
//! flush waited behind them: 132–156 ms for one 4 KiB write (docs/PERFORMANCE.md,
//! "eighth session"). A store opened with such entries moves them into the file
//! (`recovery.rs`).

use super::error::{Result, StoreError};
use super::MAX_READ_BYTES;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The snapshot file's name inside a deal's folder.
pub(crate) const FILE: &str = "c-snapshot.blocks";

/// Bytes of one record for blocks of `beta` bytes: the index (8) and the block.
pub(crate) fn record_bytes(beta: u64) -> u64 {
    beta.saturating_add(8)
}

/// Writes `blocks` (index, block of `beta` bytes) as records `count..` of `dir`'s
/// snapshot file (created if missing) and syncs its data. The caller commits the new
/// count afterwards, and syncs `dir` if the file may be new.
///
/// Errors: [`StoreError::Io`] (or [`StoreError::DiskFull`]); [`StoreError::Range`] if
/// a block is not `beta` bytes.
pub(crate) fn append<'a>(dir: &Path, beta: u64, count: u64, blocks: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<()> {
    let path = dir.join(FILE);
    let mut buf = Vec::new();
    for (index, block) in blocks {
        if block.len() as u64 != beta {
            return Err(StoreError::Range(format!("a snapshot block of {} bytes, not {beta}", block.len())));
        }
        buf.extend_from_slice(&index.to_le_bytes());
        buf.extend_from_slice(block);
    }
    if buf.is_empty() {
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io("open", &path, buf.len() as u64, e))?;
    let offset = count.saturating_mul(record_bytes(beta));
    file.write_all_at(&buf, offset).map_err(|e| StoreError::io("write", &path, buf.len() as u64, e))?;
    file.sync_data().map_err(|e| StoreError::io("sync", &path, 0, e))
}

/// The first `count` records of `dir`'s snapshot file, for a deal of `n` blocks of
/// `beta` bytes, in file order; with `blocks` false the blocks are left empty (only
/// the indices are read).
///
/// Errors: [`StoreError::Io`] if the file is missing or short, [`StoreError::Corrupt`]
/// if an index is not below `n`.
pub(crate) fn read(dir: &Path, n: u64, beta: u64, count: u64, blocks: bool) -> Result<Vec<(u64, Vec<u8>)>> {
    let mut out = Vec::with_capacity(count.min(n) as usize);
    if count == 0 {
        return Ok(out);
    }
    let path = dir.join(FILE);
    let file = std::fs::File::open(&path).map_err(|e| StoreError::io("open", &path, 0, e))?;
    let record = record_bytes(beta);
    let per_read = (MAX_READ_BYTES / record.max(1)).max(1);
    let mut done = 0u64;
    while done < count {
        let take = per_read.min(count - done);
        let mut buf = vec![0u8; (take * record) as usize];
        file.read_exact_at(&mut buf, done * record).map_err(|e| StoreError::io("read", &path, 0, e))?;
        for chunk in buf.chunks_exact(record as usize) {
            let (head, block) = chunk.split_at(8);
            let index = head.try_into().map(u64::from_le_bytes).unwrap_or(u64::MAX);
            if index >= n {
                return Err(StoreError::Corrupt(format!("{}: snapshot block index {index} for N = {n}", path.display())));
            }
            out.push((index, if blocks { block.to_vec() } else { Vec::new() }));
        }
        done += take;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::meta::{self, DealParams};
    use crate::store::{Store, StoreConfig};
    use alloy_primitives::Address;

    const DEAL: u64 = 3;
    const N: u64 = 16;
    const BETA: usize = 16;

    /// A store (builds of ≥ 4 blocks deferred, no builder) with deal [`DEAL`] uploaded,
    /// then N writes (the last a deferred C-rebuild) and 6 more that overwrite blocks
    /// while the C build is pending. Returns the next nonce.
    fn c_build_pending(dir: &Path) -> (Store, u64) {
        let store = Store::open(dir, StoreConfig { defer_from_blocks: Some(4), ..Default::default() }).unwrap();
        let params = DealParams { deal: DEAL, owner: Address::repeat_byte(1), num_blocks: N, block_bytes: BETA as u32 };
        store.upload_begin(params, 1).unwrap();
        let blocks: Vec<Vec<u8>> = (0..N).map(|i| vec![i as u8; BETA]).collect();
        store.upload_blocks(DEAL, 2, 0, blocks, &[[2; 32]; N as usize]).unwrap();
        store.upload_finish(DEAL, 3).unwrap();
        // Indices 0..4 only: the C-rebuild's snapshot starts with their new values
        // (this batch's, not yet in U's files).
        let writes: Vec<_> = (0..N).map(|i| (i % 4, vec![0x40 + i as u8; BETA], [4; 32])).collect();
        store.write_batch(DEAL, 4, writes).unwrap();
        // 7, 11 and 15 are saved now; 2 and 0 were.
        let writes: Vec<_> = [2u64, 7, 2, 11, 0, 15].iter().map(|i| (*i, vec![0x80 + *i as u8; BETA], [5; 32])).collect();
        store.write_batch(DEAL, 5, writes).unwrap();
        (store, 6)
    }

    /// Writes during a pending C build save each block once, in the file,
    /// and the build reads them: C as built matches the same store's C built after the
    /// blocks were moved from sled entries (a store from before record version 6), and
    /// the move leaves no sled entry and counts every record.
    #[test]
    fn legacy_sled_snapshot_entries_move_into_the_file() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (store, nonce) = c_build_pending(a.path());
        let records = {
            let entry = store.deal(DEAL).unwrap();
            let g = crate::store::rlock(&entry.state);
            let st = g.as_ref().unwrap();
            assert!(st.meta.c_building());
            assert_eq!(st.meta.snapshot_records, 7, "indices 0..4, then 7, 11 and 15");
            read(&st.dir, N, BETA as u64, st.meta.snapshot_records, true).unwrap()
        };
        assert_eq!(records.iter().filter(|(i, _)| *i == 2).count(), 1);
        store.settle(DEAL).unwrap();
        let want = store.view(DEAL).unwrap().c;
        drop(store);

        // The same state in a store from before version 6: sled entries, no file.
        let (store, _) = c_build_pending(b.path());
        {
            let entry = store.deal(DEAL).unwrap();
            let g = crate::store::rlock(&entry.state);
            let st = g.as_ref().unwrap();
            let mut legacy = st.meta.clone();
            legacy.snapshot_records = 0;
            for (i, block) in read(&st.dir, N, BETA as u64, st.meta.snapshot_records, true).unwrap() {
                store.db.insert(meta::snapshot_key(DEAL, i), block).unwrap();
            }
            store.db.insert(meta::deal_key(DEAL), legacy.encode()).unwrap();
            store.db.flush().unwrap();
            std::fs::write(st.dir.join(FILE), b"").unwrap();
        }
        drop(store);
        let store = Store::open(b.path(), StoreConfig { defer_from_blocks: Some(4), ..Default::default() }).unwrap();
        assert_eq!(store.db.scan_prefix(meta::snapshot_deal_prefix(DEAL)).count(), 0, "sled entries moved");
        store.settle(DEAL).unwrap();
        assert_eq!(store.view(DEAL).unwrap().c, want, "C built from the moved blocks");
        assert!(want.1 != alloy_primitives::B256::ZERO);
        // The next batch goes on from the settled state.
        store.write_batch(DEAL, nonce, vec![(1, vec![9; BETA], [6; 32])]).unwrap();
    }

    /// Appended records read back in order; records past the count are ignored and
    /// written over by the next append; the file's size never shrinks.
    #[test]
    fn records_past_the_count_are_ignored_and_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (n, beta) = (16u64, 8u64);
        let block = |b: u8| vec![b; beta as usize];
        append(dir.path(), beta, 0, [(3, block(3).as_slice()), (9, block(9).as_slice())]).unwrap();
        // A batch that appended and crashed before its commit: the count stays at 2.
        append(dir.path(), beta, 2, [(5, block(5).as_slice()), (6, block(6).as_slice())]).unwrap();
        assert_eq!(read(dir.path(), n, beta, 2, true).unwrap(), vec![(3, block(3)), (9, block(9))]);
        // The next batch writes over the uncommitted records.
        append(dir.path(), beta, 2, [(7, block(7).as_slice())]).unwrap();
        assert_eq!(read(dir.path(), n, beta, 3, true).unwrap(), vec![(3, block(3)), (9, block(9)), (7, block(7))]);
        assert_eq!(read(dir.path(), n, beta, 3, false).unwrap(), vec![(3, vec![]), (9, vec![]), (7, vec![])]);
        // A new C build starts again at record 0, in place.
        append(dir.path(), beta, 0, [(1, block(1).as_slice())]).unwrap();
        assert_eq!(read(dir.path(), n, beta, 1, true).unwrap(), vec![(1, block(1))]);
        assert_eq!(std::fs::metadata(dir.path().join(FILE)).unwrap().len(), 4 * record_bytes(beta));
    }

    /// A count past the file's end, an index out of range and a wrong block size are
    /// errors, not panics.
    #[test]
    fn bad_files_and_blocks_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path(), 16, 8, 1, true).is_err(), "no file");
        assert!(read(dir.path(), 16, 8, 0, true).unwrap().is_empty());
        append(dir.path(), 8, 0, [(3, [0u8; 8].as_slice())]).unwrap();
        assert!(matches!(read(dir.path(), 16, 8, 2, true), Err(StoreError::Io { .. })), "short file");
        assert!(matches!(read(dir.path(), 2, 8, 1, true), Err(StoreError::Corrupt(_))), "index 3 of N = 2");
        assert!(matches!(append(dir.path(), 8, 1, [(1, [0u8; 7].as_slice())]), Err(StoreError::Range(_))));
    }
}
