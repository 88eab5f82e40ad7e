//! The shard-set manifest: a dispersed file's length, its geometry, and for every shard
//! the deal that holds it and the digest version the owner last posted for that deal.
//!
//! **Canonical encoding** (`Manifest::to_bytes`, big-endian, no padding, 32 + 16·n bytes):
//!
//! | bytes | field |
//! |---|---|
//! | 16 | the tag `"dpor.manifest.v1"` (ASCII) |
//! | 8 | file length L in bytes (≥ 1) |
//! | 4 | β, block bytes (even, 2..=2^20) |
//! | 2 | k |
//! | 2 | n (1 ≤ k < n ≤ 256) |
//! | 16·n | per shard 0..n: deal id (8), digest version (8) |
//!
//! Deal ids are non-zero (the market numbers deals from 1) and pairwise distinct.
//! [`Manifest::from_bytes`] accepts exactly the encodings `to_bytes` produces (wrong tag,
//! bad shape, a zero or repeated deal id, or trailing bytes are errors), so one manifest
//! has one encoding and `from_bytes(to_bytes(m)) == m`.

use crate::geometry::{Geometry, GeometryError, ShardIndex};
use thiserror::Error;

/// The tag that starts every encoded manifest (version 1).
pub const MANIFEST_TAG: &[u8; 16] = b"dpor.manifest.v1";

const HEADER_BYTES: usize = 16 + 8 + 4 + 2 + 2;
const ENTRY_BYTES: usize = 16;

/// Errors of building or decoding a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ManifestError {
    /// Bad geometry, empty file or shard index.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// The number of shard entries is not n.
    #[error("a {k}-of-{n} manifest lists {n} shards, got {got}")]
    ShardCount {
        /// k.
        k: u16,
        /// n.
        n: u16,
        /// Entries given.
        got: usize,
    },
    /// Deal id 0 (no deal).
    #[error("shard {0} names deal 0, which does not exist")]
    ZeroDeal(ShardIndex),
    /// Two shards in one deal.
    #[error("shards {first} and {second} both name deal {deal}")]
    RepeatedDeal {
        /// The deal.
        deal: u64,
        /// One shard.
        first: ShardIndex,
        /// The other.
        second: ShardIndex,
    },
    /// The bytes do not start with [`MANIFEST_TAG`].
    #[error("not a dpor manifest v1 (wrong tag)")]
    Tag,
    /// The bytes are not 32 + 16·n long.
    #[error("a manifest of {n} shards is {expected} bytes, got {got}")]
    Length {
        /// n read from the header (0 if the header itself is short).
        n: u16,
        /// Expected length.
        expected: usize,
        /// Length given.
        got: usize,
    },
}

/// One shard's place: the deal that holds it and the latest digest version the owner
/// posted for it (0 before the first checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardEntry {
    /// The market's deal id (≥ 1).
    pub deal_id: u64,
    /// The deal's latest digest version known to the owner.
    pub digest_version: u64,
}

/// A dispersed file: its length, geometry and the n shard entries in shard order.
/// Valid by construction (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Manifest {
    file_bytes: u64,
    geometry: Geometry,
    shards: Vec<ShardEntry>,
}

impl Manifest {
    /// A manifest; errors if `file_bytes` is 0, `shards.len()` ≠ n, or a deal id is 0
    /// or repeated.
    pub fn new(file_bytes: u64, geometry: Geometry, shards: Vec<ShardEntry>) -> Result<Self, ManifestError> {
        geometry.file_blocks(file_bytes)?;
        if shards.len() != geometry.total_shards() as usize {
            return Err(ManifestError::ShardCount {
                k: geometry.data_shards(),
                n: geometry.total_shards(),
                got: shards.len(),
            });
        }
        for (i, e) in shards.iter().enumerate() {
            if e.deal_id == 0 {
                return Err(ManifestError::ZeroDeal(ShardIndex(i as u16)));
            }
            if let Some(j) = shards[..i].iter().position(|f| f.deal_id == e.deal_id) {
                return Err(ManifestError::RepeatedDeal {
                    deal: e.deal_id,
                    first: ShardIndex(j as u16),
                    second: ShardIndex(i as u16),
                });
            }
        }
        Ok(Self { file_bytes, geometry, shards })
    }

    /// L, the file's length in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Its geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The n entries in shard order.
    pub fn shards(&self) -> &[ShardEntry] {
        &self.shards
    }

    /// The entry of `shard`.
    pub fn shard(&self, shard: ShardIndex) -> Result<ShardEntry, ManifestError> {
        self.geometry.check_shard(shard)?;
        Ok(self.shards[shard.get()])
    }

    /// Records a checkpoint: `shard`'s deal posted digest `version`.
    pub fn set_version(&mut self, shard: ShardIndex, version: u64) -> Result<(), ManifestError> {
        self.geometry.check_shard(shard)?;
        self.shards[shard.get()].digest_version = version;
        Ok(())
    }

    /// Records a repair: `shard` now lives in deal `entry.deal_id`. Errors (and leaves
    /// the manifest unchanged) if the deal is 0 or already holds another shard.
    pub fn replace_shard(&mut self, shard: ShardIndex, entry: ShardEntry) -> Result<(), ManifestError> {
        self.geometry.check_shard(shard)?;
        let mut shards = self.shards.clone();
        shards[shard.get()] = entry;
        *self = Self::new(self.file_bytes, self.geometry, shards)?;
        Ok(())
    }

