//! Immutable run files: a run's coded blocks (`run-<tag>-<built_at>.blocks`, size·8s
//! bytes, position order, [`BlockFormat::coded_to_bytes`]) and its Merkle tree
//! (`run-<tag>-<built_at>.tree`: every layer of the run tree, leaves first, root
//! last: (2·size − 1)·32 bytes).
//!
//! Both are written under `.tmp` names (over the deal's spare file of the same length
//! if it has one, [`super::spares`]), fdatasync'd, renamed and the directory fsync'd
//! before any metadata names them. A dropped run's files become spares or are
//! deleted ([`retire_run`]). Reads never rehash: paths and leaves come from the
//! stored tree, so a block corrupted on disk is served with its true path.

use super::error::{Result, StoreError};
use super::spares;
use alloy_primitives::B256;
use dpor_core::block::BlockFormat;
use dpor_core::field::Fp;
use dpor_core::merkle;
use dpor_core::state::RunId;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Suffix of files being written.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// The file name stem of a run: `run-<tag>-<built_at>`.
pub(crate) fn stem(run: RunId) -> String {
    format!("run-{}-{}", run.tag.0, run.built_at)
}

/// The run a file name belongs to (`run-<tag>-<built_at>.blocks|.tree`), if any.
pub(crate) fn parse_name(name: &str) -> Option<RunId> {
    let rest = name.strip_prefix("run-")?;
    let rest = rest.strip_suffix(".blocks").or_else(|| rest.strip_suffix(".tree"))?;
    let (tag, built_at) = rest.split_once('-')?;
    Some(RunId { tag: dpor_core::RunTag(tag.parse().ok()?), built_at: built_at.parse().ok()? })
}

/// Path of a run's blocks file.
pub(crate) fn blocks_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.blocks", stem(run)))
}

/// Path of a run's tree file.
pub(crate) fn tree_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.tree", stem(run)))
}

/// Bytes on disk of a run of `size` coded blocks: blocks plus tree.
pub(crate) fn run_disk_bytes(format: &BlockFormat, size: u64) -> u64 {
    size.saturating_mul(format.coded_block_bytes() as u64).saturating_add(tree_bytes(size))
}

pub(crate) fn tree_bytes(size: u64) -> u64 {
    size.saturating_mul(2).saturating_sub(1).saturating_mul(32)
}

/// fsyncs a directory (so a rename or unlink in it is durable).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(|e| StoreError::io("fsync dir", dir, 0, e))
}

/// Writes `data` to `path` under a `.tmp` name, fsyncs and renames it; the caller
/// fsyncs the directory. On error the tmp file is removed.
fn write_durable(path: &Path, data: &[u8], pace: Pace) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let res = (|| {
        if pace == Pace::AtOnce && direct_fits(data) {
            match write_direct(&tmp, data) {
                Ok(()) => return fs::rename(&tmp, path),
                // A file system without O_DIRECT (tmpfs): through the page cache.
                Err(e) => tracing::debug!("O_DIRECT write of {} failed ({e}); writing it through the page cache", tmp.display()),
            }
        }
        let mut f = open_tmp(&tmp, data.len() as u64, 0)?;
        match pace {
            Pace::AtOnce if data.len() > STREAM_SYNC_BYTES => {
                // A large file (an upload's C is 600 MB) goes to the disk piece by
                // piece from the start, instead of all of it at the final fsync.
                for piece in data.chunks(STREAM_SYNC_BYTES) {
                    f.write_all(piece)?;
                    f.sync_data()?;
                }
            }
            Pace::AtOnce => f.write_all(data)?,
            Pace::Background => {
                for piece in data.chunks(BACKGROUND_SYNC_BYTES) {
                    f.write_all(piece)?;
                    f.sync_data()?;
                }
            }
        }
        f.sync_data()?;
        fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StoreError::io("write", path, data.len() as u64, e)
    })
}

/// The alignment O_DIRECT asks of a buffer's address, its length and the file offset
/// (the page size; most devices need only their 512-byte logical block).
const DIRECT_ALIGN: usize = 4096;

/// Whether `data` is written with O_DIRECT by [`write_durable`]: more than
/// [`STREAM_SYNC_BYTES`], placed at an aligned address ([`AlignedBytes`]), of a length
/// that is a multiple of [`DIRECT_ALIGN`]. The large runs a request waits for no longer
/// come this way (they are streamed in pieces, [`stream_run_blocks`], with O_DIRECT of
/// their own); no caller of the store passes such a buffer now.
fn direct_fits(data: &[u8]) -> bool {
    data.len() > STREAM_SYNC_BYTES && data.len().is_multiple_of(DIRECT_ALIGN) && data.as_ptr().align_offset(DIRECT_ALIGN) == 0
}

/// Writes `data` to file `tmp` ([`open_tmp`]: a spare of its length or a new file)
/// with O_DIRECT, then `fdatasync`s it: the bytes go from the buffer to the disk
/// without a copy into the page cache (the page-cache copy was 14 % of an upload's
/// CPU, issue 23). On any error the caller writes it the usual way.
fn write_direct(tmp: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = open_tmp(tmp, data.len() as u64, rustix::fs::OFlags::DIRECT.bits() as i32)?;
    for (k, piece) in data.chunks(STREAM_SYNC_BYTES).enumerate() {
        f.write_all_at(piece, (k * STREAM_SYNC_BYTES) as u64)?;
    }
    f.sync_data()
}

