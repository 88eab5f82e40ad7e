//! The owner state file as two slots overwritten in turn (issue 23, the write max).
//!
//! A save used to write a temp file, fsync it, rename it over the state and fsync the
//! folder: four file-system journal commits per save, two saves per write, each free
//! to wait behind a large background write (ext4 `data=ordered` flushes the data of
//! every file a commit touches) and each freeing the replaced file's blocks (a
//! `discard` at the next commit on a file system mounted that way). Now the file holds
//! two fixed-size slots and a save overwrites the older one in place and `fdatasync`s
//! it: no block is allocated or freed and no metadata changes, so on ext4 the save is
//! a data write and a cache flush, outside the journal. Measured on this host
//! (docs/PERFORMANCE.md, seventh session) beside a paced 512 MiB background writer:
//! in place p99 9.4 ms and max 37 ms against 19.7 ms and 82 ms for temp file and
//! rename.
//!
//! Crash safety is the same as with the rename: a save changes only the slot that does
//! not hold the newest state, so a crash mid-save (a torn slot: its check fails) leaves
//! the state before the save, and a finished `fdatasync` leaves the state after it.
//! The newest slot is found from the file at every save, not from memory, so two
//! copies of a state saving to one file behave as before: the last save wins.
//!
//! Format (little-endian): a header of [`HEADER_BYTES`] bytes (magic [`MAGIC`], the
//! slot size in bytes as u64, zeros), then slot 0 and slot 1 of that size. A slot
//! holds `seq` (u64, the save's number, 1 for a new file), the JSON's length and the
//! blob's (u64 each), the state's JSON, the blob (the small checksum sidecars kept in
//! the state: `sigma_files::encode_inline`), then keccak256 of all of it before; the
//! rest of the slot is left as it was. The newest state is the slot whose check holds with the larger
//! `seq`. A save that does not fit a slot, or a file that is not a slot file (a
//! state file of an older version: plain JSON, still read), is written whole as a
//! new slot file the old way (temp file, rename), with slots of at least twice its
//! size. `dpor status --json` shows the state; [`read_json`] gives its JSON.

use anyhow::Context;
use std::path::Path;

/// The magic the slot file starts with.
pub(super) const MAGIC: &[u8; 24] = b"dpor-owner-state-slots-1";
/// Bytes before slot 0: the magic, the slot size, zeros (one page).
const HEADER_BYTES: u64 = 4096;
/// The smallest slot, in bytes (a state's JSON is a few kilobytes).
const MIN_SLOT_BYTES: u64 = 64 << 10;
/// Bytes of a slot's record around its contents: seq, the two lengths, the check.
const RECORD_OVERHEAD: u64 = 8 + 8 + 8 + 32;

/// What one save of the state holds: its JSON, and the small checksum sidecars kept
/// inside the state file instead of beside it (`sigma_files`: runs of at most
/// `sigma_files::INLINE_MAX_VALUES` checksum values; empty for files of older versions).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Contents<'a> {
    /// The state's JSON.
    pub json: &'a [u8],
    /// The inline checksum sidecars (`sigma_files::encode_inline`).
    pub blob: &'a [u8],
}

/// The newest state of a slot file: the slot holding it, its save number, its contents.
struct Newest<'a> {
    slot: u64,
    seq: u64,
    contents: Contents<'a>,
}

/// The newest state in the bytes `buf` of a slot file with slots of `slot_bytes`;
/// `None` when no slot checks.
fn newest(buf: &[u8], slot_bytes: u64) -> Option<Newest<'_>> {
    let mut best: Option<Newest<'_>> = None;
    for slot in 0..2u64 {
        let start = (HEADER_BYTES + slot * slot_bytes) as usize;
        let Some(s) = buf.get(start..start + slot_bytes as usize) else { continue };
        if let Some((seq, contents)) = parse_record(s) {
            if best.as_ref().is_none_or(|b| seq > b.seq) {
                best = Some(Newest { slot, seq, contents });
            }
        }
    }
    best
}

/// The slot size a slot file's header gives; `None` if `buf` is not a slot file.
fn slot_bytes_of(buf: &[u8]) -> Option<u64> {
    if !buf.starts_with(MAGIC) {
        return None;
    }
    let b = buf.get(MAGIC.len()..MAGIC.len() + 8)?;
    let slot_bytes = u64::from_le_bytes(b.try_into().ok()?);
    ((RECORD_OVERHEAD..=1 << 40).contains(&slot_bytes) && slot_bytes.is_multiple_of(4096)).then_some(slot_bytes)
}

