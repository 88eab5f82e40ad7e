//! One running node: the store, the libp2p server with the [`NodeHandler`], and the
//! chain agent, wired together and stopped together.

use crate::chain_tasks::{AgentConfig, ChainAgent, EpochProofs, NodeRuns, Registration};
use crate::config::NodeConfig;
use crate::handler::{ChainDeal, DealLookup, NodeHandler};
use crate::signing::ProviderSigner;
use crate::store::{Store, StoreConfig};
use alloy_primitives::{Address, B256};
use anyhow::Context;
use async_trait::async_trait;
use dpor_chain::Market;
use dpor_core::digest::Digest;
use dpor_core::RunId;
use dpor_proto::net::{self, NetConfig};
use libp2p::Multiaddr;
use std::sync::Arc;
use std::time::Duration;

/// The market contract as the handler's deal table.
struct ChainDeals(Market);

#[async_trait]
impl DealLookup for ChainDeals {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        let d = self.0.get_deal(id).await?;
        if d.state == dpor_chain::DealState::None {
            return Ok(None);
        }
        Ok(Some(ChainDeal {
            owner: d.owner,
            provider: d.provider,
            num_blocks: d.num_blocks,
            block_bytes: d.block_size,
            active: d.state == dpor_chain::DealState::Active,
        }))
    }

    async fn prepare_resize(&self, id: u64, collateral: u128) -> anyhow::Result<()> {
        let d = self.0.get_deal(id).await?;
        let more = collateral.saturating_sub(d.collateral);
        if more == 0 {
            return Ok(());
        }
        let me = self.0.account().context("no provider key")?;
        let balance = self.0.balance_of(me).await?;
        anyhow::ensure!(
            balance >= alloy_primitives::U256::from(more),
            "the provider account holds {balance} tokens, the resize locks {more} more (docs/OPERATIONS.md, \"Funding the accounts\")"
        );
        self.0.ensure_allowance(alloy_primitives::U256::from(more)).await?;
        Ok(())
    }
}

/// The store as the chain agent sees it (with the testing misbehaviour, if any, that
/// changes what is on "disk": [`crate::handler::Misbehavior::PartialBlocks`]).
struct StoreRuns(Arc<Store>, crate::handler::Misbehavior);

impl NodeRuns for StoreRuns {
    fn coded_block(&self, deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
        let mut got = self.0.coded(deal, run, &[position])?;
        let (mut block, path) = got.pop().context("the store returned no block")?;
        if self.1 == crate::handler::Misbehavior::PartialBlocks {
            crate::handler::keep_half(&mut block);
        }
        Ok((block, path))
    }

