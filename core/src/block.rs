//! Blocks, records and files (ENCODING.md §1).
//!
//! A *data block* is β raw bytes. What the code encodes for block index i is its
//! *record*: `s = 1 + ⌈β/7⌉` field elements `[i, e_0, …]`, 7 data bytes per element.
//! Carrying the index lets extraction put a block logged in H back in its place.
//! A *coded block* (of C or an H level) is `s` elements stored as 8 bytes each.

use crate::field::{self, Fp, ELEMENT_BYTES};
use thiserror::Error;

/// Data bytes packed into one field element (7 bytes < 2^56 < p).
pub const BYTES_PER_ELEMENT: usize = 7;

/// Default block size β in bytes (DESIGN §2).
pub const DEFAULT_BLOCK_BYTES: usize = 4096;

/// Largest accepted block size β in bytes (1 MiB).
pub const MAX_BLOCK_BYTES: usize = 1 << 20;

/// Largest β·K the market accepts, in bytes (`DealManager.MAX_EPOCH_PROOF_DATA`): the
/// data the K whole coded blocks of one epoch proof carry. At the bound an epoch proof
/// is about 76 KB of calldata and 4.4 M gas (docs/CONTRACTS.md, threat model); without
/// it an owner could open a deal whose proofs no transaction can carry.
pub const MAX_EPOCH_PROOF_DATA_BYTES: u64 = 1 << 16;

/// Largest supported log2 of the padded block count N (N ≤ 2^31, so 2N fits the
/// field's two-adicity of 32).
pub const MAX_LOG_BLOCKS: u32 = 31;

/// Errors about blocks, records and file layouts.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BlockError {
    /// β was 0 or above [`MAX_BLOCK_BYTES`].
    #[error("block size {0} bytes is out of range 1..={MAX_BLOCK_BYTES}")]
    BlockSize(usize),
    /// A data block did not have exactly β bytes.
    #[error("data block has {got} bytes, expected {expected}")]
    DataLength {
        /// Bytes received.
        got: usize,
        /// β.
        expected: usize,
    },
    /// A coded block did not have exactly 8·s bytes.
    #[error("coded block has {got} bytes, expected {expected}")]
    CodedLength {
        /// Bytes received.
        got: usize,
        /// 8·s.
        expected: usize,
    },
    /// A record or coded block did not have exactly s elements.
    #[error("record has {got} elements, expected {expected}")]
    RecordWidth {
        /// Elements received.
        got: usize,
        /// s.
        expected: usize,
    },
    /// An 8-byte element was not below p.
    #[error("element {0} of a coded block is not a canonical field element")]
    NonCanonical(usize),
    /// A decoded record holds a value no honest encoder produces (an element
    /// ≥ 2^56 in the data part, or data past β that is not zero).
    #[error("record element {0} is not valid packed data")]
    BadPacking(usize),
    /// The file is empty.
    #[error("the file is empty")]
    EmptyFile,
    /// The file needs more blocks than allowed.
    #[error("file of {bytes} bytes needs {blocks} blocks, above the maximum of {max}")]
    FileTooLarge {
        /// File length in bytes.
        bytes: u64,
        /// Blocks it needs.
        blocks: u64,
        /// Configured maximum.
        max: u64,
    },
}

/// The block format of a deal: β and the sizes that follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFormat {
    block_bytes: usize,
}

impl BlockFormat {
    /// A format with β = `block_bytes`; errors if β is 0 or above [`MAX_BLOCK_BYTES`].
    pub fn new(block_bytes: usize) -> Result<Self, BlockError> {
        if block_bytes == 0 || block_bytes > MAX_BLOCK_BYTES {
            return Err(BlockError::BlockSize(block_bytes));
        }
        Ok(Self { block_bytes })
    }

    /// β, in bytes.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// s, the elements in a record or coded block: `1 + ⌈β/7⌉`.
    pub fn width(&self) -> usize {
        1 + self.block_bytes.div_ceil(BYTES_PER_ELEMENT)
    }

    /// Bytes of a coded block: `8·s` (4696 for β = 4096).
    pub fn coded_block_bytes(&self) -> usize {
        ELEMENT_BYTES * self.width()
    }

