//! The node's chain agent (stub until the agent lands: registers nothing, proves nothing).

use alloy_primitives::B256;
use dpor_core::digest::Digest;
use std::sync::Arc;
use std::time::Duration;

/// What the agent needs from the node's storage.
pub trait NodeRuns: Send + Sync + 'static {
    /// Coded block `position` of run `run` and its run path.
    fn coded_block(&self, deal: u64, run: dpor_core::RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)>;
    /// A digest was posted.
    fn digest_posted(&self, deal: u64, digest: &Digest) -> anyhow::Result<()>;
    /// A dispute opened.
    fn dispute_opened(&self, deal: u64, dispute: u64, digest: &Digest) -> anyhow::Result<()>;
    /// A dispute closed.
    fn dispute_closed(&self, deal: u64, dispute: u64) -> anyhow::Result<()>;
}

/// Registration terms.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// Peer id bytes.
    pub peer_id: Vec<u8>,
    /// Multiaddrs.
    pub multiaddrs: Vec<String>,
    /// Price.
    pub price_per_block_epoch: u128,
    /// Collateral per block.
    pub collateral_per_block: u128,
    /// Capacity.
    pub capacity_blocks: u64,
    /// Stake.
    pub stake: u128,
}

/// Agent settings.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// Poll interval.
    pub poll_interval: Duration,
    /// Accept deals.
    pub auto_accept: bool,
    /// Withdraw.
    pub withdraw: bool,
    /// Register.
    pub register: Option<Registration>,
}

/// The agent.
pub struct ChainAgent;

impl ChainAgent {
    /// A new agent.
    pub fn new(_market: dpor_chain::Market, _runs: Arc<dyn NodeRuns>, _config: AgentConfig) -> Self {
        ChainAgent
    }

    /// Runs until shutdown.
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let _ = shutdown.changed().await;
    }
}