/// Opens `tmp` (open flags `flags` besides write and create) to write a file of `len`
/// bytes from its start: the deal's spare of that length if there is one
/// ([`spares::take`], renamed to `tmp` and written over in place: nothing freed or
/// allocated), else an empty file (any old file at `tmp` truncated).
///
/// Its writer syncs it with `fdatasync`, which makes its bytes, length and
/// allocation durable (fdatasync(2)); its name becomes durable when the directory is
/// synced after the rename.
fn open_tmp(tmp: &Path, len: u64, flags: i32) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let reused = tmp.parent().is_some_and(|dir| spares::take(dir, len, tmp));
    let f = OpenOptions::new().write(true).create(true).truncate(!reused).custom_flags(flags).open(tmp)?;
    if reused && f.metadata()?.len() != len {
        // Not the length its name gave (changed behind the store's back): start empty.
        f.set_len(0)?;
    }
    Ok(f)
}

/// A buffer whose bytes start at an address aligned to [`DIRECT_ALIGN`], so that
/// [`write_direct`] can take it (a `Vec` over-allocated by the alignment: no `unsafe`).
struct AlignedBytes {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes at an aligned address.
    fn zeroed(len: usize) -> Self {
        let buf = vec![0u8; len + DIRECT_ALIGN];
        let start = buf.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
        AlignedBytes { buf, start, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// How a run file reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Written whole, then fsynced once (fsynced every [`STREAM_SYNC_BYTES`] on the
    /// way when larger): the fastest, for runs a request waits for.
    AtOnce,
    /// Fsynced every [`BACKGROUND_SYNC_BYTES`] as it is written, for runs the
    /// background builder writes: a file system journals fsyncs in order (ext4's
    /// data=ordered), so one fsync of hundreds of MiB of dirty pages can stall a
    /// write's small fsync behind it. Small steps bound what a write can wait for, as
    /// RocksDB's `bytes_per_sync` does (bench, 16 MiB file: the slowest write beside
    /// a background C build 40 ms paced, 63 ms at once; one run each).
    Background,
}

/// The step of [`Pace::Background`]: 1 MiB, a few ms of disk time.
pub(crate) const BACKGROUND_SYNC_BYTES: usize = 1 << 20;

/// Runs a request waits for larger than this are converted, hashed and written with
/// O_DIRECT in pieces of about this size ([`stream_run_blocks`]). Where O_DIRECT is
/// refused, such a file goes through the page cache fsynced every piece, so the disk
/// starts on the first piece and the final fsync waits for one piece. Measured on an
/// upload of 256 MiB (docs/PERFORMANCE.md).
const STREAM_SYNC_BYTES: usize = 32 << 20;

/// Writes run `run` (coded blocks `blocks`, flat, a power-of-two count of `format`
/// width) with its tree, durably (the directory is fsync'd). Returns the run root
/// (equal to `merkle::run_tree(..).root()`). On error nothing of the run is left.
pub(crate) fn write_run(dir: &Path, run: RunId, format: &BlockFormat, blocks: &[Fp]) -> Result<B256> {
    write_run_paced(dir, run, format, blocks, Pace::AtOnce)
}

/// [`write_run`], with the files written at `pace`.
pub(crate) fn write_run_paced(dir: &Path, run: RunId, format: &BlockFormat, blocks: &[Fp], pace: Pace) -> Result<B256> {
    let root = write_run_files_paced(dir, run, format, blocks, pace)?;
    if let Err(e) = sync_dir(dir) {
        remove_run(dir, run);
        return Err(e);
    }
    Ok(root)
}

fn write_run_files_paced(dir: &Path, run: RunId, format: &BlockFormat, blocks: &[Fp], pace: Pace) -> Result<B256> {
    let bp = blocks_path(dir, run);
    let tp = tree_path(dir, run);
    let res = match pace {
        // A large run a request waits for (an upload's C, a C-rebuild not deferred):
        // converted on every core, and its blocks file written (with O_DIRECT) on a
        // thread of its own while the tree is hashed (issue 23). Smaller runs keep
        // the one-thread path below (a single write's levels: no thread per write).
        Pace::AtOnce if blocks.len() * dpor_core::field::ELEMENT_BYTES > STREAM_SYNC_BYTES => {
            check_run_shape(run, format, blocks).and_then(|()| stream_run_blocks(&bp, format, blocks))
        }
        // The background builder's, and smaller runs: one thread (the builder's pool
        // has one; it runs beside writes).
        Pace::AtOnce | Pace::Background => run_bytes(run, format, blocks)
            .and_then(|bytes| run_tree_bytes(format, &bytes).and_then(|tree| write_durable(&bp, &bytes, pace).map(|_| tree))),
    }
    .and_then(|(tree, root)| write_durable(&tp, &tree, pace).map(|_| root));
    if res.is_err() {
        remove_run(dir, run);
    }
    res
}

/// Hashes a run's blocks file `bytes` ([`run_tree_bytes`], on rayon's pool) while
/// `write` puts the same bytes on disk on a thread of its own: the file's bytes do not
/// wait for its hashes, nor the hashes for the disk (issue 23). Returns the writer's
/// result (`Err` if it panicked) and the tree file's bytes with the root.
fn hash_while_writing<R: Send>(
    format: &BlockFormat,
    bytes: &[u8],
    write: impl FnOnce() -> R + Send,
) -> (std::thread::Result<R>, Result<(Vec<u8>, B256)>) {
    std::thread::scope(|s| {
        let w = s.spawn(write);
        let tree = run_tree_bytes(format, bytes);
        (w.join(), tree)
    })
}

/// The blocks file's bytes of run `run` (coded blocks `blocks`, flat, a power-of-two
/// count of `format`'s width), converted once into one buffer on this thread.
fn run_bytes(run: RunId, format: &BlockFormat, blocks: &[Fp]) -> Result<Vec<u8>> {
    check_run_shape(run, format, blocks)?;
    Ok(dpor_core::block::elements_to_bytes(blocks))
}

/// Writes the blocks file `bp` of a large run a request waits for (an upload's C, a
/// C-rebuild not deferred) piece by piece, and returns its tree file's bytes and root
/// (as [`run_tree_bytes`] of the whole file). Each piece of about
/// [`STREAM_SYNC_BYTES`] ([`piece_blocks`]) is converted on every core into one of
/// two reused buffers aligned for O_DIRECT, its blocks' chunk trees are hashed, and a
/// thread of its own writes it (O_DIRECT where the file system takes it, else through
/// the page cache, fdatasync'd piece by piece) while the next piece is converted and
/// hashed. The run is never held whole as bytes: it was, beside C's elements (for an
/// upload of 256 MiB, 600 MB of fresh pages faulted in, and unmapped on the answer's
/// path; issue 23). The file is written under its `.tmp` name, fdatasync'd and
/// renamed; on error the `.tmp` file is removed.
fn stream_run_blocks(bp: &Path, format: &BlockFormat, blocks: &[Fp]) -> Result<(Vec<u8>, B256)> {
    let tmp = tmp_of(bp);
    let len = blocks.len() * dpor_core::field::ELEMENT_BYTES;
    let per_piece = piece_blocks(format.coded_block_bytes()) * format.width();
    let mut written = Err(std::io::Error::other("not written"));
    if len.is_multiple_of(DIRECT_ALIGN) {
        written = stream_to(&tmp, format, blocks, per_piece, true);
        if let Err(e) = &written {
            // A file system without O_DIRECT (tmpfs): through the page cache.
            tracing::debug!("O_DIRECT write of {} failed ({e}); writing it through the page cache", tmp.display());
        }
    }
    if written.is_err() {
        written = stream_to(&tmp, format, blocks, per_piece, false);
    }
    match written.and_then(|roots| fs::rename(&tmp, bp).map(|()| roots)) {
        Ok(roots) => tree_of_block_roots(&roots),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(StoreError::io("write", bp, len as u64, e))
        }
    }
}

/// Coded blocks per piece of [`stream_run_blocks`]: about [`STREAM_SYNC_BYTES`] of
/// them, a multiple of the count whose bytes fill whole [`DIRECT_ALIGN`] units (512
/// coded blocks of 4696 bytes for β = 4096), so that every piece but a run's last
/// starts and ends on the alignment O_DIRECT asks for.
fn piece_blocks(coded_block_bytes: usize) -> usize {
    let (mut a, mut b) = (coded_block_bytes.max(1), DIRECT_ALIGN);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let align_blocks = DIRECT_ALIGN / a;
    (STREAM_SYNC_BYTES / coded_block_bytes.max(1)).max(1).div_ceil(align_blocks) * align_blocks
}

/// [`stream_run_blocks`]' writing: the file `tmp` ([`open_tmp`], with O_DIRECT if
/// `direct`) written from `blocks`, `per_piece` elements at a time; returns the
/// block roots of all of its coded blocks, in order.
fn stream_to(tmp: &Path, format: &BlockFormat, blocks: &[Fp], per_piece: usize, direct: bool) -> std::io::Result<Vec<B256>> {
    use std::sync::mpsc;
    let element_bytes = dpor_core::field::ELEMENT_BYTES;
    let flags = if direct { rustix::fs::OFlags::DIRECT.bits() as i32 } else { 0 };
    let f = open_tmp(tmp, (blocks.len() * element_bytes) as u64, flags)?;
    let coded = format.coded_block_bytes();
    let piece_bytes = per_piece * element_bytes;
    // Pieces go to the writer one at a time and their buffers come back for reuse.
    let (to_writer, pieces) = mpsc::sync_channel::<(AlignedBytes, usize, u64)>(1);
    let (give_back, returned) = mpsc::channel::<AlignedBytes>();
    let mut roots = Vec::with_capacity(blocks.len() / format.width().max(1));
    std::thread::scope(|s| {
        let writer = s.spawn(move || -> std::io::Result<()> {
            for (buf, n, at) in pieces {
                f.write_all_at(&buf.as_slice()[..n], at)?;
                if !direct {
                    f.sync_data()?;
                }
                // The converter may have stopped: then the buffer is simply dropped.
                let _ = give_back.send(buf);
            }
            f.sync_data()
        });
        let mut fresh = 2;
        for (k, piece) in blocks.chunks(per_piece).enumerate() {
            let mut buf = if fresh > 0 {
                fresh -= 1;
                AlignedBytes::zeroed(piece_bytes)
            } else {
                match returned.recv() {
                    Ok(buf) => buf,
                    // The writer stopped (an error): its join below says why.
                    Err(_) => break,
                }
            };
            let n = piece.len() * element_bytes;
            dpor_core::block::elements_to_bytes_par_into(piece, &mut buf.as_mut_slice()[..n]);
            let coded_blocks: Vec<&[u8]> = buf.as_slice()[..n].chunks_exact(coded).collect();
            roots.extend(merkle::block_roots(&coded_blocks));
            if to_writer.send((buf, n, (k * piece_bytes) as u64)).is_err() {
                break;
            }
        }
        drop(to_writer);
        writer.join().unwrap_or_else(|_| Err(std::io::Error::other("the run file writer panicked")))
    })?;
    Ok(roots)
}

fn check_run_shape(run: RunId, format: &BlockFormat, blocks: &[Fp]) -> Result<()> {
    let width = format.width();
    let size = blocks.len() / width.max(1);
    if size == 0 || !size.is_power_of_two() || !blocks.len().is_multiple_of(width) {
        return Err(StoreError::Corrupt(format!("run {run} has {} elements", blocks.len())));
    }
    Ok(())
}

/// The tree file's bytes (every layer, leaves first) and the root of the run whose
/// blocks file holds `bytes`: chunk trees, leaves and layers hashed in SIMD lanes on
/// every core (rayon, in dpor-core).
fn run_tree_bytes(format: &BlockFormat, bytes: &[u8]) -> Result<(Vec<u8>, B256)> {
    let coded: Vec<&[u8]> = bytes.chunks_exact(format.coded_block_bytes()).collect();
    tree_of_block_roots(&merkle::block_roots(&coded))
}

/// The tree file's bytes and the root of the run whose coded blocks have the block
/// roots `block_roots`, in position order ([`run_tree_bytes`]).
fn tree_of_block_roots(block_roots: &[B256]) -> Result<(Vec<u8>, B256)> {
    let leaves: Vec<B256> = merkle::run_leaves(block_roots);
    let size = leaves.len() as u64;
    let tree = merkle::MerkleTree::new(leaves)?;
    let mut out = Vec::with_capacity(tree_bytes(size) as usize);
    for layer in tree.layers() {
        for n in layer {
            out.extend_from_slice(n.as_slice());
        }
    }
    Ok((out, tree.root()))
}

/// Writes `data` to file `tmp` ([`open_tmp`]: a spare of its length or a new file),
/// `fdatasync`ed if `sync`.
fn write_tmp(tmp: &Path, data: &[u8], sync: bool) -> std::io::Result<File> {
    let mut f = open_tmp(tmp, data.len() as u64, 0)?;
    f.write_all(data)?;
    if sync {
        f.sync_data()?;
    }
    Ok(f)
}

/// Writes several runs' files (a batch's) as they become known, with every file's
/// fsync issued together at the end ([`super::fsync`]): [`RunWriter::stage`] hashes a
/// run and writes its two files under `.tmp` names (no fsync; a batch stages its
/// runs from a second thread while it goes on computing the next ones);
/// [`RunWriter::finish`] fsyncs them all at once and renames them. The caller fsyncs
/// the directory. A writer dropped unfinished, or a failure, leaves nothing of any of
/// its runs.
pub(crate) struct RunWriter<'a> {
    dir: &'a Path,
    format: &'a BlockFormat,
    staged: Vec<Staged>,
}