    /// The canonical encoding (module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + ENTRY_BYTES * self.shards.len());
        out.extend_from_slice(MANIFEST_TAG);
        out.extend_from_slice(&self.file_bytes.to_be_bytes());
        out.extend_from_slice(&self.geometry.block_bytes().to_be_bytes());
        out.extend_from_slice(&self.geometry.data_shards().to_be_bytes());
        out.extend_from_slice(&self.geometry.total_shards().to_be_bytes());
        for e in &self.shards {
            out.extend_from_slice(&e.deal_id.to_be_bytes());
            out.extend_from_slice(&e.digest_version.to_be_bytes());
        }
        out
    }

    /// Decodes the canonical encoding; any other byte string is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ManifestError> {
        if bytes.len() < HEADER_BYTES {
            return Err(ManifestError::Length { n: 0, expected: HEADER_BYTES, got: bytes.len() });
        }
        if &bytes[..16] != MANIFEST_TAG {
            return Err(ManifestError::Tag);
        }
        let file_bytes = u64::from_be_bytes(arr(&bytes[16..24]));
        let block_bytes = u32::from_be_bytes(arr(&bytes[24..28]));
        let k = u16::from_be_bytes(arr(&bytes[28..30]));
        let n = u16::from_be_bytes(arr(&bytes[30..32]));
        let geometry = Geometry::new(k, n, block_bytes)?;
        let expected = HEADER_BYTES + ENTRY_BYTES * n as usize;
        if bytes.len() != expected {
            return Err(ManifestError::Length { n, expected, got: bytes.len() });
        }
        let shards = bytes[HEADER_BYTES..]
            .chunks_exact(ENTRY_BYTES)
            .map(|c| ShardEntry {
                deal_id: u64::from_be_bytes(arr(&c[..8])),
                digest_version: u64::from_be_bytes(arr(&c[8..])),
            })
            .collect();
        Self::new(file_bytes, geometry, shards)
    }
}

/// A fixed array from a slice of exactly its length (callers slice exact ranges).
fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let g = Geometry::new(2, 3, 4096).unwrap();
        let shards = vec![
            ShardEntry { deal_id: 7, digest_version: 1 },
            ShardEntry { deal_id: 9, digest_version: 0 },
            ShardEntry { deal_id: 1, digest_version: 3 },
        ];
        Manifest::new(10_000, g, shards).unwrap()
    }

    #[test]
    fn known_encoding() {
        let m = sample();
        let b = m.to_bytes();
        let mut want = b"dpor.manifest.v1".to_vec();
        want.extend_from_slice(&10_000u64.to_be_bytes());
        want.extend_from_slice(&4096u32.to_be_bytes());
        want.extend_from_slice(&[0, 2, 0, 3]);
        for (d, v) in [(7u64, 1u64), (9, 0), (1, 3)] {
            want.extend_from_slice(&d.to_be_bytes());
            want.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(b, want);
        assert_eq!(b.len(), 32 + 16 * 3);
        assert_eq!(Manifest::from_bytes(&b), Ok(m));
    }

    #[test]
    fn rejects_non_canonical() {
        let b = sample().to_bytes();
        let mut t = b.clone();
        t.push(0);
        assert!(matches!(Manifest::from_bytes(&t), Err(ManifestError::Length { n: 3, .. })));
        assert!(matches!(Manifest::from_bytes(&b[..b.len() - 1]), Err(ManifestError::Length { .. })));
        assert!(matches!(Manifest::from_bytes(&b[..10]), Err(ManifestError::Length { n: 0, .. })));
        let mut t = b.clone();
        t[15] = b'2';
        assert_eq!(Manifest::from_bytes(&t), Err(ManifestError::Tag));
        let mut t = b.clone();
        t[29] = 3; // k = n
        assert!(matches!(Manifest::from_bytes(&t), Err(ManifestError::Geometry(GeometryError::Shape { k: 3, n: 3 }))));
        let mut t = b.clone();
        t[16..24].copy_from_slice(&0u64.to_be_bytes());
        assert_eq!(Manifest::from_bytes(&t), Err(ManifestError::Geometry(GeometryError::EmptyFile)));
        let mut t = b.clone();
        t[32 + 16..32 + 24].copy_from_slice(&7u64.to_be_bytes()); // shard 1 → deal 7 as shard 0
        assert_eq!(
            Manifest::from_bytes(&t),
            Err(ManifestError::RepeatedDeal { deal: 7, first: ShardIndex(0), second: ShardIndex(1) })
        );
        let mut t = b;
        t[32..40].copy_from_slice(&0u64.to_be_bytes());
        assert_eq!(Manifest::from_bytes(&t), Err(ManifestError::ZeroDeal(ShardIndex(0))));
    }

    #[test]
    fn updates() {
        let mut m = sample();
        m.set_version(ShardIndex(1), 4).unwrap();
        assert_eq!(m.shard(ShardIndex(1)).unwrap().digest_version, 4);
        let before = m.clone();
        assert!(matches!(
            m.replace_shard(ShardIndex(2), ShardEntry { deal_id: 9, digest_version: 0 }),
            Err(ManifestError::RepeatedDeal { deal: 9, .. })
        ));
        assert_eq!(m, before, "a refused repair leaves the manifest unchanged");
        m.replace_shard(ShardIndex(2), ShardEntry { deal_id: 12, digest_version: 0 }).unwrap();
        assert_eq!(m.shard(ShardIndex(2)).unwrap().deal_id, 12);
        assert!(m.shard(ShardIndex(3)).is_err());
        assert!(Manifest::new(1, m.geometry(), m.shards()[..2].to_vec()).is_err());
    }
}