/// A slot's record: (seq, its contents) if its lengths fit and its check holds.
fn parse_record(slot: &[u8]) -> Option<(u64, Contents<'_>)> {
    let u64_at = |o: usize| slot.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let seq = u64_at(0)?;
    let json_len = usize::try_from(u64_at(8)?).ok()?;
    let blob_len = usize::try_from(u64_at(16)?).ok()?;
    let end = json_len.checked_add(blob_len)?.checked_add(24)?;
    let body = slot.get(..end)?;
    let check = slot.get(end..end.checked_add(32)?)?;
    (seq > 0 && alloy_primitives::keccak256(body).as_slice() == check)
        .then(|| (seq, Contents { json: &body[24..24 + json_len], blob: &body[24 + json_len..] }))
}

/// A slot's record for `contents` with number `seq`.
fn record(seq: u64, contents: Contents<'_>) -> Vec<u8> {
    let mut r = Vec::with_capacity(contents.json.len() + contents.blob.len() + RECORD_OVERHEAD as usize);
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&(contents.json.len() as u64).to_le_bytes());
    r.extend_from_slice(&(contents.blob.len() as u64).to_le_bytes());
    r.extend_from_slice(contents.json);
    r.extend_from_slice(contents.blob);
    let check = alloy_primitives::keccak256(&r);
    r.extend_from_slice(check.as_slice());
    r
}

/// The contents of the state file's bytes `buf`: the newest slot of a slot file, or
/// the whole file as the JSON of an older version's plain JSON file. Errors: a slot
/// file in which no slot checks (`shown` names the file).
pub(super) fn contents_of<'a>(buf: &'a [u8], shown: &Path) -> anyhow::Result<Contents<'a>> {
    let Some(slot_bytes) = slot_bytes_of(buf) else { return Ok(Contents { json: buf, blob: &[] }) };
    match newest(buf, slot_bytes) {
        Some(n) => Ok(n.contents),
        None => anyhow::bail!("the owner state {} is corrupt: neither of its two slots checks", shown.display()),
    }
}

/// The JSON of the owner state file at `path` (the newest slot; an older version's
/// plain JSON file as it is), for tools and tests that read the state's fields.
/// Errors: the file cannot be read, or no slot of it checks, or it is not UTF-8.
pub fn read_json(path: &Path) -> anyhow::Result<String> {
    let buf = std::fs::read(path).with_context(|| format!("cannot read the owner state {}", path.display()))?;
    let json = contents_of(&buf, path)?.json;
    String::from_utf8(json.to_vec()).with_context(|| format!("the owner state {} is not UTF-8 JSON", path.display()))
}

/// Saves `contents` as the newest state of the file at `path`, durably: in place, in
/// the slot that does not hold the newest state, then `fdatasync`, when `path` is a
/// slot file with room for it; else the whole file written anew ([`write_new`]). A
/// state equal to the newest one saved leaves the file as it is.
/// Errors: the file cannot be read or written.
pub(super) fn save(path: &Path, contents: Contents<'_>) -> anyhow::Result<()> {
    let buf = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return write_new(path, 1, contents),
        Err(e) => return Err(e).with_context(|| format!("cannot read the owner state {}", path.display())),
    };
    let Some(slot_bytes) = slot_bytes_of(&buf) else {
        // An older version's JSON file: converted by this save.
        return write_new(path, 1, contents);
    };
    let found = newest(&buf, slot_bytes);
    if found.as_ref().is_some_and(|n| n.contents == contents) {
        // Saved already (a refused command saves an unchanged state): the file stays
        // byte for byte, made durable in case the save that wrote it was cut short.
        let f = std::fs::File::open(path).with_context(|| format!("cannot open the owner state {}", path.display()))?;
        return f.sync_data().with_context(|| format!("cannot fsync the owner state {}", path.display()));
    }
    let (slot, seq) = found.map_or((1, 0), |n| (n.slot, n.seq));
    let rec = record(seq + 1, contents);
    if rec.len() as u64 > slot_bytes || buf.len() as u64 != HEADER_BYTES + 2 * slot_bytes {
        return write_new(path, seq + 1, contents);
    }
    let target = 1 - slot;
    super::write_at_durably(path, HEADER_BYTES + target * slot_bytes, &rec)
}

