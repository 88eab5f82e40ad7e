//! CRebuild of U computed while U arrives (issue 23 #2, "C built while U streams").
//!
//! [`crate::code::c_rebuild`] is a decimation-in-time transform on whole blocks: the
//! records in index order are mixed in groups of 2, 4, …, N (each group's halves
//! first, then the group; `code::dit_in_place`). A group of blocks
//! `[a, a + 2^j)` aligned on `2^j` needs nothing but its own blocks. So when an upload
//! sends U in index order, every aligned group is transformed as soon as its last
//! block is in, and only the mixes of the groups that end at the last block are left
//! for the end: about two of the log₂ N stages' work instead of all of them, and no
//! second pass over U (read back, records, transform) after the last block.
//!
//! The operations on every element are exactly those of `c_rebuild` (the same mixes
//! in the same order per group), so the result is identical, bit for bit; the tests
//! compare the two for every way of cutting U into pieces.

use crate::block::{BlockError, BlockFormat};
use crate::code::{bit_reverse, dit_in_place, from_words, mix_unchecked, CodeError};
use crate::field::{root_of_unity, to_montgomery, to_u64, Fp};
use ark_ff::Field;
use rayon::prelude::*;

/// C (`[X | Y]`, 2N coded blocks) being built from U's blocks pushed in index order.
///
/// Holds 2N·width Montgomery words (8 bytes each; [`CStream::buffer_bytes`]) from
/// [`CStream::new`] on: the memory `c_rebuild` needs at its peak anyway, held for the
/// whole upload instead.
#[derive(Debug)]
pub struct CStream {
    log_blocks: u32,
    width: usize,
    /// `[X | Y]`: X block r = record r, Y block r = record r · w^{ψ_k(r)}, each aligned
    /// group transformed once complete.
    run: Vec<u64>,
    /// Blocks pushed so far (the next block's index).
    received: usize,
    /// w, the primitive 2N-th root of unity of Y's twist.
    w: Fp,
}

impl CStream {
    /// An empty stream for N = 2^`log_blocks` blocks of `width` elements each.
    ///
    /// Errors: [`CodeError::ZeroWidth`]; [`CodeError::TooLarge`] if 2N exceeds the
    /// field's two-adicity or 2N·width does not fit in memory's index range.
    pub fn new(log_blocks: u32, width: usize) -> Result<Self, CodeError> {
        if width == 0 {
            return Err(CodeError::ZeroWidth);
        }
        let w = root_of_unity(log_blocks + 1).ok_or(CodeError::TooLarge)?;
        let n = 1usize.checked_shl(log_blocks).ok_or(CodeError::TooLarge)?;
        let words = n.checked_mul(2).and_then(|b| b.checked_mul(width)).ok_or(CodeError::TooLarge)?;
        // Zeroed lazily by the allocator (calloc): pages are touched as blocks arrive.
        Ok(Self { log_blocks, width, run: vec![0u64; words], received: 0, w })
    }

    /// Bytes a stream of N = 2^`log_blocks` blocks of `width` elements holds:
    /// 16·N·width (`None` on overflow).
    pub fn buffer_bytes(log_blocks: u32, width: usize) -> Option<u64> {
        1u64.checked_shl(log_blocks)?.checked_mul(16)?.checked_mul(width as u64)
    }

    /// Blocks pushed so far, i.e. the index the next pushed block must have.
    pub fn received(&self) -> u64 {
        self.received as u64
    }

    /// N, the blocks the stream expects in all.
    pub fn num_blocks(&self) -> u64 {
        1u64 << self.log_blocks
    }

    /// Pushes the data blocks `start..start + blocks.len()` of U (β bytes each, in
    /// index order), as their records ([`BlockFormat::record_element`]), and transforms
    /// every aligned group they complete.
    ///
    /// Errors (nothing is changed): [`CStreamError::OutOfOrder`] if `start` is not
    /// [`CStream::received`], [`CStreamError::TooMany`] past N,
    /// [`CStreamError::Width`] if `format`'s record width is not the stream's,
    /// [`CStreamError::BlockBytes`] if a block is not β bytes.
    pub fn push_blocks(&mut self, format: &BlockFormat, start: u64, blocks: &[Vec<u8>]) -> Result<(), CStreamError> {
        let width = self.width;
        if format.width() != width {
            return Err(CStreamError::Width { got: format.width(), expected: width });
        }
        if let Some(b) = blocks.iter().find(|b| b.len() != format.block_bytes()) {
            return Err(CStreamError::BlockBytes { got: b.len(), expected: format.block_bytes() });
        }
        let first = self.check_range(start, blocks.len())?;
        self.fill(first, blocks.len(), |k, xb| format.record_into((first + k) as u64, &blocks[k], xb, to_montgomery))
    }

