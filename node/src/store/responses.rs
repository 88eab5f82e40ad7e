//! Committed epoch responses (docs/COMMITMENTS.md §6): for each deal epoch the node put
//! in an epoch commitment, the encoded response (the whole sampled coded blocks, their
//! run paths, the digest version, the leaf index and path, the commitment's root). Kept
//! in sled under `r ‖ u64be(deal) ‖ u64be(epoch)` until the challenge window closes, so
//! the chain agent can answer a challenge and anyone can fetch them over libp2p. The
//! store does not interpret the bytes (the agent encodes them, the handler serves them).

use super::{Result, Store};

/// Key prefix of committed epoch responses.
pub(crate) const RESPONSE_PREFIX: u8 = b'r';

fn response_key(deal: u64, epoch: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = RESPONSE_PREFIX;
    k[1..9].copy_from_slice(&deal.to_be_bytes());
    k[9..].copy_from_slice(&epoch.to_be_bytes());
    k
}

impl Store {
    /// Stores the responses `(deal, deal epoch, encoded response)` of one commitment
    /// atomically and durably (flushed before returning: the commitment is posted only
    /// after this, so a crash never leaves a posted root without its responses).
    pub fn put_epoch_responses(&self, items: &[(u64, u64, Vec<u8>)]) -> Result<()> {
        let mut batch = sled::Batch::default();
        for (deal, epoch, bytes) in items {
            batch.insert(&response_key(*deal, *epoch), bytes.as_slice());
        }
        self.db.apply_batch(batch)?;
        self.db.flush()?;
        Ok(())
    }

    /// The encoded response of `deal`'s epoch `epoch`, if it was committed and is still kept.
    pub fn epoch_response(&self, deal: u64, epoch: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(response_key(deal, epoch))?.map(|v| v.to_vec()))
    }

    /// Drops `deal`'s kept responses of epochs below `before` (their challenge windows
    /// are over). Returns how many were dropped.
    pub fn prune_epoch_responses(&self, deal: u64, before: u64) -> Result<usize> {
        let mut n = 0;
        for kv in self.db.range(response_key(deal, 0)..response_key(deal, before)) {
            let (k, _) = kv?;
            self.db.remove(k)?;
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreConfig};

    #[test]
    fn responses_are_kept_per_deal_epoch_and_pruned_below_an_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
        store.put_epoch_responses(&[(1, 0, vec![1]), (1, 1, vec![2]), (2, 0, vec![3])]).unwrap();
        assert_eq!(store.epoch_response(1, 1).unwrap(), Some(vec![2]));
        assert_eq!(store.epoch_response(1, 2).unwrap(), None);
        assert_eq!(store.prune_epoch_responses(1, 1).unwrap(), 1);
        assert_eq!(store.epoch_response(1, 0).unwrap(), None);
        assert_eq!(store.epoch_response(1, 1).unwrap(), Some(vec![2]));
        assert_eq!(store.epoch_response(2, 0).unwrap(), Some(vec![3]));
        drop(store);
        let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
        assert_eq!(store.epoch_response(2, 0).unwrap(), Some(vec![3]), "kept across a restart");
    }
}