/// A run whose files are written under `.tmp` names, not yet fsynced.
struct Staged {
    run: RunId,
    root: B256,
    /// (final path, open `.tmp` file, bytes) for the blocks and the tree files.
    files: Vec<(PathBuf, File, u64)>,
}

/// Runs of at least this many bytes (64 coded blocks of 4 KiB data) are fsynced as
/// soon as [`RunWriter::stage`] writes them: a batch of 512 writes of 4 KiB leaves
/// about 17 MB of runs, tens of ms of this machine kind's disk if all of it were
/// written back at the batch's end.
pub(crate) const SYNC_AT_STAGE_BYTES: usize = 256 << 10;

fn tmp_of(path: &Path) -> PathBuf {
    let mut t = path.as_os_str().to_owned();
    t.push(TMP_SUFFIX);
    PathBuf::from(t)
}

impl<'a> RunWriter<'a> {
    /// A writer of runs into `dir`, coded blocks of `format`.
    pub(crate) fn new(dir: &'a Path, format: &'a BlockFormat) -> Self {
        RunWriter { dir, format, staged: Vec::new() }
    }

    /// Hashes run `run` (coded blocks `blocks`, flat, a power-of-two count of the
    /// format's width) and writes its files under `.tmp` names. A run of at least
    /// [`SYNC_AT_STAGE_BYTES`] is fsynced here too, so that its bytes reach the disk
    /// while the batch goes on (the writer runs beside the batch's loop) instead of
    /// all at its end; smaller ones wait for [`RunWriter::finish`], whose fsyncs share
    /// one journal commit.
    /// Returns the run's root.
    /// Errors: [`StoreError::Corrupt`] for a bad shape, [`StoreError::Io`].
    pub(crate) fn stage(&mut self, run: RunId, blocks: &[Fp]) -> Result<B256> {
        let bytes = run_bytes(run, self.format, blocks)?;
        let (bp, tp) = (blocks_path(self.dir, run), tree_path(self.dir, run));
        let (bt, tt) = (tmp_of(&bp), tmp_of(&tp));
        let sync = bytes.len() >= SYNC_AT_STAGE_BYTES;
        // The blocks file is written (and fsynced if large) on one thread while the
        // tree is hashed on the others: the file's bytes do not wait for its hashes.
        let (written, tree) = hash_while_writing(self.format, &bytes, || write_tmp(&bt, &bytes, sync));
        let written = written.unwrap_or_else(|_| Err(std::io::Error::other("the run file writer panicked")));
        let fail = |e: StoreError| {
            let _ = fs::remove_file(&bt);
            let _ = fs::remove_file(&tt);
            e
        };
        let blocks_file = written.map_err(|e| fail(StoreError::io("write", &bp, bytes.len() as u64, e)))?;
        let (tree, root) = tree.map_err(fail)?;
        let tree_file = write_tmp(&tt, &tree, sync).map_err(|e| fail(StoreError::io("write", &tp, tree.len() as u64, e)))?;
        let files = vec![(bp, blocks_file, bytes.len() as u64), (tp, tree_file, tree.len() as u64)];
        self.staged.push(Staged { run, root, files });
        Ok(root)
    }

