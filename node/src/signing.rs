//! The provider's Ethereum key and owner-request authentication.
//!
//! The node signs checkpoint digests (EIP-712, ENCODING.md §5) with the provider key
//! it registered on chain, and checks that owner requests are signed by the deal's
//! owner over `dpor_proto::messages::owner_request_hash`.

use alloy::signers::local::PrivateKeySigner;
use alloy::signers::SignerSync;
use alloy_primitives::{Address, Signature, B256};
use dpor_proto::messages::owner_request_hash;

/// The provider key with the chain and market it signs for.
pub struct ProviderSigner {
    key: PrivateKeySigner,
    chain_id: u64,
    market: Address,
}

impl ProviderSigner {
    /// A signer for the market at `market` on chain `chain_id`.
    pub fn new(key: PrivateKeySigner, chain_id: u64, market: Address) -> Self {
        Self { key, chain_id, market }
    }

    /// The provider account.
    pub fn address(&self) -> Address {
        self.key.address()
    }

    /// The chain id digests are signed for.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The market contract (EIP-712 verifying contract).
    pub fn market(&self) -> Address {
        self.market
    }

    /// The key itself (for the chain client).
    pub fn key(&self) -> &PrivateKeySigner {
        &self.key
    }

    /// A 65-byte signature r ‖ s ‖ v (v = 27/28) of a 32-byte hash.
    pub fn sign(&self, hash: B256) -> Result<Vec<u8>, String> {
        let sig = self.key.sign_hash_sync(&hash).map_err(|e| format!("signing failed: {e}"))?;
        Ok(sig.as_bytes().to_vec())
    }
}

/// The account that signed an owner request (deal, nonce, op bytes) for this chain and
/// market; errors if the signature is not 65 well-formed bytes or does not recover.
pub fn recover_owner(chain_id: u64, market: Address, deal: u64, nonce: u64, op: &[u8], signature: &[u8]) -> Result<Address, String> {
    if signature.len() != 65 {
        return Err(format!("owner request signature has {} bytes, expected 65 (unsigned request?)", signature.len()));
    }
    let sig = Signature::try_from(signature).map_err(|e| format!("bad owner request signature: {e}"))?;
    let hash = owner_request_hash(chain_id, market, deal, nonce, op);
    sig.recover_address_from_prehash(&hash).map_err(|e| format!("owner request signature does not recover: {e}"))
}

/// The account whose 65-byte ECDSA signature `signature` is over `hash` (an EIP-712
/// digest hash, signed as is: how the market checks an externally owned account's
/// `postDigest` signature). Errors if it is not 65 well-formed bytes or does not
/// recover.
pub fn recover_prehash(hash: B256, signature: &[u8]) -> Result<Address, String> {
    if signature.len() != 65 {
        return Err(format!("signature has {} bytes, expected 65", signature.len()));
    }
    let sig = Signature::try_from(signature).map_err(|e| format!("bad signature: {e}"))?;
    sig.recover_address_from_prehash(&hash).map_err(|e| format!("signature does not recover: {e}"))
}

/// Signs an owner request (the owner side; used by the CLI and tests).
pub fn sign_owner_request(key: &PrivateKeySigner, chain_id: u64, market: Address, deal: u64, nonce: u64, op: &[u8]) -> Result<Vec<u8>, String> {
    let hash = owner_request_hash(chain_id, market, deal, nonce, op);
    let sig = key.sign_hash_sync(&hash).map_err(|e| format!("signing failed: {e}"))?;
    Ok(sig.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_signature_recovers_only_for_the_same_request() {
        let key = PrivateKeySigner::random();
        let m = Address::repeat_byte(9);
        let sig = sign_owner_request(&key, 31337, m, 1, 5, b"op").unwrap();
        assert_eq!(recover_owner(31337, m, 1, 5, b"op", &sig).unwrap(), key.address());
        assert_ne!(recover_owner(31337, m, 1, 6, b"op", &sig).unwrap(), key.address());
        assert_ne!(recover_owner(1, m, 1, 5, b"op", &sig).unwrap(), key.address());
        assert!(recover_owner(31337, m, 1, 5, b"op", &sig[..64]).is_err());
        assert!(recover_owner(31337, m, 1, 5, b"op", &[]).is_err());
    }
}
