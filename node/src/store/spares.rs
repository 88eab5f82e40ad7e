//! Spare run files: the files of a dropped run kept under a `spare-<bytes>-<k>` name, so
//! that the next run file of the same length is written over them in place instead
//! of deleted and allocated again (issue 23).
//!
//! The levels of H have the same sizes every time they are built (level ℓ: 2^(ℓ+1)
//! coded blocks), so in the steady state every batch drops about as many files of
//! each length as it writes. Deleting a file frees its blocks, and on a file system
//! mounted with `discard` (this project's test hosts) each freed extent is a
//! synchronous discard that the device serves before the flushes queued behind it:
//! the builder's deletions made 522 discards (288 MB) in 24 batches of the bench, a
//! single one up to 134 ms, while the writes' fsyncs waited
//! (docs/PERFORMANCE.md, eighth and ninth sessions). A file written over in place
//! frees and allocates nothing, changes no extent, and its `fdatasync` writes only
//! its data. PostgreSQL recycles its WAL segments by renaming them for the same
//! reasons (`wal_recycle`), as RocksDB does its logs (`recycle_log_file_num`).
//!
//! Bounds: at most [`PER_LENGTH`] spares per length (the builder retires a batch's
//! dropped runs while the next batch may already be writing, so one was often
//! missing: with one per length, 103 of the bench's 522 discards were left), and only
//! files of at most [`max_file_bytes`] (1/32 of the deal's C, at least
//! [`MIN_FILE_BYTES`] and at most [`MAX_FILE_BYTES`]); level sizes double, so a
//! deal's spares hold at most about 4 × that (≤ 1/8 of its C or 130 KiB, and ≤ 130
//! MiB). C itself is never kept. Spares count in the store's disk usage, and
//! [`Store::ensure_space`](super::Store) deletes them all before it reports the disk
//! full. A spare is never read: its bytes are garbage until a writer takes it.
//!
//! Crash safety: a spare is only ever renamed from the file of a run that no record
//! references any more (the garbage collector's dropped runs), and renamed to a
//! `.tmp` name by a writer, which then overwrites and syncs it before renaming it to
//! its run's name and syncing the directory, exactly as for a new file. A kill -9 at
//! any point leaves a spare, a `.tmp` file (deleted on open) or an unreferenced run
//! (dropped on open), never a referenced file with foreign bytes. Two threads racing
//! for one spare are settled by `rename`: one gets it, the other a new file.

use std::fs;
use std::path::{Path, PathBuf};

/// The name prefix of a spare: `spare-<bytes>-<k>`, `k` < [`PER_LENGTH`].
pub(crate) const PREFIX: &str = "spare-";

/// How many spares of one length a deal keeps.
pub(crate) const PER_LENGTH: u32 = 2;

/// The largest file kept as a spare, whatever the deal's size: 32 MiB (level 11's
/// blocks file, 2^12 coded blocks of 4,696 bytes, is 19 MB).
pub(crate) const MAX_FILE_BYTES: u64 = 32 << 20;

/// What a small deal may keep whatever its size: files of up to 32 KiB (its
/// spares then hold at most about 128 KiB).
pub(crate) const MIN_FILE_BYTES: u64 = 32 << 10;

/// The largest file of a deal whose C is `c_bytes` long kept as a spare: 1/32 of C,
/// at least [`MIN_FILE_BYTES`] and at most [`MAX_FILE_BYTES`].
pub(crate) fn max_file_bytes(c_bytes: u64) -> u64 {
    (c_bytes / 32).clamp(MIN_FILE_BYTES, MAX_FILE_BYTES)
}

/// Path of spare `k` of `len` bytes in `dir`.
pub(crate) fn path(dir: &Path, len: u64, k: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{len}-{k}"))
}

/// The length and number a spare's file name gives (`spare-<bytes>-<k>`), if `name`
/// is a spare's.
pub(crate) fn parse_name(name: &str) -> Option<(u64, u32)> {
    let (len, k) = name.strip_prefix(PREFIX)?.split_once('-')?;
    Some((len.parse().ok()?, k.parse().ok()?))
}

/// Takes a spare of `len` bytes in `dir`, if there is one, by renaming it to `tmp`
/// (replacing any file there). Returns whether it did: `tmp` then holds `len` bytes
/// of garbage for the caller to write over without truncating.
pub(crate) fn take(dir: &Path, len: u64, tmp: &Path) -> bool {
    len > 0 && (0..PER_LENGTH).any(|k| fs::rename(path(dir, len, k), tmp).is_ok())
}

