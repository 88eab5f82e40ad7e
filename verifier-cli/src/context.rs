//! What every command shares: the global flags, turned into the library's session
//! (`dpor_client::session`: the chain client, the key, how to reach a deal's node), and
//! the output flags.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Global flags (each also read from an environment variable).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Chain JSON-RPC URL.
    #[arg(long, global = true, env = "DPOR_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub rpc_url: String,
    /// The deployment file `contracts/script/Deploy.s.sol` wrote (JSON): the market, the
    /// FileManifest and the chain id come from it (checked against the RPC endpoint).
    #[arg(long, global = true, env = "DPOR_DEPLOYMENT", value_name = "FILE")]
    pub deployment: Option<PathBuf>,
    /// Market contract address (default: the deployment file's, else its address on a
    /// fresh local anvil). With --deployment, it must be the file's.
    #[arg(long, global = true, env = "DPOR_MARKET")]
    pub market: Option<String>,
    /// File holding your Ethereum private key (hex): the owner's or auditor's account.
    #[arg(long, global = true, env = "DPOR_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// The owner's state file (seed, counters, roots).
    #[arg(long, global = true, env = "DPOR_STATE", default_value = "dpor-owner.json")]
    pub state: PathBuf,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Node request timeout, seconds.
    #[arg(long, global = true, default_value_t = 300)]
    pub timeout: u64,
    /// Dial this node multiaddr instead of the one registered on chain.
    #[arg(long, global = true, env = "DPOR_NODE")]
    pub node: Option<String>,
}

pub use dpor_client::session::{resolve_market, Session, SessionConfig, LOCAL_MARKET};

impl GlobalArgs {
    /// The library session's plain values from these flags.
    pub fn session_config(&self) -> SessionConfig {
        SessionConfig {
            rpc_url: self.rpc_url.clone(),
            deployment: self.deployment.clone(),
            market: self.market.clone(),
            key_file: self.key_file.clone(),
            state: self.state.clone(),
            timeout: Duration::from_secs(self.timeout),
            node: self.node.clone(),
        }
    }
}

/// The command context: the library's [`Session`] (market, key, state file, node
/// timeout and override; reached through `Deref`) and how to print.
pub struct Ctx {
    /// The library session.
    pub session: Session,
    /// JSON output.
    pub json: bool,
    /// Show progress bars (text output on a terminal).
    pub progress: bool,
}

impl std::ops::Deref for Ctx {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl Ctx {
    /// Connects to the chain.
    pub async fn new(args: &GlobalArgs) -> anyhow::Result<Self> {
        let session = Session::connect(&args.session_config()).await?;
        use std::io::IsTerminal;
        Ok(Self { session, json: args.json, progress: !args.json && std::io::stderr().is_terminal() })
    }

    /// A context for the single-deal commands on one shard of a dispersed file: owner
    /// state file `state`, JSON output, no bars.
    pub fn for_shard(&self, state: PathBuf) -> Self {
        Self { session: self.session.with_state(state), json: true, progress: false }
    }

    /// A progress bar for `what` (hidden unless text output on a terminal).
    pub fn bar(&self, what: &str) -> Bar {
        if !self.progress {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new(0);
        let style = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        Bar(bar)
    }
}

/// A terminal progress bar ([`Ctx::bar`]) that the library's flows report to
/// ([`dpor_client::progress::Progress`]).
pub struct Bar(pub indicatif::ProgressBar);

impl std::ops::Deref for Bar {
    type Target = indicatif::ProgressBar;
    fn deref(&self) -> &indicatif::ProgressBar {
        &self.0
    }
}

impl dpor_client::progress::Progress for Bar {
    fn set_length(&self, total: u64) {
        self.0.set_length(total);
    }
    fn inc(&self, delta: u64) {
        self.0.inc(delta);
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done);
    }
}