/// Writes a new slot file at `path` holding `contents` as save number `seq`,
/// atomically and durably (temp file, fsync, rename, fsync of the folder): slots of at
/// least twice the record and [`MIN_SLOT_BYTES`], written out in full (zeros) so that
/// later saves overwrite allocated blocks. Errors: the file cannot be written.
fn write_new(path: &Path, seq: u64, contents: Contents<'_>) -> anyhow::Result<()> {
    let rec = record(seq, contents);
    let slot_bytes = (2 * rec.len() as u64).next_power_of_two().max(MIN_SLOT_BYTES);
    let mut buf = vec![0u8; (HEADER_BYTES + 2 * slot_bytes) as usize];
    buf[..MAGIC.len()].copy_from_slice(MAGIC);
    buf[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&slot_bytes.to_le_bytes());
    let at = (HEADER_BYTES + (seq % 2) * slot_bytes) as usize;
    buf[at..at + rec.len()].copy_from_slice(&rec);
    super::write_durably(path, &buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn c(json: &[u8]) -> Contents<'_> {
        Contents { json, blob: &[] }
    }

    #[test]
    fn saves_alternate_slots_in_place_and_the_newest_is_read() {
        let d = dir();
        let p = d.path().join("owner.json");
        save(&p, c(b"{\"a\":1}")).unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&p).unwrap());
        for k in 2..10 {
            save(&p, c(format!("{{\"a\":{k}}}").as_bytes())).unwrap();
            assert_eq!(read_json(&p).unwrap(), format!("{{\"a\":{k}}}"));
        }
        // The same file throughout: no rename.
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&p).unwrap()), ino);
        let buf = std::fs::read(&p).unwrap();
        assert_eq!(newest(&buf, slot_bytes_of(&buf).unwrap()).map(|n| n.seq), Some(9));
        // A blob beside the JSON comes back as saved.
        save(&p, Contents { json: b"{\"a\":9}", blob: b"sidecars" }).unwrap();
        let back = std::fs::read(&p).unwrap();
        assert_eq!(contents_of(&back, &p).unwrap(), Contents { json: b"{\"a\":9}", blob: b"sidecars" });
        save(&p, c(b"{\"a\":9}")).unwrap();
        let buf = std::fs::read(&p).unwrap();
        // The same state again: the file stays byte for byte.
        save(&p, c(b"{\"a\":9}")).unwrap();
        assert!(std::fs::read(&p).unwrap() == buf, "an unchanged state rewrote the file");
    }

    #[test]
    fn a_torn_save_leaves_the_state_before_it() {
        let d = dir();
        let p = d.path().join("owner.json");
        save(&p, c(b"{\"v\":\"old\"}")).unwrap();
        save(&p, c(b"{\"v\":\"new\"}")).unwrap();
        let buf = std::fs::read(&p).unwrap();
        let slot_bytes = slot_bytes_of(&buf).unwrap();
        let slot = newest(&buf, slot_bytes).unwrap().slot;
        // Each byte of the newest record damaged in turn: the older state is read.
        for k in [0usize, 9, 17, 20, 40] {
            let mut b = buf.clone();
            b[(HEADER_BYTES + slot * slot_bytes) as usize + k] ^= 0x40;
            std::fs::write(&p, &b).unwrap();
            assert_eq!(read_json(&p).unwrap(), "{\"v\":\"old\"}", "byte {k} of the newest slot damaged");
        }
        // Both slots damaged: a clear error, not an empty state.
        let mut b = buf.clone();
        b[(HEADER_BYTES + 16) as usize] ^= 1;
        b[(HEADER_BYTES + slot_bytes + 16) as usize] ^= 1;
        std::fs::write(&p, &b).unwrap();
        let e = read_json(&p).unwrap_err().to_string();
        assert!(e.contains("neither of its two slots"), "{e}");
        // And a save after a torn one writes over the torn slot, not the good one.
        std::fs::write(&p, &buf).unwrap();
        let mut b = buf.clone();
        b[(HEADER_BYTES + slot * slot_bytes) as usize + 20] ^= 1;
        std::fs::write(&p, &b).unwrap();
        save(&p, c(b"{\"v\":\"next\"}")).unwrap();
        assert_eq!(read_json(&p).unwrap(), "{\"v\":\"next\"}");
        let after = std::fs::read(&p).unwrap();
        assert_eq!(newest(&after, slot_bytes).map(|n| n.slot), Some(slot), "the torn slot took the save");
    }

    #[test]
    fn a_state_larger_than_a_slot_gets_a_new_file_with_larger_slots() {
        let d = dir();
        let p = d.path().join("owner.json");
        save(&p, c(b"{}")).unwrap();
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(200_000));
        save(&p, c(big.as_bytes())).unwrap();
        assert_eq!(read_json(&p).unwrap(), big);
        let buf = std::fs::read(&p).unwrap();
        assert!(slot_bytes_of(&buf).unwrap() >= 2 * big.len() as u64);
        save(&p, c(b"{\"small\":1}")).unwrap();
        assert_eq!(read_json(&p).unwrap(), "{\"small\":1}");
    }

    #[test]
    fn an_older_versions_json_file_is_read_and_converted_at_the_next_save() {
        let d = dir();
        let p = d.path().join("owner.json");
        std::fs::write(&p, b"{\"legacy\":true}").unwrap();
        assert_eq!(read_json(&p).unwrap(), "{\"legacy\":true}");
        save(&p, c(b"{\"legacy\":false}")).unwrap();
        assert!(std::fs::read(&p).unwrap().starts_with(MAGIC));
        assert_eq!(read_json(&p).unwrap(), "{\"legacy\":false}");
    }
}
