//! `dpor`: the dpor verifier CLI (owner and auditor commands; see `dpor --help`).

use clap::{Parser, Subcommand};
use dpor_cli::auditor::{self, AuditorCommand};
use dpor_cli::beacon::{self, BeaconCommand};
use dpor_cli::context::{Ctx, GlobalArgs};
use dpor_cli::disperse::{self, DisperseCommand};
use dpor_cli::output::Output;
use dpor_cli::owner::commands::{self as owner, OwnerCommand};

/// dpor: proofs that a storage provider still holds all of your (changing) data.
#[derive(Parser)]
#[command(name = "dpor", version, about)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Owner(OwnerCommand),
    #[command(flatten)]
    Auditor(AuditorCommand),
    #[command(flatten)]
    Disperse(DisperseCommand),
    /// The randomness beacon: relay rounds, from drand's HTTP API or a local key.
    #[command(subcommand)]
    Beacon(BeaconCommand),
}

fn print(out: &Output, json: bool) {
    if json {
        println!("{}", out.json);
    } else if !out.human.is_empty() {
        println!("{}", out.human);
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dpor: error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let json = cli.global.json;
    let result = rt.block_on(async move {
        let ctx = Ctx::new(&cli.global).await?;
        match cli.command {
            Command::Owner(c) => owner::run(&ctx, c).await,
            Command::Auditor(c) => auditor::run(&ctx, c).await,
            Command::Disperse(c) => disperse::run(&ctx, c).await,
            Command::Beacon(c) => beacon::run(&ctx, c).await,
        }
    });
    match result {
        Ok(out) => {
            print(&out, json);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(failed) = e.downcast_ref::<auditor::AuditFailed>() {
                print(&failed.0, json);
            }
            if let Some(failed) = e.downcast_ref::<dpor_cli::owner::secret_audit::SecretAuditFailed>() {
                print(&failed.0, json);
            }
            if json {
                println!("{}", serde_json::json!({"error": format!("{e:#}")}));
            }
            eprintln!("dpor: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