    /// The record `[index, packed data]` of a data block, appended to `out`.
    ///
    /// Errors if `block` is not exactly β bytes.
    pub fn push_record(&self, index: u64, block: &[u8], out: &mut Vec<Fp>) -> Result<(), BlockError> {
        if block.len() != self.block_bytes {
            return Err(BlockError::DataLength { got: block.len(), expected: self.block_bytes });
        }
        out.reserve(self.width());
        out.push(Fp::from(index));
        let full = block.chunks_exact(BYTES_PER_ELEMENT);
        let tail = full.remainder();
        out.extend(full.map(packed_full));
        if !tail.is_empty() {
            out.push(packed_element(tail));
        }
        Ok(())
    }

    /// The record of data block `index` (what [`Self::push_record`] appends) written
    /// into `out`, each element through `f` (e.g. [`field::to_montgomery`] for the
    /// code's words): for records built in place without a vector per block
    /// ([`crate::c_stream::CStream`]).
    ///
    /// Errors if `block` is not exactly β bytes or `out` is not s elements long.
    pub fn record_into<T>(&self, index: u64, block: &[u8], out: &mut [T], f: impl Fn(Fp) -> T) -> Result<(), BlockError> {
        if block.len() != self.block_bytes {
            return Err(BlockError::DataLength { got: block.len(), expected: self.block_bytes });
        }
        if out.len() != self.width() {
            return Err(BlockError::RecordWidth { got: out.len(), expected: self.width() });
        }
        let full = block.chunks_exact(BYTES_PER_ELEMENT);
        let tail = full.remainder();
        let (first, rest) = out.split_at_mut(1);
        first[0] = f(Fp::from(index));
        let (body, last) = rest.split_at_mut(full.len());
        for (o, chunk) in body.iter_mut().zip(full) {
            *o = f(packed_full(chunk));
        }
        if let Some(o) = last.first_mut() {
            *o = f(packed_element(tail));
        }
        Ok(())
    }

    /// Element `k` (`0..s`) of the record of data block `index`, `block` (exactly β
    /// bytes, checked by the caller): what [`Self::push_record`] puts at `k`. One
    /// element at a time, for records built in place on every core
    /// ([`crate::state::u_records`]).
    pub fn record_element(&self, index: u64, block: &[u8], k: usize) -> Fp {
        if k == 0 {
            return Fp::from(index);
        }
        let start = ((k - 1) * BYTES_PER_ELEMENT).min(block.len());
        let end = (k * BYTES_PER_ELEMENT).min(block.len());
        match block.get(start..start + BYTES_PER_ELEMENT) {
            Some(full) => packed_full(full),
            None => packed_element(&block[start..end]),
        }
    }

    /// The record of one data block as a new vector (see [`Self::push_record`]).
    pub fn record(&self, index: u64, block: &[u8]) -> Result<Vec<Fp>, BlockError> {
        let mut out = Vec::with_capacity(self.width());
        self.push_record(index, block, &mut out)?;
        Ok(out)
    }

    /// Splits a record back into (index, β data bytes).
    ///
    /// Errors on a wrong width, an element that is not 7 packed bytes, or nonzero
    /// padding past β: a decoded record of corrupted data is reported, never returned.
    pub fn unrecord(&self, record: &[Fp]) -> Result<(u64, Vec<u8>), BlockError> {
        if record.len() != self.width() {
            return Err(BlockError::RecordWidth { got: record.len(), expected: self.width() });
        }
        let index = field::to_u64(record[0]);
        let mut data = Vec::with_capacity(self.width() * BYTES_PER_ELEMENT);
        for (j, e) in record[1..].iter().enumerate() {
            let v = field::to_u64(*e);
            if v >> 56 != 0 {
                return Err(BlockError::BadPacking(j + 1));
            }
            data.extend_from_slice(&v.to_le_bytes()[..BYTES_PER_ELEMENT]);
        }
        if data[self.block_bytes..].iter().any(|&b| b != 0) {
            return Err(BlockError::BadPacking(self.width() - 1));
        }
        data.truncate(self.block_bytes);
        Ok((index, data))
    }