    fn digest_posted(&self, deal: u64, digest: &Digest) -> anyhow::Result<()> {
        match self.0.set_posted(deal, digest) {
            Ok(()) | Err(crate::store::StoreError::UnknownDeal(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn dispute_opened(&self, deal: u64, dispute: u64, digest: &Digest) -> anyhow::Result<()> {
        Ok(self.0.pin_dispute(deal, dispute, digest)?)
    }

    fn dispute_closed(&self, deal: u64, dispute: u64) -> anyhow::Result<()> {
        Ok(self.0.unpin_dispute(deal, dispute)?)
    }

    fn epoch_pinned(&self, deal: u64, epoch: u64, digest: &Digest) -> anyhow::Result<()> {
        match self.0.pin_epoch(deal, epoch, digest) {
            Ok(()) | Err(crate::store::StoreError::UnknownDeal(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn cosigned_to_post(&self, deal: u64) -> anyhow::Result<Option<crate::chain_tasks::SignedDigest>> {
        match self.0.cosigned_to_post(deal) {
            Ok(r) => Ok(r.map(|c| (c.digest, c.owner_sig, c.provider_sig))),
            Err(crate::store::StoreError::UnknownDeal(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn epochs_released(&self, deal: u64, epoch: u64) -> anyhow::Result<()> {
        match self.0.unpin_epochs_before(deal, epoch) {
            Ok(()) | Err(crate::store::StoreError::UnknownDeal(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn put_epoch_responses(&self, items: &[(u64, u64, Vec<u8>)]) -> anyhow::Result<()> {
        Ok(self.0.put_epoch_responses(items)?)
    }

    fn epoch_response(&self, deal: u64, epoch: u64) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.0.epoch_response(deal, epoch)?)
    }

    fn prune_epoch_responses(&self, deal: u64, before: u64) -> anyhow::Result<()> {
        self.0.prune_epoch_responses(deal, before)?;
        Ok(())
    }
}

/// A running node.
pub struct RunningNode {
    /// The libp2p peer id.
    pub peer_id: libp2p::PeerId,
    /// The addresses it listens on (with `/p2p/<peer id>`).
    pub addrs: Vec<Multiaddr>,
    /// The provider account.
    pub provider: Address,
    /// Where `/metrics` and `/health` are served (the bound address), if
    /// `metrics_listen` is set.
    pub metrics_addr: Option<std::net::SocketAddr>,
    metrics_server: Option<dpor_metrics::MetricsServer>,
    /// Where the web dashboard is served (the bound address), if `dashboard_listen` is set.
    pub dashboard_addr: Option<std::net::SocketAddr>,
    dashboard: Option<(crate::dashboard::DashboardServer, tokio::task::JoinHandle<()>)>,
    server: net::ServerHandle,
    /// Builds deferred runs in the background; stopped when the node stops.
    _builder: crate::store::Builder,
    shutdown: tokio::sync::watch::Sender<bool>,
    agent: tokio::task::JoinHandle<()>,
}

impl RunningNode {
    /// Stops the agent and the server.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.agent.await;
        if let Some((d, collector)) = self.dashboard {
            d.shutdown().await;
            let _ = collector.await;
        }
        if let Some(m) = self.metrics_server {
            m.shutdown().await;
        }
        self.server.shutdown().await;
    }
}

/// Starts a node from its configuration: opens (and recovers) the store, listens,
/// connects to the chain and starts the agent (which registers the provider on chain
/// if needed, announcing the bound addresses).
///
/// Errors: a configuration [`NodeConfig::validate`] refuses, and any failure to open
/// the store, reach the chain or listen.
pub async fn start(config: &NodeConfig) -> anyhow::Result<RunningNode> {
    config.validate()?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create the data dir {}", config.data_dir.display()))?;
    let store = Arc::new(
        Store::open(&config.data_dir.join("store"), StoreConfig {
            quota_bytes: config.quota_bytes,
            defer_from_blocks: (config.defer_from_blocks > 0).then_some(config.defer_from_blocks),
            run_cache_bytes: Some(config.run_cache_bytes),
            upload_stream_bytes: Some(config.upload_stream_bytes),
            ..Default::default()
        })
            .context("cannot open the store")?,
    );
    // Metrics (docs/OPERATIONS.md, "Metrics and health"): /health accepts a chain poll
    // at most ten poll intervals (and at least a minute) old.
    let metrics = config.metrics_listen.map(|_| {
        let max_age = Duration::from_millis(config.poll_interval_ms.saturating_mul(10)).max(Duration::from_secs(60));
        Arc::new(crate::metrics::NodeMetrics::new(max_age))
    });
    if let Some(m) = &metrics {
        let m = m.clone();
        store.observe_rebuilds(Arc::new(move |c, took| m.rebuilt(c, took)));
    }
    let builder = crate::store::Builder::start(&store);
    let keypair = net::load_or_create_keypair(&config.data_dir.join("p2p.key")).context("libp2p key")?;
    let key = dpor_chain::parse_key(&config.provider_key_hex()?).context("provider key")?;
    let (market_addr, deployment) = config.resolve_market()?;
    let market = Market::connect(&config.rpc_url, market_addr, Some(key.clone()))
        .await
        .with_context(|| format!("cannot reach the market at {market_addr} on {}", config.rpc_url))?;
    if let Some(d) = &deployment {
        d.check(&market).await.context("the deployment file does not match the chain")?;
    }
    let signer = Arc::new(ProviderSigner::new(key, market.chain_id(), market_addr));
    let provider = signer.address();

    let listen: Multiaddr = config.listen.parse().with_context(|| format!("bad listen address {:?}", config.listen))?;
    let chain_client = market.clone();
    let handler = NodeHandler::new(store.clone(), Arc::new(ChainDeals(market.clone())), signer)
        .with_serve_rate(config.serve_rate_bytes_per_sec)
        .with_resize_policy(crate::handler::ResizePolicy {
            price_per_block_epoch: config.price_per_block_epoch,
            collateral_per_block: config.collateral_per_block,
            max_blocks: config.capacity_blocks,
        });
    #[cfg(feature = "testing")]
    let handler = {
        if config.misbehave != crate::handler::Misbehavior::None {
            tracing::warn!(misbehave = ?config.misbehave, "TESTING ONLY: this node cheats on audits");
        }
        handler.with_misbehavior(config.misbehave)
    };
    let handler = match &metrics {
        Some(m) => handler.with_metrics(m.clone()),
        None => handler,
    };
    let handler = Arc::new(handler);
    let net_config = NetConfig { request_timeout: Duration::from_secs(config.request_timeout_secs), ..NetConfig::default() };
    let server = net::serve(keypair, listen, handler, net_config).await.context("cannot start the libp2p server")?;
    let peer_id = server.peer_id();
    let addrs: Vec<Multiaddr> = server
        .listen_addrs()
        .into_iter()
        .map(|a| a.with(libp2p::multiaddr::Protocol::P2p(peer_id)))
        .collect();
    let announce = if config.announce.is_empty() { addrs.iter().map(|a| a.to_string()).collect() } else { config.announce.clone() };
    tracing::info!(%peer_id, ?announce, %provider, "node listening");

    let agent_config = AgentConfig {
        poll_interval: Duration::from_millis(config.poll_interval_ms),
        auto_accept: config.auto_accept,
        withdraw: config.auto_withdraw,
        register: Some(Registration {
            peer_id: peer_id.to_bytes(),
            multiaddrs: announce,
            price_per_block_epoch: config.price_per_block_epoch,
            collateral_per_block: config.collateral_per_block,
            capacity_blocks: config.capacity_blocks,
            stake: config.stake,
        }),
        epoch_proofs: if config.epoch_commitments { EpochProofs::Commitment } else { EpochProofs::PerDeal },
        ..AgentConfig::default()
    };
    let (shutdown, rx) = tokio::sync::watch::channel(false);
    // Cheat modes exist only in a `testing` build; a normal node is always honest.
    #[cfg(feature = "testing")]
    let misbehave = config.misbehave;
    #[cfg(not(feature = "testing"))]
    let misbehave = crate::handler::Misbehavior::None;
    let metrics_server = match (&metrics, config.metrics_listen) {
        (Some(m), Some(at)) => {
            let exporter = crate::metrics::NodeExporter {
                metrics: m.clone(),
                store: store.clone(),
                store_dir: config.data_dir.join("store"),
                market: chain_client,
                peers: server.connected_peers_counter(),
            };
            Some(dpor_metrics::serve(at, Arc::new(exporter)).await.context("metrics_listen")?)
        }
        _ => None,
    };
    let metrics_addr = metrics_server.as_ref().map(|s| s.local_addr());
    let dashboard = match config.dashboard_listen {
        Some(at) => Some(start_dashboard(config, at, market.clone(), provider, store.clone(), rx.clone()).await?),
        None => None,
    };
    let dashboard_addr = dashboard.as_ref().map(|(d, _)| d.local_addr());
    let agent = ChainAgent::new(market, Arc::new(StoreRuns(store, misbehave)), agent_config);
    let agent = match metrics {
        Some(m) => agent.with_metrics(m),
        None => agent,
    };
    let agent = tokio::spawn(agent.run(rx));
    Ok(RunningNode {
        peer_id,
        addrs,
        provider,
        metrics_addr,
        metrics_server,
        dashboard_addr,
        dashboard,
        server,
        _builder: builder,
        shutdown,
        agent,
    })
}

/// The web dashboard: its front end loaded, its collector started (refreshing every
/// poll interval, at least every 250 ms, until `shutdown`), its server listening on `at`.
async fn start_dashboard(
    config: &NodeConfig,
    at: std::net::SocketAddr,
    market: Market,
    provider: Address,
    store: Arc<Store>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(crate::dashboard::DashboardServer, tokio::task::JoinHandle<()>)> {
    crate::dashboard::auth::check_listen(at, config.dashboard_token.as_deref())?;
    let assets = config.dashboard_dir.as_deref().map(crate::dashboard::assets::Assets::load).transpose()?.map(Arc::new);
    let snapshot = crate::dashboard::SharedSnapshot::default();
    let collector = crate::dashboard::Collector::new(market, provider, store, snapshot.clone(), 0);
    let interval = Duration::from_millis(config.poll_interval_ms.max(250));
    let token = config.dashboard_token.as_deref().map(Arc::from);
    let app = crate::dashboard::server::router(snapshot, token, assets);
    let server = crate::dashboard::server::serve(at, app).await.context("dashboard_listen")?;
    tracing::info!(addr = %server.local_addr(), "web dashboard served over HTTP");
    Ok((server, tokio::spawn(collector.run(interval, shutdown))))
}
