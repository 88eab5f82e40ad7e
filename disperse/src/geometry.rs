//! The shape of a dispersal: k data shards, n − k parity shards, blocks of β bytes, and
//! where each file block lies.

use thiserror::Error;

/// β, the block size every shard uses: one dpor block (`dpor_core::block::DEFAULT_BLOCK_BYTES`).
pub const DEFAULT_BLOCK_BYTES: u32 = 4096;

/// The most shards (providers) one file may be dispersed over. Deployed systems use
/// up to tens (renterd 30, Storj 80); the code itself allows far more (GF(2^16)).
pub const MAX_SHARDS: u16 = 256;

/// The largest block size, as for a single deal (`dpor_core::block::MAX_BLOCK_BYTES`, 1 MiB).
pub const MAX_BLOCK_BYTES: u32 = 1 << 20;

/// Errors of [`Geometry::new`] and of locating blocks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GeometryError {
    /// k must be at least 1 and below n (at least one parity shard), n at most [`MAX_SHARDS`].
    #[error("{k}-of-{n} is not a dispersal: need 1 ≤ k < n ≤ {MAX_SHARDS}")]
    Shape {
        /// Data shards asked for.
        k: u16,
        /// Shards asked for.
        n: u16,
    },
    /// β must be even (GF(2^16) symbols), non-zero and at most [`MAX_BLOCK_BYTES`].
    #[error("block size {0} is not an even number of bytes in 2..={MAX_BLOCK_BYTES}")]
    BlockSize(u32),
    /// An empty file has nothing to disperse.
    #[error("the file is empty")]
    EmptyFile,
    /// A shard index ≥ n.
    #[error("shard {index} does not exist in a dispersal over {n} shards")]
    NoSuchShard {
        /// The index given.
        index: u16,
        /// n.
        n: u16,
    },
}

/// The index of a shard, 0..n: shards 0..k hold data, k..n parity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardIndex(pub u16);

impl ShardIndex {
    /// As a `usize`, for indexing.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ShardIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A k-of-n dispersal with blocks of β bytes; valid by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    k: u16,
    n: u16,
    block_bytes: u32,
}

impl Geometry {
    /// k data shards out of n, blocks of `block_bytes` (β). Errors: [`GeometryError::Shape`]
    /// unless 1 ≤ k < n ≤ [`MAX_SHARDS`]; [`GeometryError::BlockSize`] unless β is even
    /// and in 2..=[`MAX_BLOCK_BYTES`].
    pub fn new(k: u16, n: u16, block_bytes: u32) -> Result<Self, GeometryError> {
        if k == 0 || k >= n || n > MAX_SHARDS {
            return Err(GeometryError::Shape { k, n });
        }
        if block_bytes == 0 || !block_bytes.is_multiple_of(2) || block_bytes > MAX_BLOCK_BYTES {
            return Err(GeometryError::BlockSize(block_bytes));
        }
        debug_assert!(reed_solomon_simd::ReedSolomonEncoder::supports(k as usize, (n - k) as usize));
        Ok(Self { k, n, block_bytes })
    }

    /// k, the data shards (any k shards of a stripe decode it).
    pub fn data_shards(&self) -> u16 {
        self.k
    }

    /// n, all shards.
    pub fn total_shards(&self) -> u16 {
        self.n
    }

    /// n − k, the parity shards: the number of shards that may be lost.
    pub fn parity_shards(&self) -> u16 {
        self.n - self.k
    }

    /// β in bytes.
    pub fn block_bytes(&self) -> u32 {
        self.block_bytes
    }

    /// β as a `usize`.
    pub fn beta(&self) -> usize {
        self.block_bytes as usize
    }

    /// Whether `shard` holds data (index < k).
    pub fn is_data(&self, shard: ShardIndex) -> bool {
        shard.0 < self.k
    }

    /// Checks that `shard` < n.
    pub fn check_shard(&self, shard: ShardIndex) -> Result<(), GeometryError> {
        if shard.0 >= self.n {
            return Err(GeometryError::NoSuchShard { index: shard.0, n: self.n });
        }
        Ok(())
    }