    /// Wire/disk bytes of a coded block (8·s bytes, each element little-endian).
    pub fn coded_to_bytes(&self, coded: &[Fp]) -> Result<Vec<u8>, BlockError> {
        if coded.len() != self.width() {
            return Err(BlockError::RecordWidth { got: coded.len(), expected: self.width() });
        }
        Ok(elements_to_bytes(coded))
    }

    /// Parses a coded block's bytes; errors on a wrong length or a non-canonical element.
    pub fn coded_from_bytes(&self, bytes: &[u8]) -> Result<Vec<Fp>, BlockError> {
        if bytes.len() != self.coded_block_bytes() {
            return Err(BlockError::CodedLength { got: bytes.len(), expected: self.coded_block_bytes() });
        }
        elements_from_bytes(bytes)
    }
}

impl Default for BlockFormat {
    fn default() -> Self {
        Self { block_bytes: DEFAULT_BLOCK_BYTES }
    }
}

/// [`packed_element`] of exactly 7 bytes: a copy of a fixed length, which the compiler
/// inlines (the variable-length copy of [`packed_element`] is a `memcpy` call per
/// element, ≈ 5 % of a batched write's CPU across the records of the owner and the
/// node, issue 23). `chunk` must be 7 bytes long.
#[inline]
fn packed_full(chunk: &[u8]) -> Fp {
    let mut b = [0u8; 8];
    b[..BYTES_PER_ELEMENT].copy_from_slice(&chunk[..BYTES_PER_ELEMENT]);
    field::from_canonical(u64::from_le_bytes(b))
}

/// The element holding up to 7 packed data bytes (little-endian; < 2^56 < p, so the
/// fast canonical conversion applies).
#[inline]
fn packed_element(chunk: &[u8]) -> Fp {
    let mut b = [0u8; 8];
    b[..chunk.len()].copy_from_slice(chunk);
    field::from_canonical(u64::from_le_bytes(b))
}

/// Little-endian bytes of a slice of elements (8 bytes each).
pub fn elements_to_bytes(elements: &[Fp]) -> Vec<u8> {
    let mut out = vec![0u8; elements.len() * ELEMENT_BYTES];
    convert_into(elements, &mut out);
    out
}

/// [`elements_to_bytes`] into `out`, a buffer the caller placed (aligned for O_DIRECT,
/// say), on every core of the current rayon pool in pieces of 64 Ki elements: for
/// large runs a request waits for (an upload's C is 600 MB). Work beside a loop that
/// has the other core (a batch's run writer, the background builder) keeps the
/// one-thread [`elements_to_bytes`]. Converts `min(elements.len(), out.len() / 8)`
/// elements.
pub fn elements_to_bytes_par_into(elements: &[Fp], out: &mut [u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 16;
    if elements.len() <= PIECE {
        // One piece: on this thread (handing it to the pool costs more than it saves).
        return convert_into(elements, out);
    }
    out.par_chunks_mut(PIECE * ELEMENT_BYTES).zip(elements.par_chunks(PIECE)).for_each(|(out, elements)| convert_into(elements, out));
}

fn convert_into(elements: &[Fp], out: &mut [u8]) {
    for (o, e) in out.chunks_exact_mut(ELEMENT_BYTES).zip(elements) {
        o.copy_from_slice(&field::to_bytes(*e));
    }
}

/// Elements from little-endian bytes; errors on a length that is not a multiple of 8
/// or a non-canonical element.
pub fn elements_from_bytes(bytes: &[u8]) -> Result<Vec<Fp>, BlockError> {
    if !bytes.len().is_multiple_of(ELEMENT_BYTES) {
        return Err(BlockError::CodedLength { got: bytes.len(), expected: bytes.len().next_multiple_of(ELEMENT_BYTES) });
    }
    let mut out = Vec::with_capacity(bytes.len() / ELEMENT_BYTES);
    let mut canonical = true;
    for c in bytes.chunks_exact(ELEMENT_BYTES) {
        let mut b = [0u8; ELEMENT_BYTES];
        b.copy_from_slice(c);
        let v = u64::from_le_bytes(b);
        canonical &= v < field::MODULUS;
        out.push(field::from_canonical(v));
    }
    if !canonical {
        // Rare (corrupt input): find the first offending element for the error.
        let j = bytes.chunks_exact(ELEMENT_BYTES).position(|c| c.try_into().map(u64::from_le_bytes).map_or(true, |v| v >= field::MODULUS));
        return Err(BlockError::NonCanonical(j.unwrap_or(0)));
    }
    Ok(out)
}

/// How a file of L bytes lies in blocks: n = ⌈L/β⌉ data blocks padded with zero
/// blocks to N = 2^k (DESIGN §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLayout {
    /// The block format.
    pub format: BlockFormat,
    /// File length L in bytes.
    pub file_bytes: u64,
    /// n, blocks holding file data.
    pub data_blocks: u64,
    /// k = log2 N.
    pub log_blocks: u32,
}

