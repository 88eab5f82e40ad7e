//! Reed–Solomon across shards, one stripe at a time, and whole files.
//!
//! A stripe is the block at one index in every shard: k data blocks and n − k parity
//! blocks of β bytes. [`StripeCoder::encode`] computes the parity blocks,
//! [`StripeCoder::decode`] the data blocks from any k of the n, and
//! [`StripeCoder::parity_delta`] what a write of one data block adds to each parity
//! block.
//!
//! **Runs of stripes.** The library codes each 64-byte chunk of a shard on its own (32
//! GF(2^16) symbols, low bytes then high bytes), and every step of the code is applied
//! chunk by chunk except the erasure locator, which depends only on which shards are
//! missing. So when β is a multiple of 64, blocks that are r consecutive stripes
//! (r·β bytes per shard) code exactly as r separate stripes (test
//! `a_run_codes_as_its_stripes`), and decoding pays the locator (an O(2^16 log 2^16)
//! transform, ≈ 0.3 ms) once per run instead of once per stripe. `encode` and
//! `decode` accept such runs; `split_file` and `join_file` use runs of up to
//! [`RUN_BYTES`] per shard.
//!
//! **Parity updates (issue 12, "linear in the change").** The code is linear: the parity
//! of a stripe is P(d) = Σ_j G_j·d_j over GF(2^16), so for a write of data block j from
//! `old` to `new`, P(new stripe) = P(old stripe) + G_j·(new − old), and in characteristic
//! 2 both + and − are XOR. [`StripeCoder::parity_delta`] computes G_j·Δ by encoding the
//! stripe that is Δ = old ⊕ new at position j and zero elsewhere, and each parity block
//! becomes old parity ⊕ its delta. This needs only the old value of the written block
//! and each parity shard's old block — the blocks the write replaces — not the k − 1
//! other data blocks of the stripe that re-encoding needs; each parity shard's new block
//! depends on its own old block and Δ alone. (Re-encoding reads k − 1 blocks, the delta
//! 1 + (n − k): for wide, low-redundancy codes the delta reads fewer, for k ≤ n − k + 1
//! re-encoding does; both give the same bytes, which a test checks. The owner's
//! write path may pick the cheaper; this crate offers both.)
//!
//! The owner must not apply a delta twice (XOR twice undoes it): it computes every new
//! block of the stripe first, records them as its intent, and then writes *values*, so a
//! retried write is idempotent.

use crate::geometry::{Geometry, GeometryError, ShardIndex};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use thiserror::Error;

/// Errors of the coder.
#[derive(Debug, Error)]
pub enum CodeError {
    /// Bad shape, empty file or shard index (see [`GeometryError`]).
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// A block is not β bytes long.
    #[error("block of shard {shard} is {got} bytes, a block is {expected}")]
    BlockLength {
        /// Its shard.
        shard: ShardIndex,
        /// Its length.
        got: usize,
        /// β.
        expected: usize,
    },
    /// `encode` got a number of data blocks other than k.
    #[error("a stripe has {expected} data blocks, got {got}")]
    DataCount {
        /// Blocks given.
        got: usize,
        /// k.
        expected: usize,
    },
    /// `decode` got fewer than k distinct shards: the stripe is lost.
    #[error("only {have} of the {total} shards are available, at least {need} are needed to decode (more than {lost_max} lost)")]
    TooFewShards {
        /// Distinct shards given.
        have: usize,
        /// k.
        need: usize,
        /// n.
        total: usize,
        /// n − k, the most that may be lost.
        lost_max: usize,
    },
    /// The same shard was given twice.
    #[error("shard {0} was given twice")]
    DuplicateShard(ShardIndex),
    /// A parity-delta was asked for a parity shard.
    #[error("shard {0} is a parity shard; only data blocks are written")]
    NotData(ShardIndex),
    /// A whole shard's bytes are not stripes · β long.
    #[error("shard {shard} is {got} bytes, the file's shards are {expected}")]
    ShardLength {
        /// The shard.
        shard: ShardIndex,
        /// Its length.
        got: usize,
        /// stripes · β.
        expected: u64,
    },
    /// Blocks of a run of stripes are not all one length, a multiple of β (several
    /// stripes at once also need β to be a multiple of 64, see [`StripeCoder::batches`]).
    #[error("blocks of {got} bytes are not a run of whole stripes of β = {beta} bytes (several stripes at once need β a multiple of 64)")]
    RunLength {
        /// A block's length.
        got: usize,
        /// β.
        beta: usize,
    },
    /// The erasure-coding library refused (should not happen for a valid geometry).
    #[error("erasure coding: {0}")]
    Library(#[from] reed_solomon_simd::Error),
}

/// Bytes per shard that `split_file` and `join_file` code at once (when β is a
/// multiple of 64): 128 KiB, 32 stripes of 4 KiB.
pub const RUN_BYTES: usize = 128 << 10;

/// A reusable encoder and decoder for one [`Geometry`] (keeps its working space between
/// stripes).
pub struct StripeCoder {
    geometry: Geometry,
    encoder: ReedSolomonEncoder,
    decoder: ReedSolomonDecoder,
    zero: Vec<u8>,
}

impl std::fmt::Debug for StripeCoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeCoder").field("geometry", &self.geometry).finish_non_exhaustive()
    }
}