    /// Pushes records (`blocks × width` elements, flat) of blocks `start..` in index
    /// order, like [`CStream::push_blocks`].
    ///
    /// Errors: as [`CStream::push_blocks`], and [`CStreamError::Width`] if the
    /// length is not a multiple of the width.
    pub fn push_records(&mut self, start: u64, records: &[Fp]) -> Result<(), CStreamError> {
        let width = self.width;
        if !records.len().is_multiple_of(width) {
            return Err(CStreamError::Width { got: records.len() % width, expected: width });
        }
        let count = records.len() / width;
        let first = self.check_range(start, count)?;
        self.fill(first, count, |k, xb| {
            for (xe, e) in xb.iter_mut().zip(&records[k * width..(k + 1) * width]) {
                *xe = to_montgomery(*e);
            }
            Ok(())
        })
    }

    /// Blocks `first..first + count` (checked by the caller): X block `first + k` set
    /// by `x_of(k, block)` on every core, Y block as that times w^{ψ_k(first + k)}, then
    /// every aligned group they complete transformed.
    fn fill(
        &mut self,
        first: usize,
        count: usize,
        x_of: impl Fn(usize, &mut [u64]) -> Result<(), BlockError> + Sync + Send,
    ) -> Result<(), CStreamError> {
        let width = self.width;
        let end = first + count;
        let (log_blocks, w) = (self.log_blocks, self.w);
        let (x, y) = self.run.split_at_mut((1usize << log_blocks) * width);
        x[first * width..end * width]
            .par_chunks_mut(width)
            .zip(y[first * width..end * width].par_chunks_mut(width))
            .enumerate()
            .try_for_each(|(k, (xb, yb))| {
                x_of(k, xb)?;
                yb.copy_from_slice(xb);
                dpor_butterfly::scale(yb, to_u64(w.pow([bit_reverse((first + k) as u64, log_blocks)])));
                Ok::<(), BlockError>(())
            })
            .map_err(|e| CStreamError::Record(e.to_string()))?;
        self.transform_completed(first, end);
        Ok(())
    }

    /// C, `[X | Y]` (2N blocks of `width`), once all N blocks are in: exactly
    /// [`crate::code::c_rebuild`] of U's records.
    ///
    /// Errors: [`CStreamError::Incomplete`] if fewer than N blocks were pushed.
    pub fn finish(self) -> Result<Vec<Fp>, CStreamError> {
        let n = 1usize << self.log_blocks;
        if self.received != n {
            return Err(CStreamError::Incomplete { received: self.received as u64, expected: n as u64 });
        }
        Ok(from_words(self.run))
    }

    /// The index of block `start` if `count` blocks from it are the next ones.
    fn check_range(&self, start: u64, count: usize) -> Result<usize, CStreamError> {
        if start != self.received as u64 {
            return Err(CStreamError::OutOfOrder { start, expected: self.received as u64 });
        }
        let n = 1usize << self.log_blocks;
        if count > n - self.received {
            return Err(CStreamError::TooMany { start, count: count as u64, num_blocks: n as u64 });
        }
        Ok(self.received)
    }

    /// Blocks `first..end` are in (both halves): transforms each aligned group in that
    /// range whole, then mixes every larger group that now ends at its last block.
    fn transform_completed(&mut self, first: usize, end: usize) {
        let n = 1usize << self.log_blocks;
        let width = self.width;
        let (x, y) = self.run.split_at_mut(n * width);
        let mut a = first;
        while a < end {
            // The largest aligned group starting at a that ends by `end`.
            let mut size = if a == 0 { n } else { 1usize << a.trailing_zeros() };
            while a + size > end {
                size /= 2;
            }
            let piece = a * width..(a + size) * width;
            rayon::join(|| dit_in_place(&mut x[piece.clone()], width), || dit_in_place(&mut y[piece.clone()], width));
            // Every group of which this piece is the upper half is now complete.
            let stop = a + size;
            let mut group = size * 2;
            while group <= n && stop.is_multiple_of(group) {
                if let Some(nu) = root_of_unity(group.trailing_zeros()) {
                    let g = (stop - group) * width..stop * width;
                    rayon::join(|| mix_unchecked(&mut x[g.clone()], width, nu), || mix_unchecked(&mut y[g.clone()], width, nu));
                }
                group *= 2;
            }
            a = stop;
        }
        self.received = end;
    }
}