impl FileLayout {
    /// The layout of a file of `file_bytes` bytes; errors if it is empty or needs
    /// more than `max_blocks` blocks (or more than 2^31).
    pub fn new(format: BlockFormat, file_bytes: u64, max_blocks: u64) -> Result<Self, BlockError> {
        if file_bytes == 0 {
            return Err(BlockError::EmptyFile);
        }
        let n = file_bytes.div_ceil(format.block_bytes() as u64);
        let max = max_blocks.min(1u64 << MAX_LOG_BLOCKS);
        if n > max {
            return Err(BlockError::FileTooLarge { bytes: file_bytes, blocks: n, max });
        }
        let log_blocks = n.next_power_of_two().trailing_zeros();
        Ok(Self { format, file_bytes, data_blocks: n, log_blocks })
    }

    /// N = 2^k, the padded block count.
    pub fn num_blocks(&self) -> u64 {
        1u64 << self.log_blocks
    }

    /// The N blocks of `file` (β bytes each, the last data block and the padding
    /// blocks zero-filled). Errors if `file` is not `file_bytes` long.
    pub fn split(&self, file: &[u8]) -> Result<Vec<Vec<u8>>, BlockError> {
        if file.len() as u64 != self.file_bytes {
            return Err(BlockError::DataLength { got: file.len(), expected: self.file_bytes as usize });
        }
        let beta = self.format.block_bytes();
        let mut blocks: Vec<Vec<u8>> = file
            .chunks(beta)
            .map(|c| {
                let mut b = c.to_vec();
                b.resize(beta, 0);
                b
            })
            .collect();
        blocks.resize(self.num_blocks() as usize, vec![0u8; beta]);
        Ok(blocks)
    }

