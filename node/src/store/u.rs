//! U on disk: three fixed-size files overwritten in place, index order.
//!
//! - `u.blocks`: N·β bytes, block i at i·β;
//! - `u.sealed`: N·32 bytes, σ̃_U(i) at i·32;
//! - `u.roots`: N·32 bytes, the block root of U[i] at i·32 (so the U tree is rebuilt
//!   on open without rehashing U, and a block corrupted on disk keeps its true leaf).
//!
//! All three are allocated in full when the upload begins (`fallocate`), so in-place
//! writes do not need new space. They are opened on first use and kept open while the
//! deal is among the store's most recently opened ones (`handles.rs`).
//!
//! Page cache (issue 23): the upload writes and reads `u.blocks` in pieces of MiBs,
//! which leaves large page-cache folios behind on current Linux kernels; a later 4 KiB
//! write into a large folio dirties, and its fsync writes back, the whole folio (a
//! random 4 KiB write plus its share of a batch's fsync measured 205–226 µs into such a
//! file against 30–38 µs after the pages were dropped, 256 MiB file, this machine). So
//! the upload drops the file's pages when it is done ([`UFiles::drop_cached_blocks`]),
//! and every handle of `u.blocks` asks for no read-ahead (`POSIX_FADV_RANDOM`), so
//! pages come back one by one. Both are advice: an error is ignored.

use super::error::{Result, StoreError};
use super::handles::{OpenDeals, Slot};
use alloy_primitives::B256;
use dpor_core::merkle::{self, MerkleTree};
use fs2::FileExt as _;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The U files of one deal (their handles open or closed, [`OpenDeals`]).
#[derive(Debug)]
pub(crate) struct UFiles {
    dir: PathBuf,
    block_bytes: u64,
    slot: Arc<Slot<Handles>>,
    open: Arc<OpenDeals<Handles>>,
}

/// The three open files, in [`NAMES`] order.
#[derive(Debug)]
pub(crate) struct Handles {
    blocks: File,
    sealed: File,
    roots: File,
}

impl Handles {
    fn all(&self) -> [&File; 3] {
        [&self.blocks, &self.sealed, &self.roots]
    }
}

/// Bytes on disk of U for N blocks of β bytes.
pub(crate) fn u_disk_bytes(num_blocks: u64, block_bytes: u64) -> u64 {
    num_blocks.saturating_mul(block_bytes.saturating_add(64))
}

const NAMES: [&str; 3] = ["u.blocks", "u.sealed", "u.roots"];

fn open_one(path: &Path, len: u64, create: bool) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io("open", path, len, e))?;
    let cur = f.metadata().map_err(|e| StoreError::io("stat", path, len, e))?.len();
    if cur > len && !create {
        // A resize's growth that never committed, or a committed shrink whose
        // truncation a crash cut short (`resize.rs`): the record's N is the truth.
        f.set_len(len).map_err(|e| StoreError::io("truncate", path, len, e))?;
        f.sync_all().map_err(|e| StoreError::io("fsync", path, len, e))?;
    } else if cur != len {
        if !create {
            return Err(StoreError::Corrupt(format!("{} has {cur} bytes, expected {len}", path.display())));
        }
        f.set_len(len).map_err(|e| StoreError::io("resize", path, len, e))?;
    }
    if create && len > 0 {
        f.allocate(len).map_err(|e| StoreError::io("allocate", path, len, e))?;
        f.sync_all().map_err(|e| StoreError::io("fsync", path, len, e))?;
    }
    Ok(f)
}

/// Asks the kernel for no read-ahead on `f` (advice; errors ignored).
fn advise_random(f: &File) {
    if let Err(e) = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random) {
        tracing::debug!("fadvise(RANDOM): {e}");
    }
}

impl UFiles {
    /// Creates (or resizes and allocates) the U files for N blocks of β bytes in `dir`;
    /// their handles count against `open`.
    pub(crate) fn create(dir: &Path, num_blocks: u64, block_bytes: u64, open: &Arc<OpenDeals<Handles>>) -> Result<Self> {
        Self::open_impl(dir, num_blocks, block_bytes, true, open)
    }

    /// Opens existing U files for N blocks: files longer than N blocks are cut to N
    /// (what a resize left, `resize.rs`); [`StoreError::Corrupt`] if one is shorter.
    /// Their handles count against `open`.
    pub(crate) fn open(dir: &Path, num_blocks: u64, block_bytes: u64, open: &Arc<OpenDeals<Handles>>) -> Result<Self> {
        Self::open_impl(dir, num_blocks, block_bytes, false, open)
    }

