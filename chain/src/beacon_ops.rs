//! The randomness beacon the market reads its seeds from (`DrandBeacon`,
//! contracts/src/beacon/DrandBeacon.sol: drand `evmnet` BLS-on-BN254 rounds verified
//! on chain), as far as a relay needs it: which round an epoch's seed uses
//! (`roundAt`), whether it is recorded (`randomness`), when it is emitted
//! (`roundTime`), when it was first relayed (`recordedAt`: the market excuses a missed
//! epoch whose round came after the middle of its window), and recording a signed
//! round (`record`).

use crate::client::{contract_err, Market};
use crate::error::ChainError;
use alloy_primitives::{Address, Bytes, B256, U256};

alloy::sol!(
    #[sol(rpc)]
    #[allow(missing_docs)]
    /// The part of `DrandBeacon`'s ABI a relay uses (mirrors contracts/src/beacon/DrandBeacon.sol).
    interface IDrandBeacon {
        function randomness(uint64 round) external view returns (bytes32);
        function roundAt(uint256 timestamp) external view returns (uint64);
        function roundTime(uint64 round) external view returns (uint256);
        function recordedAt(uint64 round) external view returns (uint64);
        function publicKey() external view returns (uint256[4] memory);
        function record(uint64 round, bytes calldata sig) external returns (bytes32 value);
        error RoundZero();
        error RoundNotYetEmitted(uint64 round, uint256 emissionTime);
        error AlreadyRecorded(uint64 round);
        error InvalidSignatureLength(uint256 length);
        error InvalidSignaturePoint();
        error InvalidSignature(uint64 round);
        error RoundOverflow();
    }
);

impl Market {
    fn beacon_at(&self, beacon: Address) -> IDrandBeacon::IDrandBeaconInstance<alloy::providers::DynProvider> {
        IDrandBeacon::new(beacon, self.provider.clone())
    }

    /// The round whose randomness seeds the global epoch starting at `timestamp`
    /// (`roundAt`, the first round emitted at or after it).
    pub async fn beacon_round_at(&self, beacon: Address, timestamp: u64) -> Result<u64, ChainError> {
        self.beacon_at(beacon).roundAt(U256::from(timestamp)).call().await.map_err(|e| contract_err("roundAt", e))
    }

    /// The beacon's group public key as its four constructor words (`publicKey()`), to
    /// verify a round's signature before paying gas to record it.
    pub async fn beacon_public_key(&self, beacon: Address) -> Result<[U256; 4], ChainError> {
        self.beacon_at(beacon).publicKey().call().await.map_err(|e| contract_err("publicKey", e))
    }

    /// The recorded randomness of `round`, `None` if not recorded yet.
    pub async fn beacon_randomness(&self, beacon: Address, round: u64) -> Result<Option<B256>, ChainError> {
        let r = self.beacon_at(beacon).randomness(round).call().await.map_err(|e| contract_err("randomness", e))?;
        Ok((r != B256::ZERO).then_some(r))
    }

    /// The emission time of `round` (`roundTime`): it can be recorded once the chain's
    /// time reaches it.
    pub async fn beacon_round_time(&self, beacon: Address, round: u64) -> Result<u64, ChainError> {
        let t = self.beacon_at(beacon).roundTime(round).call().await.map_err(|e| contract_err("roundTime", e))?;
        crate::client::to_u64(t)
    }

    /// When `round` was first recorded (`recordedAt`: the block timestamp of its first
    /// relay, which never changes), `None` if not recorded yet.
    pub async fn beacon_recorded_at(&self, beacon: Address, round: u64) -> Result<Option<u64>, ChainError> {
        let t = self.beacon_at(beacon).recordedAt(round).call().await.map_err(|e| contract_err("recordedAt", e))?;
        Ok((t != 0).then_some(t))
    }

    /// Records `round` with its 64-byte signature (`record`; anyone). Errors:
    /// `AlreadyRecorded`, `RoundNotYetEmitted`, `InvalidSignature`, ….
    pub async fn beacon_record(&self, beacon: Address, round: u64, sig: Vec<u8>) -> Result<B256, ChainError> {
        let b = self.beacon_at(beacon);
        let call = b.record(round, Bytes::from(sig));
        let from = self.require_account("record")?;
        let call = call.from(from);
        let gas_limit = match call.estimate_gas().await {
            Ok(estimate) => crate::client::gas_with_margin(estimate, self.gas_cap),
            Err(e) => return Err(beacon_err(e)),
        };
        let pending = call.gas(gas_limit).send().await.map_err(beacon_err)?;
        let receipt = pending
            .with_timeout(Some(crate::client::RECEIPT_TIMEOUT))
            .get_receipt()
            .await
            .map_err(|e| ChainError::Rpc { method: "record", message: e.to_string() })?;
        if !receipt.status() {
            return Err(ChainError::TxFailed { method: "record", tx: receipt.transaction_hash, gas_used: receipt.gas_used, gas_limit });
        }
        Ok(receipt.transaction_hash)
    }
}

/// A failed `record` call as [`ChainError::Reverted`] with the beacon's custom error name
/// (`AlreadyRecorded`, …) when the revert data carries one, else as the market's errors do.
fn beacon_err(e: alloy::contract::Error) -> ChainError {
    if let Some(data) = e.as_revert_data() {
        if data.len() >= 4 {
            let sel = [data[0], data[1], data[2], data[3]];
            if let Some(name) = IDrandBeacon::IDrandBeaconErrors::name_by_selector(sel) {
                return ChainError::Reverted { method: "record", error: name.to_string() };
            }
        }
    }
    contract_err("record", e)
}