    /// The file from its N blocks: concatenated and cut to `file_bytes`.
    pub fn join(&self, blocks: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.file_bytes as usize);
        for b in blocks {
            out.extend_from_slice(b);
            if out.len() as u64 >= self.file_bytes {
                break;
            }
        }
        out.truncate(self.file_bytes as usize);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_to_bytes_on_every_core_matches_one_at_a_time() {
        // Longer than one piece and not a multiple of it; values across the field.
        let elements: Vec<Fp> = (0..(1u64 << 16) * 2 + 123).map(|i| Fp::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))).collect();
        let expected: Vec<u8> = elements.iter().flat_map(|e| field::to_bytes(*e)).collect();
        assert_eq!(elements_to_bytes(&elements), expected);
        let mut small = vec![0u8; 8000];
        elements_to_bytes_par_into(&elements[..1000], &mut small);
        assert_eq!(small, expected[..8000]);
        let mut placed = vec![0u8; expected.len() + 3];
        elements_to_bytes_par_into(&elements, &mut placed[3..]);
        assert_eq!(placed[3..], expected[..]);
        assert_eq!(elements_from_bytes(&expected).unwrap(), elements);
    }

    /// `record_into` writes what `push_record` appends, with and without a short last
    /// chunk (β = 100 = 14·7 + 2, β = 98 = 14·7, β = 1), and refuses wrong lengths.
    #[test]
    fn record_into_is_the_record() {
        for beta in [100usize, 98, 1, 4096] {
            let f = BlockFormat::new(beta).unwrap();
            let block: Vec<u8> = (0..beta).map(|j| (j as u8).wrapping_mul(37).wrapping_add(200)).collect();
            let mut out = vec![0u64; f.width()];
            f.record_into(9, &block, &mut out, field::to_montgomery).unwrap();
            let expected: Vec<u64> = f.record(9, &block).unwrap().into_iter().map(field::to_montgomery).collect();
            assert_eq!(out, expected, "β = {beta}");
            let mut short = vec![0u64; f.width() - 1];
            assert!(matches!(f.record_into(9, &block, &mut short, field::to_montgomery), Err(BlockError::RecordWidth { .. })));
            assert!(matches!(f.record_into(9, &block[1..], &mut out, field::to_montgomery), Err(BlockError::DataLength { .. })));
        }
    }

    #[test]
    fn record_element_is_the_records_element() {
        // β = 100 leaves a short last chunk (100 = 14·7 + 2).
        let f = BlockFormat::new(100).unwrap();
        let block: Vec<u8> = (0..100u8).map(|j| j.wrapping_mul(37).wrapping_add(200)).collect();
        let record = f.record(9, &block).unwrap();
        assert_eq!(record.len(), f.width());
        for (k, e) in record.iter().enumerate() {
            assert_eq!(f.record_element(9, &block, k), *e, "element {k}");
        }
        // Against the definition: the index, then 7 little-endian bytes per element.
        assert_eq!(record[0], Fp::from(9u64));
        let mut last = [0u8; 8];
        last[..2].copy_from_slice(&block[98..]);
        assert_eq!(record[15], Fp::from(u64::from_le_bytes(last)));
    }

    #[test]
    fn record_round_trip() {
        let f = BlockFormat::new(4096).unwrap();
        assert_eq!(f.width(), 587);
        assert_eq!(f.coded_block_bytes(), 4696);
        let block: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        let r = f.record(9, &block).unwrap();
        assert_eq!(r.len(), 587);
        assert_eq!(f.unrecord(&r).unwrap(), (9, block));
    }

    #[test]
    fn bad_input_is_typed() {
        assert_eq!(BlockFormat::new(0), Err(BlockError::BlockSize(0)));
        let f = BlockFormat::new(10).unwrap();
        assert_eq!(f.record(0, &[0u8; 9]), Err(BlockError::DataLength { got: 9, expected: 10 }));
        let mut r = f.record(0, &[1u8; 10]).unwrap();
        r[1] = Fp::from(1u64 << 56);
        assert_eq!(f.unrecord(&r), Err(BlockError::BadPacking(1)));
        let mut r = f.record(0, &[1u8; 10]).unwrap();
        r[2] = Fp::from(0xFFu64 << 24); // element 2 holds bytes 7..14; β = 10, so byte 10 must be zero
        assert_eq!(f.unrecord(&r), Err(BlockError::BadPacking(2)));
        assert!(matches!(f.coded_from_bytes(&[0u8; 3]), Err(BlockError::CodedLength { .. })));
        let mut bytes = vec![0u8; f.coded_block_bytes()];
        bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(f.coded_from_bytes(&bytes), Err(BlockError::NonCanonical(1)));
        assert_eq!(FileLayout::new(f, 0, 10), Err(BlockError::EmptyFile));
        assert!(matches!(FileLayout::new(f, 101, 10), Err(BlockError::FileTooLarge { blocks: 11, .. })));
    }

    #[test]
    fn layout_pads_to_power_of_two() {
        let f = BlockFormat::new(4).unwrap();
        let l = FileLayout::new(f, 9, 100).unwrap();
        assert_eq!((l.data_blocks, l.num_blocks()), (3, 4));
        let file: Vec<u8> = (1..=9).collect();
        let blocks = l.split(&file).unwrap();
        assert_eq!(blocks, vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8], vec![9, 0, 0, 0], vec![0; 4]]);
        assert_eq!(l.join(&blocks), file);
        assert_eq!(FileLayout::new(f, 1, 1).unwrap().num_blocks(), 1);
    }
}