    fn open_impl(dir: &Path, n: u64, beta: u64, create: bool, open: &Arc<OpenDeals<Handles>>) -> Result<Self> {
        let lens = [n.saturating_mul(beta), n.saturating_mul(32), n.saturating_mul(32)];
        let mut files = Vec::with_capacity(3);
        for (name, len) in NAMES.iter().zip(lens) {
            files.push(open_one(&dir.join(name), len, create)?);
        }
        if create {
            super::runs::sync_dir(dir)?;
        }
        let handles = Self::handles_from(files)?;
        advise_random(&handles.blocks);
        let slot = Arc::new(Mutex::new(Some(Arc::new(handles))));
        open.register(&slot);
        Ok(Self { dir: dir.to_path_buf(), block_bytes: beta, slot, open: Arc::clone(open) })
    }

    fn handles_from(files: Vec<File>) -> Result<Handles> {
        let mut it = files.into_iter();
        match (it.next(), it.next(), it.next()) {
            (Some(blocks), Some(sealed), Some(roots)) => Ok(Handles { blocks, sealed, roots }),
            _ => Err(StoreError::Corrupt("U files".into())),
        }
    }

    /// The open files, reopened if [`OpenDeals`] closed them (their lengths were
    /// checked when the deal was opened and only this store changes them).
    fn files(&self) -> Result<Arc<Handles>> {
        self.open.get(&self.slot, || {
            let mut files = Vec::with_capacity(3);
            for name in NAMES {
                let path = self.dir.join(name);
                let f = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| StoreError::io("reopen", &path, 0, e))?;
                files.push(f);
            }
            let handles = Self::handles_from(files)?;
            advise_random(&handles.blocks);
            Ok(handles)
        })
    }

    /// Drops `u.blocks`' pages from the page cache (advice; errors ignored): what the
    /// upload calls once U is written, read back and fsynced (module docs).
    pub(crate) fn drop_cached_blocks(&self) {
        if let Ok(h) = self.files() {
            if let Err(e) = rustix::fs::fadvise(&h.blocks, 0, None, rustix::fs::Advice::DontNeed) {
                tracing::debug!("fadvise(DONTNEED) on {}: {e}", self.path(0).display());
            }
        }
    }

    /// Grows U from `old_n` to `new_n` blocks (a resize, App. A.3): allocates the
    /// files, and gives blocks `old_n..new_n` zero bytes, σ̃ = [`ZERO_BLOCK_U`] (zero
    /// bytes too) and the zero block's root, then fsyncs. Uncommitted until the
    /// caller's record says N = `new_n` (a shorter N on open cuts the files back).
    ///
    /// [`ZERO_BLOCK_U`]: dpor_core::checksum::ZERO_BLOCK_U
    pub(crate) fn grow(&self, old_n: u64, new_n: u64) -> Result<()> {
        let beta = self.block_bytes;
        let h = self.files()?;
        let lens = [new_n.saturating_mul(beta), new_n.saturating_mul(32), new_n.saturating_mul(32)];
        for (i, (f, len)) in h.all().iter().zip(lens).enumerate() {
            f.set_len(len).map_err(|e| StoreError::io("grow", &self.path(i), len, e))?;
            f.allocate(len).map_err(|e| StoreError::io("allocate", &self.path(i), len, e))?;
        }
        // The new blocks' roots: one zero block's root, repeated (written in pieces).
        let zero_root = merkle::block_root(&vec![0u8; beta as usize]);
        let per = 1u64 << 16;
        let mut start = old_n;
        while start < new_n {
            let count = per.min(new_n - start);
            let buf: Vec<u8> = (0..count).flat_map(|_| zero_root.0).collect();
            h.roots
                .write_all_at(&buf, start.saturating_mul(32))
                .map_err(|e| StoreError::io("write", &self.path(2), buf.len() as u64, e))?;
            start += count;
        }
        for (i, f) in h.all().iter().enumerate() {
            f.sync_all().map_err(|e| StoreError::io("fsync", &self.path(i), 0, e))?;
        }
        Ok(())
    }

    /// Cuts U to `new_n` blocks (a committed shrink) and fsyncs.
    pub(crate) fn shrink(&self, new_n: u64) -> Result<()> {
        let h = self.files()?;
        let lens = [new_n.saturating_mul(self.block_bytes), new_n.saturating_mul(32), new_n.saturating_mul(32)];
        for (i, (f, len)) in h.all().iter().zip(lens).enumerate() {
            f.set_len(len).map_err(|e| StoreError::io("truncate", &self.path(i), len, e))?;
            f.sync_all().map_err(|e| StoreError::io("fsync", &self.path(i), 0, e))?;
        }
        Ok(())
    }

    fn path(&self, i: usize) -> PathBuf {
        self.dir.join(NAMES[i])
    }

    /// Writes blocks `start..` with their σ̃ and block roots, then fsyncs. `roots`: the
    /// blocks' block roots if the caller has them (in order), else they are hashed
    /// here (on rayon's pool). The caller checked the shapes (β bytes each, equal
    /// lengths, in range).
    pub(crate) fn write_range(&self, start: u64, blocks: &[Vec<u8>], sealed: &[[u8; 32]], roots: Option<&[B256]>) -> Result<()> {
        let data = blocks.concat();
        let roots: Vec<u8> = match roots {
            Some(r) if r.len() == blocks.len() => r.iter().flat_map(|r| r.0).collect(),
            // The chunk trees of the blocks, on every core (rayon, in dpor-core).
            _ => merkle::block_roots(blocks).iter().flat_map(|r| r.0).collect(),
        };
        let seal: Vec<u8> = sealed.iter().flatten().copied().collect();
        let h = self.files()?;
        let writes = [
            (&h.blocks, start.saturating_mul(self.block_bytes), &data),
            (&h.sealed, start.saturating_mul(32), &seal),
            (&h.roots, start.saturating_mul(32), &roots),
        ];
        for (i, (f, off, buf)) in writes.iter().enumerate() {
            f.write_all_at(buf, *off).map_err(|e| StoreError::io("write", &self.path(i), buf.len() as u64, e))?;
        }
        self.sync_all_three(&h)
    }

    /// Writes scattered blocks `(index, block, σ̃)` with their block roots, then one
    /// fsync per file (a batch's pending updates). `roots`: the items' block roots if
    /// the caller has them (in order), else they are hashed here (on rayon's pool).
    /// The caller checked the shapes.
    pub(crate) fn write_scattered(&self, items: &[(u64, &[u8], [u8; 32])], roots: Option<&[B256]>) -> Result<()> {
        let hashed;
        let roots = match roots {
            Some(r) if r.len() == items.len() => r,
            _ => {
                hashed = merkle::block_roots(&items.iter().map(|(_, b, _)| *b).collect::<Vec<_>>());
                hashed.as_slice()
            }
        };
        let h = self.files()?;
        for ((index, block, sealed), root) in items.iter().zip(roots) {
            let writes: [(&File, u64, &[u8]); 3] = [
                (&h.blocks, index.saturating_mul(self.block_bytes), block),
                (&h.sealed, index.saturating_mul(32), sealed),
                (&h.roots, index.saturating_mul(32), root.as_slice()),
            ];
            for (i, (f, off, buf)) in writes.iter().enumerate() {
                f.write_all_at(buf, *off).map_err(|e| StoreError::io("write", &self.path(i), buf.len() as u64, e))?;
            }
        }
        self.sync_all_three(&h)
    }

    /// fsyncs (data) U's three files together ([`super::fsync`]).
    fn sync_all_three(&self, h: &Handles) -> Result<()> {
        for (i, r) in super::fsync::sync_together(&h.all(), false).into_iter().enumerate() {
            r.map_err(|e| StoreError::io("fsync", &self.path(i), 0, e))?;
        }
        Ok(())
    }

    fn read(&self, i: usize, offset: u64, len: u64) -> Result<Vec<u8>> {
        let len = usize::try_from(len).map_err(|_| StoreError::Range(format!("{len} bytes")))?;
        let mut buf = vec![0u8; len];
        let h = self.files()?;
        h.all()[i].read_exact_at(&mut buf, offset).map_err(|e| StoreError::io("read", &self.path(i), 0, e))?;
        Ok(buf)
    }

    /// Blocks `start..start+count` (bounds checked by the caller).
    pub(crate) fn read_blocks(&self, start: u64, count: u64) -> Result<Vec<Vec<u8>>> {
        let beta = self.block_bytes;
        let buf = self.read(0, start.saturating_mul(beta), count.saturating_mul(beta))?;
        Ok(buf.chunks_exact(beta.max(1) as usize).map(|c| c.to_vec()).collect())
    }

    /// σ̃_U of `start..start+count`.
    pub(crate) fn read_sealed(&self, start: u64, count: u64) -> Result<Vec<[u8; 32]>> {
        let buf = self.read(1, start.saturating_mul(32), count.saturating_mul(32))?;
        Ok(buf
            .chunks_exact(32)
            .map(|c| {
                let mut a = [0u8; 32];
                a.copy_from_slice(c);
                a
            })
            .collect())
    }

    /// Block roots of `start..start+count`.
    pub(crate) fn read_roots(&self, start: u64, count: u64) -> Result<Vec<B256>> {
        let buf = self.read(2, start.saturating_mul(32), count.saturating_mul(32))?;
        Ok(buf.chunks_exact(32).map(B256::from_slice).collect())
    }

    /// The U tree of all N blocks from the stored block roots and σ̃ (no block is
    /// rehashed).
    pub(crate) fn tree(&self, num_blocks: u64) -> Result<MerkleTree> {
        let roots = self.read_roots(0, num_blocks)?;
        let sealed = self.read_sealed(0, num_blocks)?;
        let leaves = roots.iter().zip(&sealed).enumerate().map(|(i, (r, s))| merkle::u_leaf(i as u64, r, s)).collect();
        Ok(MerkleTree::new(leaves)?)
    }
}