    /// fsyncs every staged file together, then renames them into place. Returns each
    /// staged run with its root, in staging order. On error nothing is left.
    pub(crate) fn finish(mut self) -> Result<Vec<(RunId, B256)>> {
        let staged = std::mem::take(&mut self.staged);
        let refs: Vec<&File> = staged.iter().flat_map(|s| s.files.iter().map(|(_, f, _)| f)).collect();
        let results = super::fsync::sync_together(&refs, false);
        drop(refs);
        let all: Vec<(&PathBuf, u64)> = staged.iter().flat_map(|s| s.files.iter().map(|(p, _, n)| (p, *n))).collect();
        let cleanup = |all: &[(&PathBuf, u64)]| {
            for (p, _) in all {
                let _ = fs::remove_file(tmp_of(p));
                let _ = fs::remove_file(p);
            }
        };
        for ((path, len), r) in all.iter().zip(results) {
            if let Err(e) = r {
                cleanup(&all);
                return Err(StoreError::io("fsync", path, *len, e));
            }
        }
        for (path, len) in &all {
            if let Err(e) = fs::rename(tmp_of(path), path) {
                cleanup(&all);
                return Err(StoreError::io("rename", path, *len, e));
            }
        }
        Ok(staged.iter().map(|s| (s.run, s.root)).collect())
    }
}

