//! The owner's checksums (§5.2–5.4).
//!
//! From a 32-byte secret seed the owner derives, by BLAKE3's KDF mode, a random
//! matrix M ∈ F^{ρ×s} and a key sk0. The checksum of a record B is σ(B) = M·B
//! (ρ = [`RHO`] elements). σ is linear, so the owner can run any rebuild of the code
//! on checksums instead of blocks (width ρ instead of s) and so predict the checksum
//! of every coded block the server builds (§5.3). With ρ = 2 and |F| ≈ 2^64, a
//! corrupted block passes with probability ≤ 2^-127 per checksum (ρ·log2 p ≥ 128).
//!
//! The server stores checksums only encrypted: σ̃ = AEAD_κ(σ) with κ = PRF(sk0, place),
//! where the place names where and when the block lives ([`Place`]). A one-time key per
//! (run, position, build time) makes a σ̃ from another place or time fail to open.
//! U's σ̃ uses a per-index key (its freshness comes from U's Merkle tree, whose leaves
//! include σ̃), so the AEAD must tolerate key reuse: AES-256-GCM-SIV (RustCrypto),
//! deterministic and nonce-misuse resistant (it reveals only whether the same block
//! index got an identical checksum twice). σ̃ is 32 bytes: 16 of ciphertext, 16 of tag.

use crate::audit::RunTag;
use crate::field::{self, Fp, MODULUS};
use aes_gcm_siv::aead::{Aead, KeyInit, Payload};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use ark_ff::Zero;
use rayon::prelude::*;
use thiserror::Error;

/// ρ, rows of the checksum matrix (ρ·log2 p ≥ 128).
pub const RHO: usize = 2;

/// Bytes of an encrypted checksum σ̃ (16 ciphertext + 16 tag).
pub const SEALED_BYTES: usize = 32;

/// An encrypted checksum σ̃.
pub type Sealed = [u8; SEALED_BYTES];

/// σ̃_U of every all-zero U block (docs/SCHEME.md §10.5): 32 zero bytes, standing for
/// the checksum of the zero block at that index ([`OwnerKeys::open_u`]); the owner
/// seals U blocks with [`OwnerKeys::seal_u`], which gives it for zero blocks. So a U
/// leaf is a function of the block alone (extraction rebuilds rootU from decoded
/// blocks without knowing which zero blocks were ever written), and a resize can add
/// zero blocks without the owner sending a σ̃ for each (the node cannot seal). The
/// owner computes rootU from these leaves itself, so a node cannot put this value in
/// place of a real σ̃ without breaking U's Merkle paths; a block with it must be all
/// zero to pass a read. (A real AEAD output is all zero with probability 2^-256.)
pub const ZERO_BLOCK_U: Sealed = [0; SEALED_BYTES];

const KDF_MATRIX: &str = "dpor 2026-11 checksum matrix M v1";
const KDF_SK0: &str = "dpor 2026-11 checksum sealing key sk0 v1";

/// Errors of checksums.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChecksumError {
    /// σ̃ did not authenticate for this place: wrong place, wrong time, tampered, or
    /// another owner's.
    #[error("encrypted checksum does not open for {0:?}")]
    Open(Place),
    /// A record or checksum vector has the wrong width.
    #[error("expected {expected} elements, got {got}")]
    Width {
        /// Required elements.
        expected: usize,
        /// Given.
        got: usize,
    },
}

/// Where (and, for coded blocks, when) a checksum belongs: the key κ and the AEAD's
/// associated data are derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// U's block `index`.
    U {
        /// Block index.
        index: u64,
    },
    /// Position `position` of a run (C or an H level) built after `built_at` total writes.
    Run {
        /// Which run.
        tag: RunTag,
        /// Total writes (rebuilds·N + t) when the run was built.
        built_at: u64,
        /// Position in the run.
        position: u64,
    },
}

