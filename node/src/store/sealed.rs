//! The owner's σ̃ of run positions (SCHEME §6), kept in sled in groups of
//! [`GROUP`] positions: one entry per group instead of one per position.
//!
//! An upload stores σ̃ for the 2N positions of C at once; 131,072 sled inserts of
//! 32 bytes took 1.3 s of the node's CPU for a 256 MiB file (issue 23, a perf profile
//! of the upload), 1,024 inserts of 4 KiB take a small fraction of that.
//!
//! Layout: the key is [`meta::sealed_key`]`(deal, run, g)` with g the group's first
//! position (a multiple of [`GROUP`]); the value is [`GROUP`] σ̃ of 32 bytes (zeros
//! where none is stored) followed by a bitmap of [`GROUP`] bits (bit p − g of byte
//! (p − g) / 8, least significant first: set where one is stored), [`GROUP_BYTES`] in
//! all. Stores written before groups hold one 32-byte entry per position under the
//! same key layout (`sealed_key(deal, run, p)`); a value's length tells them apart,
//! reads fall back to them, and a group created over an old entry at g takes it in. The
//! key layout (and so garbage collection by run prefix) is unchanged.

use super::error::Result;
use super::meta;
use dpor_core::state::RunId;
use std::collections::BTreeMap;

/// Positions per group: 128.
pub(crate) const GROUP: u64 = 128;

/// Bytes of a group's value: 128 σ̃ of 32 bytes and a 16-byte bitmap.
pub(crate) const GROUP_BYTES: usize = GROUP as usize * 32 + GROUP as usize / 8;

/// The σ̃ at `slot` of a group's value, if stored.
fn get(group: &[u8], slot: usize) -> Option<[u8; 32]> {
    if group.len() != GROUP_BYTES || slot >= GROUP as usize {
        return None;
    }
    let bits = &group[GROUP as usize * 32..];
    if bits[slot / 8] & (1 << (slot % 8)) == 0 {
        return None;
    }
    group[slot * 32..slot * 32 + 32].try_into().ok()
}

/// Sets the σ̃ at `slot` of a group's value (of [`GROUP_BYTES`]).
fn set(group: &mut [u8], slot: usize, sealed: &[u8; 32]) {
    group[slot * 32..slot * 32 + 32].copy_from_slice(sealed);
    group[GROUP as usize * 32 + slot / 8] |= 1 << (slot % 8);
}

/// The sled entries that store `sealed` at positions `start..` of `run`, merged into
/// the groups already stored (read from `db`): (key, value) per group touched.
///
/// Errors: [`super::StoreError::Sled`].
pub(crate) fn entries(db: &sled::Db, deal: u64, run: RunId, start: u64, sealed: &[[u8; 32]]) -> Result<Vec<([u8; 29], Vec<u8>)>> {
    let mut groups: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (p, s) in (start..).zip(sealed) {
        let g = p - p % GROUP;
        let group = match groups.entry(g) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let mut fresh = vec![0u8; GROUP_BYTES];
                match db.get(meta::sealed_key(deal, run, g))? {
                    Some(v) if v.len() == GROUP_BYTES => fresh.copy_from_slice(&v),
                    // An entry from before groups, for position g: taken in.
                    Some(v) => {
                        if let Ok(old) = <[u8; 32]>::try_from(v.as_ref()) {
                            set(&mut fresh, 0, &old);
                        }
                    }
                    None => {}
                }
                e.insert(fresh)
            }
        };
        set(group, (p - g) as usize, s);
    }
    Ok(groups.into_iter().map(|(g, v)| (meta::sealed_key(deal, run, g), v)).collect())
}

/// The σ̃ stored for positions `start..start + count` of `run` (`None` where none is).
///
/// Errors: [`super::StoreError::Sled`].
pub(crate) fn read(db: &sled::Db, deal: u64, run: RunId, start: u64, count: u64) -> Result<Vec<Option<[u8; 32]>>> {
    let mut out = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut current: Option<(u64, Option<sled::IVec>)> = None;
    for p in start..start.saturating_add(count) {
        let g = p - p % GROUP;
        if current.as_ref().is_none_or(|(at, _)| *at != g) {
            current = Some((g, db.get(meta::sealed_key(deal, run, g))?));
        }
        let at_g = current.as_ref().and_then(|(_, v)| v.as_ref());
        let found = match at_g {
            Some(v) if v.len() == GROUP_BYTES => get(v, (p - g) as usize),
            _ => None,
        };
        let found = match found {
            Some(s) => Some(s),
            // Entries from before groups: one per position (at g, the value read above
            // unless it is a group, which took that entry in).
            None if p == g => at_g.and_then(|v| <[u8; 32]>::try_from(v.as_ref()).ok()),
            None => db.get(meta::sealed_key(deal, run, p))?.and_then(|v| <[u8; 32]>::try_from(v.as_ref()).ok()),
        };
        out.push(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_core::RunTag;

    fn db() -> (tempfile::TempDir, sled::Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path().join("db")).open().unwrap();
        (dir, db)
    }

    fn apply(db: &sled::Db, e: Vec<([u8; 29], Vec<u8>)>) {
        for (k, v) in e {
            db.insert(k, v).unwrap();
        }
    }

    /// Stored ranges across group edges read back as a plain map of positions does.
    #[test]
    fn groups_read_back_as_a_map() {
        let (_d, db) = db();
        let run = RunId { tag: RunTag::C, built_at: 0 };
        let mut model: BTreeMap<u64, [u8; 32]> = BTreeMap::new();
        for (start, len, byte) in [(0u64, 5usize, 1u8), (120, 20, 2), (127, 1, 3), (300, 400, 4), (2, 1, 5)] {
            let s: Vec<[u8; 32]> = (0..len).map(|i| [byte.wrapping_add(i as u8); 32]).collect();
            apply(&db, entries(&db, 7, run, start, &s).unwrap());
            for (i, v) in s.iter().enumerate() {
                model.insert(start + i as u64, *v);
            }
        }
        let got = read(&db, 7, run, 0, 800).unwrap();
        for (p, v) in got.iter().enumerate() {
            assert_eq!(*v, model.get(&(p as u64)).copied(), "position {p}");
        }
        // Another run and another deal see none of it.
        assert!(read(&db, 7, RunId { tag: RunTag::C, built_at: 1 }, 0, 10).unwrap().iter().all(Option::is_none));
        assert!(read(&db, 8, run, 0, 10).unwrap().iter().all(Option::is_none));
    }

    /// A store written before groups (one 32-byte entry per position) reads as before,
    /// and new σ̃ stored over it keep the old ones, including the one at a group's start.
    #[test]
    fn old_entries_are_read_and_taken_in() {
        let (_d, db) = db();
        let run = RunId { tag: RunTag::level(3), built_at: 9 };
        for p in [0u64, 1, 128, 129, 200] {
            db.insert(meta::sealed_key(1, run, p), vec![p as u8; 32]).unwrap();
        }
        let old = read(&db, 1, run, 0, 256).unwrap();
        for p in 0..256u64 {
            assert_eq!(old[p as usize], [0u64, 1, 128, 129, 200].contains(&p).then_some([p as u8; 32]), "position {p}");
        }
        apply(&db, entries(&db, 1, run, 2, &[[0xee; 32]; 130]).unwrap());
        let new = read(&db, 1, run, 0, 256).unwrap();
        for p in 0..256u64 {
            let want = if (2..132).contains(&p) { Some([0xee; 32]) } else { [0u64, 1, 200].contains(&p).then_some([p as u8; 32]) };
            assert_eq!(new[p as usize], want, "position {p}");
        }
    }
}