impl Drop for RunWriter<'_> {
    /// An unfinished writer removes its `.tmp` files.
    fn drop(&mut self) {
        for s in &self.staged {
            for (p, _, _) in &s.files {
                let _ = fs::remove_file(tmp_of(p));
            }
        }
    }
}

/// Removes a run's files (best effort; missing files are fine).
pub(crate) fn remove_run(dir: &Path, run: RunId) {
    for p in [blocks_path(dir, run), tree_path(dir, run)] {
        let _ = fs::remove_file(&p);
    }
}

/// The step of [`remove_file_gradually`]: 16 MiB.
pub(crate) const DELETE_STEP_BYTES: u64 = 16 << 20;

/// Deletes a file for the background builder: a file larger than
/// [`DELETE_STEP_BYTES`] is first truncated in steps of that size (with a yield
/// between steps), then unlinked. Freeing hundreds of MiB in one unlink holds the
/// file system long enough to stall a write's fsync behind it (measured here: a
/// 4 KiB write + fsync waited up to 47 ms beside the unlink of a 600 MB file, 3.6 ms
/// beside the same file truncated in 16 MiB steps; RocksDB deletes its files in
/// chunks for the same reason, `bytes_max_delete_chunk`).
fn remove_file_gradually(p: &Path) {
    if let Ok(f) = OpenOptions::new().write(true).open(p) {
        let mut len = f.metadata().map(|m| m.len()).unwrap_or(0);
        while len > DELETE_STEP_BYTES {
            len -= DELETE_STEP_BYTES;
            if f.set_len(len).is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let _ = fs::remove_file(p);
}

/// Retires the files of `run`, a run no record references any more: each is kept as
/// the spare of its length ([`spares::keep`], if at most `spare_max` bytes) for the
/// next run file of that length to be written over, or else deleted (step by step
/// as [`remove_file_gradually`] does if `gradually`). Best effort, like
/// [`remove_run`]; the caller syncs the directory.
pub(crate) fn retire_run(dir: &Path, run: RunId, spare_max: u64, gradually: bool) {
    for p in [blocks_path(dir, run), tree_path(dir, run)] {
        if spares::keep(dir, &p, spare_max) {
            continue;
        }
        if gradually {
            remove_file_gradually(&p);
        } else {
            let _ = fs::remove_file(&p);
        }
    }
}

fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| StoreError::io("open", path, 0, e))
}