impl Place {
    fn encode(&self) -> Vec<u8> {
        match *self {
            Place::U { index } => {
                let mut v = vec![b'U'];
                v.extend_from_slice(&index.to_be_bytes());
                v
            }
            Place::Run { tag, built_at, position } => {
                let mut v = vec![b'R'];
                v.extend_from_slice(&tag.0.to_be_bytes());
                v.extend_from_slice(&built_at.to_be_bytes());
                v.extend_from_slice(&position.to_be_bytes());
                v
            }
        }
    }
}

/// The owner's secret key material, derived from its 32-byte seed.
#[derive(Clone)]
pub struct OwnerKeys {
    width: usize,
    matrix: Vec<Fp>,
    sk0: [u8; 32],
}

impl std::fmt::Debug for OwnerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerKeys").field("width", &self.width).finish_non_exhaustive()
    }
}

impl OwnerKeys {
    /// Derives M (ρ × `width`, uniform in F by rejection sampling a BLAKE3 XOF) and
    /// sk0 from `seed`.
    pub fn derive(seed: &[u8; 32], width: usize) -> Self {
        let km = blake3::derive_key(KDF_MATRIX, seed);
        let sk0 = blake3::derive_key(KDF_SK0, seed);
        let mut xof = blake3::Hasher::new_keyed(&km).finalize_xof();
        let mut matrix = Vec::with_capacity(RHO * width);
        let mut buf = [0u8; 8];
        while matrix.len() < RHO * width {
            xof.fill(&mut buf);
            let v = u64::from_le_bytes(buf);
            if v < MODULUS {
                matrix.push(Fp::from(v));
            }
        }
        Self { width, matrix, sk0 }
    }

    /// s, the record width the keys are for.
    pub fn width(&self) -> usize {
        self.width
    }

    /// σ(B) = M·B for one record or coded block of `width` elements.
    pub fn checksum(&self, block: &[Fp]) -> Result<[Fp; RHO], ChecksumError> {
        if block.len() != self.width {
            return Err(ChecksumError::Width { expected: self.width, got: block.len() });
        }
        let mut out = [Fp::zero(); RHO];
        for (r, o) in out.iter_mut().enumerate() {
            let row = &self.matrix[r * self.width..(r + 1) * self.width];
            *o = crate::field::dot(row, block);
        }
        Ok(out)
    }

    /// σ of each block in a flat `blocks × width` slice, as a flat `blocks × ρ` vector.
    pub fn checksums(&self, blocks: &[Fp]) -> Result<Vec<Fp>, ChecksumError> {
        if !blocks.len().is_multiple_of(self.width) {
            return Err(ChecksumError::Width { expected: self.width, got: blocks.len() % self.width });
        }
        // Blocks are independent: σ of each on rayon's pool, in order.
        let sums: Vec<[Fp; RHO]> =
            blocks.par_chunks_exact(self.width).map(|b| self.checksum(b)).collect::<Result<_, _>>()?;
        Ok(sums.into_iter().flatten().collect())
    }

    fn cipher(&self, place: &Place) -> (Aes256GcmSiv, Vec<u8>) {
        let aad = place.encode();
        let kappa = blake3::keyed_hash(&self.sk0, &aad);
        (Aes256GcmSiv::new(kappa.as_bytes().into()), aad)
    }

