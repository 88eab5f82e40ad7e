//! [`ChainStats`]: what one [`crate::Market`] client (and every clone of it) did on
//! chain: transactions sent per contract method with the gas their receipts report,
//! and JSON-RPC transport errors. Counted where they happen (`Market::send`,
//! `Market::view`, the log queries, the block reads), so a node's metrics
//! (`dpor_node_chain_*`, docs/OPERATIONS.md "Metrics") are true counts, not estimates.
//!
//! No metrics library here: plain atomics and a small map, read by whoever exports them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Transactions of one contract method (e.g. `submitEpochProof`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxStat {
    /// Transactions mined with status 1.
    pub mined: u64,
    /// Transactions that failed: refused before sending (a revert at gas estimation,
    /// a transport error) or mined with status 0.
    pub failed: u64,
    /// Gas used by the mined transactions (status 1 or 0), in gas units, from their
    /// receipts (`gasUsed`).
    pub gas_used: u64,
}

/// Counters of one market client, shared by its clones (see the module docs).
#[derive(Debug, Default)]
pub struct ChainStats {
    tx: Mutex<BTreeMap<&'static str, TxStat>>,
    rpc_errors: AtomicU64,
}

impl ChainStats {
    /// Per contract method, what was sent (methods never sent are absent).
    pub fn transactions(&self) -> BTreeMap<&'static str, TxStat> {
        self.tx
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// JSON-RPC calls that failed at the transport or the endpoint (connection refused,
    /// timeout, malformed answer, an error answer that is not a revert): the count of
    /// [`crate::ChainError::Rpc`] results of this client's calls. Contract reverts are
    /// not counted (the chain answered).
    pub fn rpc_errors(&self) -> u64 {
        self.rpc_errors.load(Ordering::Relaxed)
    }

    /// Counts one transaction of `method`: `gas` is its receipt's `gasUsed` if it was
    /// mined, `ok` its status (false also when it was never sent). Called by
    /// `Market::send` for every transaction; public for exporters' tests.
    pub fn record_tx(&self, method: &'static str, gas: Option<u64>, ok: bool) {
        let mut m = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let s = m.entry(method).or_default();
        if ok {
            s.mined += 1;
        } else {
            s.failed += 1;
        }
        s.gas_used = s.gas_used.saturating_add(gas.unwrap_or(0));
    }

    /// Counts `result` if it is a transport error; returns it unchanged.
    pub(crate) fn note<T>(
        &self,
        result: Result<T, crate::ChainError>,
    ) -> Result<T, crate::ChainError> {
        if matches!(result, Err(crate::ChainError::Rpc { .. })) {
            self.rpc_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChainError;

    #[test]
    fn counts_transactions_gas_and_transport_errors_only() {
        let s = ChainStats::default();
        s.record_tx("submitEpochProof", Some(240_000), true);
        s.record_tx("submitEpochProof", Some(250_000), true);
        s.record_tx("submitEpochProof", None, false);
        s.record_tx("withdraw", Some(40_000), false);
        let t = s.transactions();
        assert_eq!(
            t["submitEpochProof"],
            TxStat {
                mined: 2,
                failed: 1,
                gas_used: 490_000
            }
        );
        assert_eq!(
            t["withdraw"],
            TxStat {
                mined: 0,
                failed: 1,
                gas_used: 40_000
            }
        );
        let _ = s.note::<()>(Err(ChainError::Rpc {
            method: "eth_call",
            message: "refused".into(),
        }));
        let _ = s.note::<()>(Err(ChainError::Reverted {
            method: "postDigest",
            error: "StaleVersion".into(),
        }));
        let _ = s.note::<u8>(Ok(1));
        assert_eq!(s.rpc_errors(), 1);
    }
}