/// Keeps the file at `file` (of a dropped run) as a spare of its length, if that
/// length is at most `max` bytes and `dir` has fewer than [`PER_LENGTH`] spares of
/// that length. Returns whether it did; if not, the file is untouched and the caller
/// deletes it. The caller syncs the directory.
pub(crate) fn keep(dir: &Path, file: &Path, max: u64) -> bool {
    let Ok(len) = fs::metadata(file).map(|m| m.len()) else { return false };
    if len == 0 || len > max {
        return false;
    }
    // A free name is looked for before the rename so that an existing spare is not
    // replaced (its blocks would be freed). A writer taking one in between only
    // means one spare fewer; another thread keeping one in between replaces it,
    // which frees that one's blocks once: neither ever touches a referenced file.
    (0..PER_LENGTH).map(|k| path(dir, len, k)).find(|p| !p.exists()).is_some_and(|spare| fs::rename(file, spare).is_ok())
}

/// Deletes the spares in `dir` longer than `max` bytes (all with `max` = 0). Returns
/// the bytes freed. Failures are logged.
pub(crate) fn remove_over(dir: &Path, max: u64) -> u64 {
    let mut freed = 0u64;
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(PREFIX) {
            continue;
        }
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if parse_name(&name).is_some_and(|(named, k)| named == len && len <= max && k < PER_LENGTH) {
            continue;
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => freed = freed.saturating_add(len),
            Err(e) => tracing::warn!(file = %entry.path().display(), "deleting a spare: {e}"),
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_are_kept_up_to_two_per_length_under_the_bound_and_taken_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let file = |name: &str, len: usize| {
            let p = d.join(name);
            fs::write(&p, vec![7u8; len]).expect("write");
            p
        };
        let a = file("run-1-1.blocks", 100);
        assert!(keep(d, &a, 100), "a file at the bound is kept");
        assert!(!a.exists() && path(d, 100, 0).exists());
        let b = file("run-1-2.blocks", 100);
        assert!(keep(d, &b, 1000), "a second of the same length too");
        assert!(!b.exists() && path(d, 100, 1).exists());
        let b2 = file("run-1-5.blocks", 100);
        assert!(!keep(d, &b2, 1000), "not a third");
        assert!(b2.exists(), "and the file is left for the caller to delete");
        let c = file("run-1-3.blocks", 101);
        assert!(!keep(d, &c, 100), "a file over the bound is not kept");
        assert!(!keep(d, &d.join("missing"), 100));
        let empty = file("run-1-4.tree", 0);
        assert!(!keep(d, &empty, 100), "nor an empty one");

        let tmp = d.join("run-2-9.blocks.tmp");
        assert!(!take(d, 101, &tmp), "no spare of that length");
        assert!(take(d, 100, &tmp));
        assert_eq!(fs::read(&tmp).expect("tmp").len(), 100);
        assert!(!path(d, 100, 0).exists() && path(d, 100, 1).exists());
        let tmp2 = d.join("run-2-10.blocks.tmp");
        assert!(take(d, 100, &tmp2));
        assert!(!path(d, 100, 1).exists());
        assert!(!take(d, 100, &tmp), "each spare is taken once");
        assert!(keep(d, &b2, 100), "a slot taken is free again");
    }

    #[test]
    fn spares_over_a_bound_or_misnamed_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for len in [10u64, 20, 40] {
            fs::write(path(d, len, 0), vec![1u8; len as usize]).expect("write");
        }
        fs::write(path(d, 10, 1), [1u8; 10]).expect("write");
        fs::write(path(d, 10, PER_LENGTH), [1u8; 10]).expect("write");
        fs::write(d.join("spare-30-0"), [1u8; 31]).expect("write");
        fs::write(d.join("spare-x"), [1u8; 5]).expect("write");
        fs::write(d.join("spare-7"), [1u8; 7]).expect("write");
        fs::write(d.join("run-1-1.blocks"), [1u8; 50]).expect("write");
        assert_eq!(remove_over(d, 20), 40 + 10 + 31 + 5 + 7);
        let mut left: Vec<String> = fs::read_dir(d).expect("dir").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["run-1-1.blocks", "spare-10-0", "spare-10-1", "spare-20-0"]);
        assert_eq!(remove_over(d, 0), 40);
        assert_eq!(fs::read_dir(d).expect("dir").count(), 1);
    }
}