fn read_at(f: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, offset).map_err(|e| StoreError::io("read", path, 0, e))?;
    Ok(buf)
}

/// Coded blocks at `positions` of a run.
pub(crate) fn read_positions(dir: &Path, run: RunId, format: &BlockFormat, positions: &[u64]) -> Result<Vec<Vec<u8>>> {
    let path = blocks_path(dir, run);
    let f = open(&path)?;
    let cb = format.coded_block_bytes();
    positions.iter().map(|p| read_at(&f, &path, p.saturating_mul(cb as u64), cb)).collect()
}

/// A whole run as field elements (for HAdd): errors ([`StoreError::Corrupt`]) if the
/// file holds a non-canonical element.
pub(crate) fn read_elements(dir: &Path, run: RunId, format: &BlockFormat, size: u64) -> Result<Vec<Fp>> {
    let path = blocks_path(dir, run);
    let f = open(&path)?;
    let bytes = read_at(&f, &path, 0, (size as usize).saturating_mul(format.coded_block_bytes()))?;
    dpor_core::block::elements_from_bytes(&bytes).map_err(|e| StoreError::Corrupt(format!("run file {}: {e}", path.display())))
}

/// The run-tree paths (siblings from the leaf up) of `positions` in a run of `size`.
pub(crate) fn read_paths(dir: &Path, run: RunId, size: u64, positions: &[u64]) -> Result<Vec<Vec<B256>>> {
    let path = tree_path(dir, run);
    let f = open(&path)?;
    let depth = size.trailing_zeros();
    let mut out = Vec::with_capacity(positions.len());
    for &pos in positions {
        let mut siblings = Vec::with_capacity(depth as usize);
        let mut layer_start = 0u64;
        for h in 0..depth {
            let idx = (pos >> h) ^ 1;
            let b = read_at(&f, &path, (layer_start + idx) * 32, 32)?;
            siblings.push(B256::from_slice(&b));
            layer_start += size >> h;
        }
        out.push(siblings);
    }
    Ok(out)
}

/// A served position: the coded block (empty if unreadable) and its path prefix.
pub(crate) type ServedItem = (Vec<u8>, Vec<B256>);

/// What a damaged run still gives, position by position (for public reads): the
/// coded blocks of `positions` that can be read in full (an empty vector where the
/// blocks file is missing, short or unreadable there), each with the longest prefix
/// of its run-tree path that the tree file still holds (empty if the tree is
/// missing; no paths at all unless `with_paths`). Nothing is rehashed: a reader
/// verifies each block against the run root ([`dpor_core::salvage`]). Returns the
/// served items and how many positions lacked a block or a full path.
pub(crate) fn read_served(
    dir: &Path,
    run: RunId,
    format: &BlockFormat,
    size: u64,
    positions: &[u64],
    with_paths: bool,
) -> (Vec<ServedItem>, usize) {
    let cb = format.coded_block_bytes();
    let blocks = File::open(blocks_path(dir, run)).ok();
    let tree = if with_paths { File::open(tree_path(dir, run)).ok() } else { None };
    let depth = size.trailing_zeros();
    let mut damaged = 0;
    let out = positions
        .iter()
        .map(|&pos| {
            let block = blocks
                .as_ref()
                .and_then(|f| {
                    let mut buf = vec![0u8; cb];
                    f.read_exact_at(&mut buf, pos.saturating_mul(cb as u64)).ok().map(|_| buf)
                })
                .unwrap_or_default();
            let mut path = Vec::with_capacity(depth as usize);
            if let Some(f) = &tree {
                let mut layer_start = 0u64;
                for h in 0..depth {
                    let mut b = [0u8; 32];
                    if f.read_exact_at(&mut b, (layer_start + ((pos >> h) ^ 1)) * 32).is_err() {
                        break;
                    }
                    path.push(B256::from(b));
                    layer_start += size >> h;
                }
            }
            if block.is_empty() || (with_paths && path.len() < depth as usize) {
                damaged += 1;
            }
            (block, path)
        })
        .collect();
    (out, damaged)
}

