//! A tiny explicit binary codec for metadata values: big-endian integers,
//! length-prefixed byte strings. Decoding never panics; a short or malformed value is
//! [`StoreError::Corrupt`].

use super::error::{Result, StoreError};
use alloy_primitives::{Address, B256, U256};
use dpor_core::digest::Digest;

/// Appends values to a byte vector.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.raw(v);
    }
    pub(crate) fn digest(&mut self, d: &Digest) {
        self.raw(&d.dealId.to_be_bytes::<32>());
        self.u64(d.version);
        self.u64(d.numBlocks);
        self.u64(d.writeCount);
        self.u64(d.rebuildCount);
        self.raw(d.rootU.as_slice());
        self.raw(d.rootC.as_slice());
        self.u32(d.levelRoots.len() as u32);
        for r in &d.levelRoots {
            self.raw(r.as_slice());
        }
    }
}

/// Reads values back from a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, what }
    }
    pub(crate) fn raw(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(StoreError::Corrupt(format!("{} is truncated", self.what)));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    pub(crate) fn array<const K: usize>(&mut self) -> Result<[u8; K]> {
        let mut out = [0u8; K];
        out.copy_from_slice(self.raw(K)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    pub(crate) fn b256(&mut self) -> Result<B256> {
        Ok(B256::from(self.array::<32>()?))
    }
    pub(crate) fn address(&mut self) -> Result<Address> {
        Ok(Address::from(self.array::<20>()?))
    }
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| StoreError::Corrupt(format!("{}: length {n}", self.what)))?;
        Ok(self.raw(n)?.to_vec())
    }
    pub(crate) fn count(&mut self, max: u32) -> Result<u32> {
        let n = self.u32()?;
        if n > max {
            return Err(StoreError::Corrupt(format!("{}: count {n} above {max}", self.what)));
        }
        Ok(n)
    }
    pub(crate) fn digest(&mut self) -> Result<Digest> {
        let deal_id = U256::from_be_bytes(self.array::<32>()?);
        let version = self.u64()?;
        let num_blocks = self.u64()?;
        let write_count = self.u64()?;
        let rebuild_count = self.u64()?;
        let root_u = self.b256()?;
        let root_c = self.b256()?;
        let n = self.count(64)?;
        let level_roots = (0..n).map(|_| self.b256()).collect::<Result<Vec<_>>>()?;
        Ok(Digest {
            dealId: deal_id,
            version,
            numBlocks: num_blocks,
            writeCount: write_count,
            rebuildCount: rebuild_count,
            rootU: root_u,
            rootC: root_c,
            levelRoots: level_roots,
        })
    }
    pub(crate) fn finish(&self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!("{} has {} trailing bytes", self.what, self.buf.len())))
        }
    }
}
