//! `dpor-node`: the dpor storage provider daemon (see the crate docs and
//! docs/OPERATIONS.md).

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use dpor_node::config::NodeConfig;
use std::path::PathBuf;

/// The dpor storage provider node.
#[derive(Parser)]
#[command(name = "dpor-node", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the node: serve owners and auditors over libp2p and act on chain.
    Run(Box<RunArgs>),
    /// Print the node's libp2p peer id (creating its key if needed).
    PeerId {
        /// The data dir.
        #[arg(long, default_value = ".dpor-node")]
        data_dir: PathBuf,
    },
    /// Testing only: overwrite a fraction of the coded blocks of a deal's runs on disk
    /// with zeros, as a provider that lost or deleted data would (script/demo uses it).
    Erase(EraseArgs),
}

#[derive(Args)]
struct RunArgs {
    /// A TOML config file (docs/OPERATIONS.md); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data dir (store and libp2p key).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// libp2p listen multiaddr.
    #[arg(long)]
    listen: Option<String>,
    /// Chain JSON-RPC URL.
    #[arg(long)]
    rpc_url: Option<String>,
    /// Market contract address (default: the deployment file's).
    #[arg(long)]
    market: Option<String>,
    /// The deployment file Deploy.s.sol wrote (JSON): the market and the chain id.
    #[arg(long, value_name = "FILE")]
    deployment: Option<PathBuf>,
    /// File holding the provider's private key (hex).
    #[arg(long)]
    provider_key_file: Option<PathBuf>,
    /// Refuse uploads/writes past this many bytes in the store.
    #[arg(long)]
    quota_bytes: Option<u64>,
    /// Chain polling interval in milliseconds (at least 50).
    #[arg(long)]
    poll_interval_ms: Option<u64>,
    /// Serve bulk reads (downloads, coded runs) at most this fast, bytes per second.
    #[arg(long, value_name = "BYTES_PER_SEC")]
    serve_rate: Option<u64>,
    /// Build runs of at least this many coded blocks in the background, after the
    /// write is acknowledged (deamortized rebuilds); 0 builds every run inside its write.
    #[arg(long, value_name = "CODED_BLOCKS")]
    defer_from_blocks: Option<u64>,
    /// Prove epochs with one commitment per global epoch over all deals, keeping and
    /// serving the responses and answering challenges (docs/COMMITMENTS.md), instead
    /// of one on-chain proof per deal per epoch.
    #[arg(long)]
    epoch_commitments: bool,
    /// Serve Prometheus metrics (/metrics) and the health report (/health) over HTTP
    /// on this address, e.g. 127.0.0.1:9464 (keep it on loopback; off unless set).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Serve the web dashboard on this address, e.g. 127.0.0.1:8080 (off unless set;
    /// an address that is not loopback needs `dashboard_token` in the config file).
    #[arg(long, value_name = "ADDR")]
    dashboard_listen: Option<std::net::SocketAddr>,
    /// The built dashboard front end (dashboard/dist after `npm run build`).
    #[arg(long, value_name = "DIR")]
    dashboard_dir: Option<PathBuf>,
    /// Testing only (cargo feature `testing`): cheat on audits (none, wrong-block,
    /// stale-level, other-deal), commit wrong coded blocks (commit-wrong), keep only
    /// half of every coded block, for audits and epoch proofs alike (partial-blocks),
    /// lose the owner's writes or the answers to its writes, upload finishes or
    /// co-signatures (drop-writes, lose-write-answers, lose-cosign-answers), or answer
    /// the first `Outcome` of an applied request as not applied (stale-outcome-once).
    #[cfg(feature = "testing")]
    #[arg(long, hide = true)]
    misbehave: Option<dpor_node::handler::Misbehavior>,
    /// Write the peer's full multiaddr to this file once listening.
    #[arg(long)]
    addr_file: Option<PathBuf>,
}

#[derive(Args)]
struct EraseArgs {
    /// The node's data dir.
    #[arg(long)]
    data_dir: PathBuf,
    /// The deal.
    #[arg(long)]
    deal: u64,
    /// Fraction of each run's coded blocks to zero (0..1).
    #[arg(long)]
    fraction: f64,
    /// Only runs with this tag (0 = C, ℓ+1 = level ℓ); default all.
    #[arg(long)]
    tag: Option<u32>,
    /// Only the largest filled level.
    #[arg(long, conflicts_with = "tag")]
    largest_level: bool,
    /// Seed of the choice of blocks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Zero only the second half of each chosen block (a node keeping part of every block).
    #[arg(long)]
    keep_half: bool,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,libp2p=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::PeerId { data_dir } => dpor_proto::net::load_or_create_keypair(&data_dir.join("p2p.key"))
            .map(|k| println!("{}", k.public().to_peer_id()))
            .map_err(anyhow::Error::from),
        Command::Erase(args) => erase(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dpor-node: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(p) => NodeConfig::load(p)?,
        None => NodeConfig::default(),
    };
    if let Some(v) = args.data_dir {
        config.data_dir = v;
    }
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.rpc_url {
        config.rpc_url = v;
    }
    if let Some(v) = args.market {
        config.market = Some(v);
    }
    if let Some(v) = args.deployment {
        config.deployment = Some(v);
    }
    if let Some(v) = args.provider_key_file {
        config.provider_key_file = Some(v);
        config.provider_key = None;
    }
    if let Some(v) = args.quota_bytes {
        config.quota_bytes = Some(v);
    }
    #[cfg(feature = "testing")]
    if let Some(v) = args.misbehave {
        config.misbehave = v;
    }
    if let Some(v) = args.poll_interval_ms {
        config.poll_interval_ms = v;
    }
    if let Some(v) = args.serve_rate {
        config.serve_rate_bytes_per_sec = Some(v);
    }
    if let Some(v) = args.defer_from_blocks {
        config.defer_from_blocks = v;
    }
    if args.epoch_commitments {
        config.epoch_commitments = true;
    }
    if let Some(v) = args.metrics_listen {
        config.metrics_listen = Some(v);
    }
    if let Some(v) = args.dashboard_listen {
        config.dashboard_listen = Some(v);
    }
    if let Some(v) = args.dashboard_dir {
        config.dashboard_dir = Some(v);
    }
    config.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("tokio runtime")?;
    rt.block_on(async move {
        let node = dpor_node::service::start(&config).await?;
        if let Some(f) = &args.addr_file {
            let addr = node.addrs.first().context("the node is not listening on any address")?;
            std::fs::write(f, format!("{addr}\n")).with_context(|| format!("cannot write {}", f.display()))?;
        }
        eprintln!("dpor-node: provider {} listening on {:?}", node.provider, node.addrs);
        if let Some(a) = node.metrics_addr {
            eprintln!("dpor-node: metrics on http://{a}/metrics, health on http://{a}/health");
        }
        if let Some(a) = node.dashboard_addr {
            eprintln!("dpor-node: dashboard on http://{a}/");
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("signal handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stopping");
        node.stop().await;
        Ok(())
    })
}

fn erase(args: EraseArgs) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&args.fraction) {
        anyhow::bail!("--fraction must be within 0..1");
    }
    let report = dpor_node::tamper::erase_with(
        &args.data_dir.join("store"),
        args.deal,
        args.fraction,
        args.tag,
        args.largest_level,
        args.seed,
        args.keep_half,
    )?;
    for (name, erased, size) in report {
        println!("{name}: zeroed {erased} of {size} coded blocks");
    }
    Ok(())
}