    /// File blocks ⌈L/β⌉ of a file of `file_bytes` bytes; [`GeometryError::EmptyFile`] for 0.
    pub fn file_blocks(&self, file_bytes: u64) -> Result<u64, GeometryError> {
        if file_bytes == 0 {
            return Err(GeometryError::EmptyFile);
        }
        Ok(file_bytes.div_ceil(self.block_bytes as u64))
    }

    /// Stripes of a file of `file_bytes` bytes = blocks in every shard: ⌈⌈L/β⌉ / k⌉.
    pub fn stripes(&self, file_bytes: u64) -> Result<u64, GeometryError> {
        Ok(self.file_blocks(file_bytes)?.div_ceil(self.k as u64))
    }

    /// Bytes of every shard of a file of `file_bytes` bytes: stripes · β.
    pub fn shard_bytes(&self, file_bytes: u64) -> Result<u64, GeometryError> {
        Ok(self.stripes(file_bytes)? * self.block_bytes as u64)
    }

    /// Where file block `b` lies: (data shard b mod k, stripe b / k). The block index
    /// within the shard (its dpor block index) is the stripe.
    pub fn locate(&self, file_block: u64) -> (ShardIndex, u64) {
        let k = self.k as u64;
        (ShardIndex((file_block % k) as u16), file_block / k)
    }

    /// The inverse of [`Geometry::locate`]: the file block held by data shard `shard`
    /// at `stripe`, or `None` for a parity shard.
    pub fn file_block(&self, shard: ShardIndex, stripe: u64) -> Option<u64> {
        self.is_data(shard).then(|| stripe * self.k as u64 + shard.0 as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(Geometry::new(4, 6, 4096).is_ok());
        assert!(Geometry::new(1, 2, 2).is_ok());
        assert!(Geometry::new(255, 256, 4096).is_ok());
        assert_eq!(Geometry::new(0, 3, 4096), Err(GeometryError::Shape { k: 0, n: 3 }));
        assert_eq!(Geometry::new(3, 3, 4096), Err(GeometryError::Shape { k: 3, n: 3 }));
        assert_eq!(Geometry::new(4, 3, 4096), Err(GeometryError::Shape { k: 4, n: 3 }));
        assert_eq!(Geometry::new(4, 257, 4096), Err(GeometryError::Shape { k: 4, n: 257 }));
        assert_eq!(Geometry::new(4, 6, 4095), Err(GeometryError::BlockSize(4095)));
        assert_eq!(Geometry::new(4, 6, 0), Err(GeometryError::BlockSize(0)));
        assert_eq!(Geometry::new(4, 6, (1 << 20) + 2), Err(GeometryError::BlockSize((1 << 20) + 2)));
    }

    #[test]
    fn every_supported_shape_is_supported_by_the_code() {
        for n in 2..=MAX_SHARDS {
            for k in 1..n {
                assert!(reed_solomon_simd::ReedSolomonEncoder::supports(k as usize, (n - k) as usize), "{k}-of-{n}");
            }
        }
    }

    #[test]
    fn layout() {
        let g = Geometry::new(4, 6, 4096).unwrap();
        assert_eq!(g.file_blocks(1), Ok(1));
        assert_eq!(g.file_blocks(0), Err(GeometryError::EmptyFile));
        assert_eq!(g.stripes(4096 * 4), Ok(1));
        assert_eq!(g.stripes(4096 * 4 + 1), Ok(2));
        assert_eq!(g.shard_bytes(4096 * 9), Ok(3 * 4096));
        for b in 0..40 {
            let (s, i) = g.locate(b);
            assert!(g.is_data(s));
            assert_eq!(g.file_block(s, i), Some(b));
        }
        assert_eq!(g.locate(5), (ShardIndex(1), 1));
        assert_eq!(g.file_block(ShardIndex(4), 0), None);
        assert!(g.check_shard(ShardIndex(5)).is_ok());
        assert_eq!(g.check_shard(ShardIndex(6)), Err(GeometryError::NoSuchShard { index: 6, n: 6 }));
    }
}