/// Errors from [`CStream`]: input that does not continue U in order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CStreamError {
    /// The pushed blocks do not start at the next index.
    #[error("blocks pushed from index {start}, but the next block is {expected}")]
    OutOfOrder {
        /// The first pushed block's index.
        start: u64,
        /// The next block's index.
        expected: u64,
    },
    /// The pushed blocks go past N.
    #[error("{count} blocks from index {start} go past N = {num_blocks}")]
    TooMany {
        /// The first pushed block's index.
        start: u64,
        /// Blocks pushed.
        count: u64,
        /// N.
        num_blocks: u64,
    },
    /// A record width (or a flat slice's remainder) that does not match.
    #[error("record width {got}, the stream's is {expected}")]
    Width {
        /// The width (or remainder) given.
        got: usize,
        /// The stream's width.
        expected: usize,
    },
    /// A data block of the wrong length.
    #[error("a block of {got} bytes, expected {expected}")]
    BlockBytes {
        /// Its length.
        got: usize,
        /// β.
        expected: usize,
    },
    /// A block's record could not be built (its checks above make this unreachable).
    #[error("record: {0}")]
    Record(String),
    /// [`CStream::finish`] before all N blocks were pushed.
    #[error("{received} of {expected} blocks pushed")]
    Incomplete {
        /// Blocks pushed.
        received: u64,
        /// N.
        expected: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::c_rebuild;
    use proptest::prelude::*;

    fn blocks_of(n: usize, beta: usize, seed: u64) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                (0..beta)
                    .map(|j| ((i as u64 * 1_000_003 + j as u64 * 7919 + seed).wrapping_mul(2654435761) >> 11) as u8)
                    .collect()
            })
            .collect()
    }

    fn records_of(format: &BlockFormat, blocks: &[Vec<u8>]) -> Vec<Fp> {
        blocks.iter().enumerate().flat_map(|(i, b)| format.record(i as u64, b).unwrap()).collect()
    }

    /// Pushes `blocks` cut at `cuts` (ascending, inside 0..N) and returns C.
    fn streamed(format: &BlockFormat, log_blocks: u32, blocks: &[Vec<u8>], cuts: &[usize]) -> Vec<Fp> {
        let mut s = CStream::new(log_blocks, format.width()).unwrap();
        let mut bounds = vec![0];
        bounds.extend(cuts.iter().copied());
        bounds.push(blocks.len());
        for w in bounds.windows(2) {
            s.push_blocks(format, w[0] as u64, &blocks[w[0]..w[1]]).unwrap();
        }
        s.finish().unwrap()
    }

    /// Every way of cutting U into pieces gives c_rebuild's C, for N up to 16
    /// (all 2^(N−1) cut sets for N ≤ 8, and single cuts at every index for N = 16).
    #[test]
    fn every_cut_of_u_gives_c_rebuild() {
        let format = BlockFormat::new(40).unwrap();
        for log_blocks in 0..=3u32 {
            let n = 1usize << log_blocks;
            let blocks = blocks_of(n, 40, log_blocks as u64);
            let expected = c_rebuild(&records_of(&format, &blocks), log_blocks, format.width()).unwrap();
            for mask in 0u32..(1 << n.saturating_sub(1)) {
                let cuts: Vec<usize> = (1..n).filter(|i| mask & (1 << (i - 1)) != 0).collect();
                assert_eq!(streamed(&format, log_blocks, &blocks, &cuts), expected, "N = {n}, cuts {cuts:?}");
            }
        }
        let blocks = blocks_of(16, 40, 99);
        let expected = c_rebuild(&records_of(&format, &blocks), 4, format.width()).unwrap();
        for cut in 1..16 {
            assert_eq!(streamed(&format, 4, &blocks, &[cut]), expected, "cut {cut}");
        }
    }

    /// Large enough for the parallel paths of the transform (groups past
    /// `PAR_MIN_ELEMENTS`), cut where an upload's requests would cut it (1014 blocks:
    /// not a power of two), and pushed as records too.
    #[test]
    fn upload_sized_pieces_give_c_rebuild() {
        let format = BlockFormat::new(256).unwrap();
        let log_blocks = 12;
        let n = 1usize << log_blocks;
        let blocks = blocks_of(n, 256, 5);
        let records = records_of(&format, &blocks);
        let expected = c_rebuild(&records, log_blocks, format.width()).unwrap();
        let cuts: Vec<usize> = (1014..n).step_by(1014).collect();
        assert_eq!(streamed(&format, log_blocks, &blocks, &cuts), expected);
        let mut s = CStream::new(log_blocks, format.width()).unwrap();
        let w = format.width();
        for start in (0..n).step_by(700) {
            let end = (start + 700).min(n);
            s.push_records(start as u64, &records[start * w..end * w]).unwrap();
        }
        assert_eq!(s.finish().unwrap(), expected);
    }

    /// Out of order, past N, wrong sizes and an early finish are refused, and a
    /// refused push changes nothing (the right one after it still gives C).
    #[test]
    fn bad_pushes_are_refused_and_change_nothing() {
        let format = BlockFormat::new(40).unwrap();
        let blocks = blocks_of(8, 40, 3);
        let expected = c_rebuild(&records_of(&format, &blocks), 3, format.width()).unwrap();
        let mut s = CStream::new(3, format.width()).unwrap();
        s.push_blocks(&format, 0, &blocks[0..3]).unwrap();
        assert_eq!(s.push_blocks(&format, 2, &blocks[2..4]), Err(CStreamError::OutOfOrder { start: 2, expected: 3 }));
        assert_eq!(s.push_blocks(&format, 4, &blocks[4..5]), Err(CStreamError::OutOfOrder { start: 4, expected: 3 }));
        let too_many: Vec<Vec<u8>> = blocks[3..8].iter().chain(&blocks[0..1]).cloned().collect();
        assert_eq!(s.push_blocks(&format, 3, &too_many), Err(CStreamError::TooMany { start: 3, count: 6, num_blocks: 8 }));
        let short = vec![blocks[3][..39].to_vec()];
        assert_eq!(s.push_blocks(&format, 3, &short), Err(CStreamError::BlockBytes { got: 39, expected: 40 }));
        let other = BlockFormat::new(80).unwrap();
        assert!(matches!(s.push_blocks(&other, 3, &blocks[3..4]), Err(CStreamError::Width { .. })));
        assert!(matches!(s.push_records(3, &[Fp::from(1u64)]), Err(CStreamError::Width { .. })));
        assert_eq!(s.received(), 3);
        s.push_blocks(&format, 3, &blocks[3..7]).unwrap();
        let mut early = CStream::new(3, format.width()).unwrap();
        early.push_blocks(&format, 0, &blocks[0..7]).unwrap();
        assert_eq!(early.finish(), Err(CStreamError::Incomplete { received: 7, expected: 8 }));
        s.push_blocks(&format, 7, &blocks[7..8]).unwrap();
        assert_eq!(s.finish().unwrap(), expected);
        assert_eq!(CStream::new(3, 0).map(|_| ()), Err(CodeError::ZeroWidth));
        assert_eq!(CStream::buffer_bytes(16, 587), Some(16 * 65536 * 587));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Random N, β and cuts against c_rebuild.
        #[test]
        fn random_cuts_give_c_rebuild(log_blocks in 0u32..7, beta in 1usize..60, seed: u64, raw_cuts in proptest::collection::vec(any::<u16>(), 0..10)) {
            let n = 1usize << log_blocks;
            let format = BlockFormat::new(beta).unwrap();
            let blocks = blocks_of(n, beta, seed);
            let expected = c_rebuild(&records_of(&format, &blocks), log_blocks, format.width()).unwrap();
            let mut cuts: Vec<usize> = raw_cuts.iter().map(|c| *c as usize % n).filter(|c| *c > 0).collect();
            cuts.sort_unstable();
            cuts.dedup();
            prop_assert_eq!(streamed(&format, log_blocks, &blocks, &cuts), expected);
        }
    }
}