/// Run-tree leaves `start..start+count` of a run.
pub(crate) fn read_leaves(dir: &Path, run: RunId, start: u64, count: u64) -> Result<Vec<B256>> {
    let path = tree_path(dir, run);
    let f = open(&path)?;
    let b = read_at(&f, &path, start.saturating_mul(32), (count as usize).saturating_mul(32))?;
    Ok(b.chunks_exact(32).map(B256::from_slice).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_core::RunTag;

    /// A large run written at once goes through O_DIRECT from an aligned buffer (or,
    /// where the file system refuses it, the page cache): either way the file holds
    /// exactly the bytes, and the run's files read back as written. Unaligned or
    /// smaller buffers take the usual path.
    #[test]
    fn a_large_run_written_directly_reads_back_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = STREAM_SYNC_BYTES + 3 * DIRECT_ALIGN;
        let mut data = AlignedBytes::zeroed(len);
        for (i, b) in data.as_mut_slice().iter_mut().enumerate() {
            *b = (i as u64).wrapping_mul(0x9e37_79b9).wrapping_shr(7) as u8;
        }
        assert!(direct_fits(data.as_slice()));
        assert!(!direct_fits(&data.as_slice()[1..]), "an unaligned start is not written directly");
        assert!(!direct_fits(&data.as_slice()[..len - 512]), "nor a length off the alignment");
        let path = dir.path().join("direct.bin");
        write_durable(&path, data.as_slice(), Pace::AtOnce).expect("write");
        assert_eq!(fs::read(&path).expect("read"), data.as_slice());
        assert!(!tmp_of(&path).exists());
        // The same through `write_run`: C of 2^13 coded blocks of β = 4096 (38 MB).
        let format = BlockFormat::default();
        let blocks: Vec<Fp> = (0..(1u64 << 13) * format.width() as u64).map(|i| Fp::from(i.wrapping_mul(0x2545_f491))).collect();
        let run = RunId { tag: RunTag::C, built_at: 7 };
        let root = write_run(dir.path(), run, &format, &blocks).expect("run");
        let bytes = fs::read(blocks_path(dir.path(), run)).expect("blocks");
        assert_eq!(bytes, dpor_core::block::elements_to_bytes(&blocks));
        assert_eq!(run_tree_bytes(&format, &bytes).expect("tree").1, root);
    }

    /// A large run is streamed in pieces ([`stream_run_blocks`]): through O_DIRECT
    /// and through the page cache alike, the file holds exactly the run's bytes and the
    /// block roots are those of the whole file, whatever piece size cuts the run
    /// (a last piece shorter than the others included); every piece but the last is
    /// whole coded blocks on the O_DIRECT alignment, for any β.
    #[test]
    fn a_large_run_streamed_in_pieces_is_the_whole_runs_bytes_and_roots() {
        for beta in [1usize, 7, 100, 4096, 5000, 65536] {
            let format = BlockFormat::new(beta).expect("format");
            let coded = format.coded_block_bytes();
            let per = piece_blocks(coded);
            assert_eq!(per * coded % DIRECT_ALIGN, 0, "β = {beta}: a piece of {per} blocks is off the alignment");
            assert!(per * coded >= STREAM_SYNC_BYTES && per * coded < STREAM_SYNC_BYTES + coded * DIRECT_ALIGN, "β = {beta}: {per} blocks");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        // Whether this file system takes O_DIRECT at all (tmpfs does not).
        let direct_taken = {
            use std::os::unix::fs::OpenOptionsExt;
            let flags = rustix::fs::OFlags::DIRECT.bits() as i32;
            OpenOptions::new().write(true).create(true).custom_flags(flags).open(dir.path().join("probe")).is_ok()
        };
        let format = BlockFormat::default();
        // 1536 coded blocks (7.2 MB): pieces of 1024 leave a last one of 512.
        let size = 1536u64;
        let blocks: Vec<Fp> = (0..size * format.width() as u64).map(|i| Fp::from(i.wrapping_mul(0x9e37_79b9) ^ 0x5a5a)).collect();
        let bytes = dpor_core::block::elements_to_bytes(&blocks);
        let coded: Vec<&[u8]> = bytes.chunks_exact(format.coded_block_bytes()).collect();
        let want = merkle::block_roots(&coded);
        for direct in [false, true] {
            for per in [7usize, 512, 1024, 4096] {
                let tmp = dir.path().join(format!("run-{direct}-{per}.tmp"));
                match stream_to(&tmp, &format, &blocks, per * format.width(), direct) {
                    Ok(roots) => {
                        assert_eq!(roots, want, "direct {direct}, {per} blocks a piece: roots");
                        assert_eq!(fs::read(&tmp).expect("read"), bytes, "direct {direct}, {per} blocks a piece: bytes");
                    }
                    // Pieces off the alignment (7 blocks), or O_DIRECT refused: the
                    // caller falls back to the page cache, tested with `direct` false.
                    Err(e) => assert!(direct && (per == 7 || !direct_taken), "direct {direct}, {per} blocks a piece: {e}"),
                }
            }
        }
    }

    #[test]
    fn a_run_removed_gradually_leaves_no_file_whatever_its_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (i, len) in [0u64, 1, DELETE_STEP_BYTES, DELETE_STEP_BYTES + 1, 3 * DELETE_STEP_BYTES + 12345].into_iter().enumerate() {
            let run = RunId { tag: RunTag::C, built_at: i as u64 };
            let f = File::create(blocks_path(dir.path(), run)).expect("create");
            f.set_len(len).expect("set_len");
            fs::write(tree_path(dir.path(), run), [7u8; 96]).expect("tree");
            retire_run(dir.path(), run, 0, true);
            assert!(!blocks_path(dir.path(), run).exists(), "{len} bytes: blocks file left");
            assert!(!tree_path(dir.path(), run).exists(), "{len} bytes: tree file left");
        }
        // Missing files are fine.
        retire_run(dir.path(), RunId { tag: RunTag::C, built_at: 99 }, 0, true);
        assert_eq!(fs::read_dir(dir.path()).expect("read_dir").count(), 0);
    }

    /// A dropped run's files become the spares of their lengths, and the next run of
    /// the same size, written at once or through a [`RunWriter`], is written over them
    /// in place (the same inodes): its files hold exactly its bytes and its root is
    /// the reference tree's. A spare whose length is not its name's is not trusted.
    #[test]
    fn a_retired_run_is_written_over_by_the_next_of_its_size() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let format = BlockFormat::default();
        let run_of = |seed: u64, size: u64| -> Vec<Fp> {
            (0..size * format.width() as u64).map(|i| Fp::from(i.wrapping_mul(0x9e37_79b9).wrapping_add(seed))).collect()
        };
        let ino = |p: PathBuf| fs::metadata(p).expect("metadata").ino();
        let check = |run: RunId, blocks: &[Fp], root: B256| {
            let bytes = fs::read(blocks_path(d, run)).expect("blocks");
            assert_eq!(bytes, dpor_core::block::elements_to_bytes(blocks), "{run}: blocks file");
            let (tree, want) = run_tree_bytes(&format, &bytes).expect("tree");
            assert_eq!(root, want, "{run}: root");
            assert_eq!(fs::read(tree_path(d, run)).expect("tree file"), tree, "{run}: tree file");
        };
        let max = 1 << 30;

        // Written at once over the spares of a retired run of the same size.
        let first = RunId { tag: RunTag::level(3), built_at: 16 };
        write_run(d, first, &format, &run_of(1, 16)).expect("first");
        let (b_ino, t_ino) = (ino(blocks_path(d, first)), ino(tree_path(d, first)));
        retire_run(d, first, max, true);
        assert!(!blocks_path(d, first).exists() && !tree_path(d, first).exists());
        let second = RunId { tag: RunTag::level(3), built_at: 32 };
        let blocks = run_of(2, 16);
        let root = write_run(d, second, &format, &blocks).expect("second");
        check(second, &blocks, root);
        assert_eq!((ino(blocks_path(d, second)), ino(tree_path(d, second))), (b_ino, t_ino), "written in place");
        assert!(fs::read_dir(d).expect("dir").flatten().all(|e| !e.file_name().to_string_lossy().starts_with(spares::PREFIX)));

        // Through a RunWriter, beside a run of another size that finds no spare.
        retire_run(d, second, max, false);
        let third = RunId { tag: RunTag::level(3), built_at: 48 };
        let other = RunId { tag: RunTag::level(4), built_at: 48 };
        let (b3, b4) = (run_of(3, 16), run_of(4, 32));
        let mut w = RunWriter::new(d, &format);
        let r3 = w.stage(third, &b3).expect("stage");
        let r4 = w.stage(other, &b4).expect("stage");
        assert_eq!(w.finish().expect("finish"), vec![(third, r3), (other, r4)]);
        check(third, &b3, r3);
        check(other, &b4, r4);
        assert_eq!(ino(blocks_path(d, third)), b_ino, "staged in place");

        // A run synced at stage (≥ SYNC_AT_STAGE_BYTES), new and then over the spare
        // it left.
        let big = |seed: u64| (RunId { tag: RunTag::level(5), built_at: 64 * seed }, run_of(seed, 64));
        assert!(64 * format.coded_block_bytes() >= SYNC_AT_STAGE_BYTES);
        let (b6_id, b6) = big(6);
        let mut w = RunWriter::new(d, &format);
        let r6 = w.stage(b6_id, &b6).expect("stage");
        w.finish().expect("finish");
        check(b6_id, &b6, r6);
        let big_ino = ino(blocks_path(d, b6_id));
        retire_run(d, b6_id, max, false);
        let (b7_id, b7) = big(7);
        let mut w = RunWriter::new(d, &format);
        let r7 = w.stage(b7_id, &b7).expect("stage");
        w.finish().expect("finish");
        check(b7_id, &b7, r7);
        assert_eq!(ino(blocks_path(d, b7_id)), big_ino, "a large run staged in place");

        // Over the bound, a retired run's files are deleted.
        retire_run(d, other, 100, false);
        assert!(!blocks_path(d, other).exists() && !tree_path(d, other).exists());
        assert!(!spares::path(d, 32 * format.coded_block_bytes() as u64, 0).exists() && !spares::path(d, tree_bytes(32), 0).exists());

        // A spare longer than its name says is emptied before it is written.
        retire_run(d, third, max, false);
        let spare = spares::path(d, 16 * format.coded_block_bytes() as u64, 0);
        fs::OpenOptions::new().append(true).open(spare).expect("open").write_all(&[9u8; 5000]).expect("grow");
        let fourth = RunId { tag: RunTag::level(3), built_at: 64 };
        let b5 = run_of(5, 16);
        let r5 = write_run(d, fourth, &format, &b5).expect("fourth");
        check(fourth, &b5, r5);
    }
}