/// acc ⊕= delta (addition in GF(2^16)^β/2). Panics if the lengths differ (callers
/// check them).
pub fn xor_into(acc: &mut [u8], delta: &[u8]) {
    assert_eq!(acc.len(), delta.len(), "xor_into: lengths differ");
    for (a, d) in acc.iter_mut().zip(delta) {
        *a ^= d;
    }
}

impl StripeCoder {
    /// A coder for `geometry`.
    pub fn new(geometry: Geometry) -> Result<Self, CodeError> {
        let (k, m, beta) = Self::counts(&geometry);
        Ok(Self {
            geometry,
            encoder: ReedSolomonEncoder::new(k, m, beta)?,
            decoder: ReedSolomonDecoder::new(k, m, beta)?,
            zero: vec![0u8; beta],
        })
    }

    fn counts(g: &Geometry) -> (usize, usize, usize) {
        (g.data_shards() as usize, g.parity_shards() as usize, g.beta())
    }

    /// Its geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn check_len(&self, shard: ShardIndex, block: &[u8]) -> Result<(), CodeError> {
        if block.len() != self.geometry.beta() {
            return Err(CodeError::BlockLength { shard, got: block.len(), expected: self.geometry.beta() });
        }
        Ok(())
    }

    /// Stripes that may be coded at once: 1 unless β is a multiple of 64 (module docs).
    pub fn batches(&self) -> bool {
        self.geometry.beta().is_multiple_of(64)
    }

    /// Checks that `len` is a run of whole stripes this coder may code at once.
    fn check_run(&self, len: usize) -> Result<(), CodeError> {
        let beta = self.geometry.beta();
        if len == beta || (len > 0 && len.is_multiple_of(beta) && self.batches()) {
            Ok(())
        } else {
            Err(CodeError::RunLength { got: len, beta })
        }
    }

    /// Stripes per run in `split_file`/`join_file`.
    fn run_stripes(&self) -> usize {
        if self.batches() {
            (RUN_BYTES / self.geometry.beta()).max(1)
        } else {
            1
        }
    }

    /// The n − k parity blocks of a stripe from its k data blocks (each β bytes), in
    /// shard order k..n; or of a run of stripes (each "block" r·β bytes, module docs).
    pub fn encode<B: AsRef<[u8]>>(&mut self, data: &[B]) -> Result<Vec<Vec<u8>>, CodeError> {
        let (k, m, _) = Self::counts(&self.geometry);
        if data.len() != k {
            return Err(CodeError::DataCount { got: data.len(), expected: k });
        }
        let len = data[0].as_ref().len();
        self.check_run(len)?;
        for (j, d) in data.iter().enumerate() {
            if d.as_ref().len() != len {
                return Err(CodeError::BlockLength { shard: ShardIndex(j as u16), got: d.as_ref().len(), expected: len });
            }
        }
        self.encoder.reset(k, m, len)?;
        for d in data {
            self.encoder.add_original_shard(d.as_ref())?;
        }
        let result = self.encoder.encode()?;
        Ok(result.recovery_iter().map(<[u8]>::to_vec).collect())
    }

    /// The k data blocks of a stripe (shard order 0..k) from any k or more of its n
    /// blocks, each named by its shard. Data blocks given are used as they are; missing
    /// ones are rebuilt from parity. Extra blocks beyond k are ignored (data first).
    ///
    /// The blocks may also be runs of stripes (all r·β bytes, module docs); the result
    /// then is the k data runs.
    ///
    /// Errors: [`CodeError::TooFewShards`] with fewer than k distinct shards,
    /// [`CodeError::DuplicateShard`], a bad index or length.
    pub fn decode(&mut self, blocks: &[(ShardIndex, &[u8])]) -> Result<Vec<Vec<u8>>, CodeError> {
        let g = self.geometry;
        let (k, m, _) = Self::counts(&g);
        let len = blocks.first().map_or(g.beta(), |b| b.1.len());
        self.check_run(len)?;
        let mut by_shard: Vec<Option<&[u8]>> = vec![None; g.total_shards() as usize];
        for &(shard, block) in blocks {
            g.check_shard(shard)?;
            if block.len() != len {
                return Err(CodeError::BlockLength { shard, got: block.len(), expected: len });
            }
            if by_shard[shard.get()].replace(block).is_some() {
                return Err(CodeError::DuplicateShard(shard));
            }
        }
        let have = by_shard.iter().filter(|b| b.is_some()).count();
        if have < k {
            return Err(CodeError::TooFewShards { have, need: k, total: k + m, lost_max: m });
        }
        let data_have = by_shard[..k].iter().filter(|b| b.is_some()).count();
        if data_have < k {
            self.decoder.reset(k, m, len)?;
            for (j, b) in by_shard[..k].iter().enumerate() {
                if let Some(b) = b {
                    self.decoder.add_original_shard(j, b)?;
                }
            }
            // Only as many parity blocks as are missing data blocks.
            for (i, b) in by_shard[k..].iter().enumerate().filter_map(|(i, b)| b.map(|b| (i, b))).take(k - data_have) {
                self.decoder.add_recovery_shard(i, b)?;
            }
            let result = self.decoder.decode()?;
            let mut out = Vec::with_capacity(k);
            for (j, b) in by_shard[..k].iter().enumerate() {
                match b {
                    Some(b) => out.push(b.to_vec()),
                    None => match result.restored_original(j) {
                        Some(r) => out.push(r.to_vec()),
                        // The library restores every missing original once given k shards.
                        None => return Err(CodeError::TooFewShards { have, need: k, total: k + m, lost_max: m }),
                    },
                }
            }
            return Ok(out);
        }
        Ok(by_shard[..k].iter().flatten().map(|b| b.to_vec()).collect())
    }

    /// What a write of data shard `shard`'s block from `old` to `new` adds (XOR) to each
    /// parity block of its stripe: G_j·(old ⊕ new), in shard order k..n (module docs).
    pub fn parity_delta(&mut self, shard: ShardIndex, old: &[u8], new: &[u8]) -> Result<Vec<Vec<u8>>, CodeError> {
        let g = self.geometry;
        g.check_shard(shard)?;
        if !g.is_data(shard) {
            return Err(CodeError::NotData(shard));
        }
        self.check_len(shard, old)?;
        self.check_len(shard, new)?;
        let delta: Vec<u8> = old.iter().zip(new).map(|(a, b)| a ^ b).collect();
        let (k, m, beta) = Self::counts(&g);
        self.encoder.reset(k, m, beta)?;
        for j in 0..k {
            if j == shard.get() {
                self.encoder.add_original_shard(&delta)?;
            } else {
                self.encoder.add_original_shard(&self.zero)?;
            }
        }
        let result = self.encoder.encode()?;
        Ok(result.recovery_iter().map(<[u8]>::to_vec).collect())
    }

    /// The new parity blocks of a stripe after data shard `shard`'s block goes from
    /// `old` to `new`, from the old parity blocks (shard order k..n): old ⊕ G_j·Δ.
    pub fn updated_parity<B: AsRef<[u8]>>(
        &mut self,
        shard: ShardIndex,
        old: &[u8],
        new: &[u8],
        old_parity: &[B],
    ) -> Result<Vec<Vec<u8>>, CodeError> {
        let g = self.geometry;
        if old_parity.len() != g.parity_shards() as usize {
            return Err(CodeError::DataCount { got: old_parity.len(), expected: g.parity_shards() as usize });
        }
        for (i, p) in old_parity.iter().enumerate() {
            self.check_len(ShardIndex(g.data_shards() + i as u16), p.as_ref())?;
        }
        let deltas = self.parity_delta(shard, old, new)?;
        Ok(old_parity
            .iter()
            .zip(deltas)
            .map(|(p, mut d)| {
                xor_into(&mut d, p.as_ref());
                d
            })
            .collect())
    }

    /// The n shards of `file` (shard order 0..n), each stripes · β bytes: data shard j
    /// holds file blocks j, j + k, j + 2k, … (the last block and the blocks past the
    /// end zero-filled), parity shard k + i the i-th parity block of every stripe.
    pub fn split_file(&mut self, file: &[u8]) -> Result<Vec<Vec<u8>>, CodeError> {
        let g = self.geometry;
        let stripes = g.stripes(file.len() as u64)? as usize;
        let (k, _, beta) = Self::counts(&g);
        let mut shards: Vec<Vec<u8>> = (0..g.total_shards()).map(|_| vec![0u8; stripes * beta]).collect();
        for (b, chunk) in file.chunks(beta).enumerate() {
            let (shard, stripe) = g.locate(b as u64);
            let at = stripe as usize * beta;
            shards[shard.get()][at..at + chunk.len()].copy_from_slice(chunk);
        }
        let run = self.run_stripes();
        let mut s = 0;
        while s < stripes {
            let r = run.min(stripes - s);
            let at = s * beta..(s + r) * beta;
            let data: Vec<&[u8]> = shards[..k].iter().map(|d| &d[at.clone()]).collect();
            let parity = self.encode(&data)?;
            for (i, p) in parity.iter().enumerate() {
                shards[k + i][at.clone()].copy_from_slice(p);
            }
            s += r;
        }
        Ok(shards)
    }

    /// The file of `file_bytes` bytes from its shards, indexed by shard (`None`: lost);
    /// every shard given must be stripes · β bytes. Errors as [`StripeCoder::decode`]
    /// when fewer than k shards are given.
    pub fn join_file(&mut self, file_bytes: u64, shards: &[Option<&[u8]>]) -> Result<Vec<u8>, CodeError> {
        let g = self.geometry;
        let stripes = g.stripes(file_bytes)? as usize;
        let expected = g.shard_bytes(file_bytes)?;
        if shards.len() > g.total_shards() as usize {
            return Err(GeometryError::NoSuchShard { index: shards.len() as u16 - 1, n: g.total_shards() }.into());
        }
        for (i, s) in shards.iter().enumerate() {
            if let Some(s) = s {
                if s.len() as u64 != expected {
                    return Err(CodeError::ShardLength { shard: ShardIndex(i as u16), got: s.len(), expected });
                }
            }
        }
        let (k, _, beta) = Self::counts(&g);
        let mut out = vec![0u8; stripes * beta * k];
        let run = self.run_stripes();
        let mut s = 0;
        while s < stripes {
            let r = run.min(stripes - s);
            let at = s * beta..(s + r) * beta;
            let blocks: Vec<(ShardIndex, &[u8])> = shards
                .iter()
                .enumerate()
                .filter_map(|(i, sh)| sh.map(|sh| (ShardIndex(i as u16), &sh[at.clone()])))
                .collect();
            // Data run j holds file blocks (s + t)·k + j for t in 0..r.
            for (j, data) in self.decode(&blocks)?.iter().enumerate() {
                for (t, block) in data.chunks_exact(beta).enumerate() {
                    let b = (s + t) * k + j;
                    out[b * beta..(b + 1) * beta].copy_from_slice(block);
                }
            }
            s += r;
        }
        out.truncate(file_bytes as usize);
        Ok(out)
    }
}
