//! `dpor-beacon`: a local BLS-on-BN254 beacon key for offline runs, and a verifier for evmnet rounds.
//!
//! ```text
//! dpor-beacon keygen --out KEYFILE [--seed HEX]   # prints the 4 constructor words of DrandBeacon
//! dpor-beacon pubkey --key KEYFILE                # the same words again
//! dpor-beacon sign --key KEYFILE --round R        # prints the 64-byte signature as 0x-hex
//! dpor-beacon verify --round R --sig HEX [--key KEYFILE]   # evmnet's key unless --key; prints the randomness
//! dpor-beacon round-at --time T [--genesis G --period P]   # DrandBeacon.roundAt (evmnet's schedule by default)
//! dpor-beacon local-fixture --out FILE            # contracts/test/fixtures/beacon_local.json
//! ```

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use dpor_beacon::{
    decode_hex, evmnet_public_key, randomness, verify, KeyFile, LocalBeacon, LocalFixture, Schedule,
};

#[derive(Parser)]
#[command(
    name = "dpor-beacon",
    version,
    about = "Local drand-compatible beacon key (BLS on BN254) and evmnet round checks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a key file (never overwrites) and print the public key as DrandBeacon's 4 constructor words.
    Keygen {
        /// Where to write the key file (JSON, mode 0600).
        #[arg(long)]
        out: PathBuf,
        /// Derive the key from this hex seed instead of the OS RNG (reproducible demos; >= 16 bytes).
        #[arg(long)]
        seed: Option<String>,
    },
    /// Print the public key words of a key file.
    Pubkey {
        /// The key file.
        #[arg(long)]
        key: PathBuf,
    },
    /// Sign a round; prints the signature (0x-hex, 64 bytes), the `sig` argument of DrandBeacon.record.
    Sign {
        /// The key file.
        #[arg(long)]
        key: PathBuf,
        /// The round (>= 1).
        #[arg(long)]
        round: u64,
    },
    /// Verify a round signature (against evmnet's key, or a key file's); prints the round's randomness.
    Verify {
        /// The round.
        #[arg(long)]
        round: u64,
        /// The signature, hex (64 bytes).
        #[arg(long)]
        sig: String,
        /// Verify under this key file's public key instead of evmnet's.
        #[arg(long)]
        key: Option<PathBuf>,
    },
    /// DrandBeacon.roundAt: the first round emitted at or after a UNIX time.
    RoundAt {
        /// UNIX seconds.
        #[arg(long)]
        time: u64,
        /// Genesis time (default: evmnet's).
        #[arg(long, default_value_t = Schedule::EVMNET.genesis_time)]
        genesis: u64,
        /// Period in seconds (default: evmnet's).
        #[arg(long, default_value_t = Schedule::EVMNET.period)]
        period: u64,
    },
    /// Write the Foundry fixture of rounds signed by the fixed-seed local key.
    LocalFixture {
        /// Output path (contracts/test/fixtures/beacon_local.json).
        #[arg(long)]
        out: PathBuf,
    },
}

fn print_words(beacon: &LocalBeacon) {
    for w in beacon.public_key_words() {
        println!("{w:#066x}");
    }
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Keygen { out, seed } => {
            let beacon = match seed {
                Some(s) => {
                    let seed = decode_hex("seed", &s)?;
                    if seed.len() < 16 {
                        bail!(
                            "--seed must be at least 16 bytes of hex (128 bits), got {}",
                            seed.len()
                        );
                    }
                    LocalBeacon::from_seed(&seed)?
                }
                None => LocalBeacon::generate()?,
            };
            KeyFile::new(&beacon).write_new(&out)?;
            print_words(&beacon);
        }
        Cmd::Pubkey { key } => print_words(&KeyFile::load(&key)?),
        Cmd::Sign { key, round } => {
            if round == 0 {
                bail!("round must be >= 1 (drand round 0 is the genesis and has no signature)");
            }
            let beacon = KeyFile::load(&key)?;
            println!("0x{}", hex::encode(beacon.sign(round)));
        }
        Cmd::Verify { round, sig, key } => {
            let pk = match key {
                Some(k) => KeyFile::load(&k)?.public_key(),
                None => evmnet_public_key(),
            };
            let sig = decode_hex("signature", &sig)?;
            verify(&pk, round, &sig).with_context(|| format!("round {round}"))?;
            println!("0x{}", hex::encode(randomness(&sig)));
        }
        Cmd::RoundAt {
            time,
            genesis,
            period,
        } => println!("{}", Schedule::new(genesis, period)?.round_at(time)),
        Cmd::LocalFixture { out } => {
            let fx = LocalFixture::generate()?;
            let json = serde_json::to_string_pretty(&fx)?;
            std::fs::write(&out, format!("{json}\n"))
                .with_context(|| format!("writing {}", out.display()))?;
            eprintln!("wrote {} ({} rounds)", out.display(), fx.rounds.len());
        }
    }
    Ok(())
}