    /// The read check of U's blocks (§5.2) for a run of consecutive blocks: `blocks[j]`
    /// (β bytes, record format `format`) is block `start + j` and `sealed[j]` its σ̃_U,
    /// which the caller has checked against rootU (the U leaves commit to σ̃, so they are
    /// fresh). A block passes when its σ̃ opens and σ(record(index, block)) equals it: a
    /// block other than the owner's passes with probability ≤ 2^-127 (module docs),
    /// without rehashing its chunk tree. A block whose σ̃ is [`ZERO_BLOCK_U`] passes only
    /// if it is all zero. Blocks are checked on rayon's pool.
    ///
    /// Returns the lowest failing index, `None` when all pass (also when the lengths of
    /// `blocks` and `sealed` differ: the extra entries fail, at the first of them).
    pub fn first_bad_u_block<B: AsRef<[u8]> + Sync>(
        &self,
        format: &crate::block::BlockFormat,
        start: u64,
        blocks: &[B],
        sealed: &[Sealed],
    ) -> Option<u64> {
        if blocks.len() != sealed.len() {
            return Some(start + blocks.len().min(sealed.len()) as u64);
        }
        blocks
            .par_iter()
            .zip(sealed.par_iter())
            .enumerate()
            .filter_map(|(j, (block, s))| {
                let index = start + j as u64;
                if *s == ZERO_BLOCK_U {
                    // The σ̃ of an all-zero block ([`OwnerKeys::seal_u`]).
                    return block.as_ref().iter().any(|b| *b != 0).then_some(index);
                }
                let ok = self.open(Place::U { index }, s).ok().and_then(|want| {
                    let record = format.record(index, block.as_ref()).ok()?;
                    Some(self.checksum(&record).ok()? == want)
                });
                (ok != Some(true)).then_some(index)
            })
            .min()
    }

    /// σ̃_U of block `index` holding `block` with checksum `sigma`: [`ZERO_BLOCK_U`] if
    /// the block is all zero, else [`OwnerKeys::seal`] for [`Place::U`].
    pub fn seal_u(&self, index: u64, block: &[u8], sigma: &[Fp; RHO]) -> Sealed {
        if block.iter().all(|b| *b == 0) {
            return ZERO_BLOCK_U;
        }
        self.seal(Place::U { index }, sigma)
    }

    /// σ̃ = AEAD_κ(σ) for `place`.
    pub fn seal(&self, place: Place, sigma: &[Fp; RHO]) -> Sealed {
        let (cipher, aad) = self.cipher(&place);
        let mut pt = [0u8; RHO * 8];
        for (i, e) in sigma.iter().enumerate() {
            pt[i * 8..(i + 1) * 8].copy_from_slice(&field::to_bytes(*e));
        }
        let mut out = [0u8; SEALED_BYTES];
        // Encryption of 16 bytes with a 32-byte key cannot fail; an empty σ̃ would
        // never open, so the failure is still caught on the owner's side.
        if let Ok(ct) = cipher.encrypt(Nonce::from_slice(&[0u8; 12]), Payload { msg: &pt, aad: &aad }) {
            out.copy_from_slice(&ct);
        }
        out
    }

    /// Opens σ̃_U of block `index` (a U leaf already checked against rootU):
    /// [`ZERO_BLOCK_U`] gives σ of the zero block's record at `index` (`zero_record`
    /// = [`crate::block::BlockFormat::record`] of β zero bytes at `index`); anything
    /// else must open as [`OwnerKeys::open`] for [`Place::U`].
    pub fn open_u(&self, index: u64, sealed: &Sealed, zero_record: impl FnOnce() -> Vec<Fp>) -> Result<[Fp; RHO], ChecksumError> {
        if *sealed == ZERO_BLOCK_U {
            return self.checksum(&zero_record());
        }
        self.open(Place::U { index }, sealed)
    }

    /// Opens σ̃ for `place`: errors unless it was sealed for exactly this place by
    /// these keys and not modified.
    pub fn open(&self, place: Place, sealed: &Sealed) -> Result<[Fp; RHO], ChecksumError> {
        let (cipher, aad) = self.cipher(&place);
        let pt = cipher
            .decrypt(Nonce::from_slice(&[0u8; 12]), Payload { msg: sealed, aad: &aad })
            .map_err(|_| ChecksumError::Open(place))?;
        let mut out = [Fp::zero(); RHO];
        for (i, o) in out.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&pt[i * 8..(i + 1) * 8]);
            *o = field::from_bytes(b).ok_or(ChecksumError::Open(place))?;
        }
        Ok(out)
    }
}
