//! # dpor-beacon: drand `evmnet` rounds, verified the way `DrandBeacon.sol` verifies them
//!
//! Production epoch seeds come from drand's `evmnet` beacon: a threshold BLS signature on BN254 every 3 s, scheme
//! `bls-bn254-unchained-on-g1` (signatures in G1, public key in G2). Round `r` signs
//! `m = keccak256(r as 8 big-endian bytes)` hashed to G1 with RFC 9380 (`expand_message_xmd` over keccak256,
//! SVDW map, DST [`DST`]); its randomness is `sha256(signature)`. The contract `contracts/src/beacon/DrandBeacon.sol`
//! checks the same equation with the BN254 precompiles; this crate is the off-chain side, byte for byte:
//!
//! - [`verify`], [`randomness`], [`round_message`], [`round_point`]: verification as the contract does it;
//! - [`h2c`]: the hash to G1 (RFC 9380), usable on its own;
//! - [`PublicKey`], [`Signature`], [`SecretKey`]: points and keys in the contract's encodings;
//! - [`Schedule`] (with [`Schedule::EVMNET`]): the round ↔ time arithmetic of `roundAt`;
//! - [`LocalBeacon`]: a locally held key that signs rounds, for the offline demo and tests (never for production:
//!   one key holder can predict every seed);
//! - [`KeyFile`]: the JSON key file of the `dpor-beacon` binary.
//!
//! Sources and the derivation of every constant: `docs/BEACON.md`.

pub mod bls;
pub mod h2c;

use std::path::Path;

use alloy_primitives::U256;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use bls::{round_message, round_point, verify, PublicKey, SecretKey, Signature, KEYGEN_DST};

/// Domain separation tag of the hash to G1 (drand `crypto/schemes.go`, `SetDomainG1`).
pub const DST: &[u8] = b"BLS_SIG_BN254G1_XMD:KECCAK-256_SVDW_RO_NUL_";
/// drand's scheme identifier.
pub const SCHEME_ID: &str = "bls-bn254-unchained-on-g1";

/// drand `evmnet`'s group public key, as drand's `/v2/beacons/evmnet/info` serves it (`public_key`), which is
/// also the four constructor words of `DrandBeacon` in order.
pub const EVMNET_PUBLIC_KEY_HEX: &str = concat!(
    "07e1d1d335df83fa98462005690372c643340060d205306a9aa8106b6bd0b382",
    "0557ec32c2ad488e4d4f6008f89a346f18492092ccc0d594610de2732c8b808f",
    "0095685ae3a85ba243747b1b2f426049010f6b73a0cf1d389351d5aaaa1047f6",
    "297d3a4f9749b33eb2d904c9d9ebf17224150ddd7abd7567a9bec6c74480ee0b",
);
/// evmnet's genesis time (UNIX seconds): round 1 is emitted at this time.
pub const EVMNET_GENESIS_TIME: u64 = 1_727_521_075;
/// evmnet's period in seconds.
pub const EVMNET_PERIOD: u64 = 3;
/// evmnet's chain hash (hex): `sha256(period_u32 ‖ genesis_i64 ‖ public_key ‖ genesis_seed ‖ "evmnet")`
/// (drand `common/chain/info.go`, `Info.Hash`); the crate's tests recompute it from the constants above.
pub const EVMNET_CHAIN_HASH_HEX: &str =
    "04f1e9062b8a81f848fded9c12306733282b2727ecced50032187751166ec8c3";
/// evmnet's genesis seed (`genesis_seed` / `groupHash` in drand's info), an input of the chain hash.
pub const EVMNET_GENESIS_SEED_HEX: &str =
    "cd7ad2f0e0cce5d8c288f2dd016ffe7bc8dc88dbb229b3da2b6ad736490dfed6";
/// evmnet's beacon id.
pub const EVMNET_BEACON_ID: &str = "evmnet";

/// Errors of parsing, signing and verifying.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BeaconError {
    /// An encoding had the wrong length.
    #[error("{what}: expected {expected} bytes, got {got}")]
    Length {
        /// Which value.
        what: &'static str,
        /// The required length.
        expected: usize,
        /// The given length.
        got: usize,
    },
    /// A coordinate or scalar was not reduced (`>= p`, or `>= r` for a secret key).
    #[error("{0}: not a canonical encoding (a word is >= the field modulus)")]
    NonCanonical(&'static str),
    /// The point at infinity, which no valid key or signature is.
    #[error("{0}: the point at infinity")]
    Identity(&'static str),
    /// Coordinates that do not satisfy the curve equation.
    #[error("{0}: not on the curve")]
    NotOnCurve(&'static str),
    /// A point outside the prime-order subgroup.
    #[error("{0}: not in the prime-order subgroup")]
    NotInSubgroup(&'static str),
    /// drand has no signed round 0.
    #[error("round 0 has no signature (drand rounds start at 1)")]
    RoundZero,
    /// The pairing equation failed: not a signature of this round under this key.
    #[error("invalid signature for round {round}")]
    BadSignature {
        /// The round that was checked.
        round: u64,
    },
    /// A secret key derived to 0 (probability 2^-254) or was given as 0.
    #[error("secret key is zero")]
    ZeroSecretKey,
    /// `expand_message_xmd` parameters out of range (RFC 9380 §5.3.1).
    #[error("expand_message_xmd: DST longer than 255 bytes or output length out of range")]
    ExpandMessage,
    /// A hex string did not decode.
    #[error("{what}: bad hex: {reason}")]
    Hex {
        /// Which value.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// A schedule with period 0, or a round whose time does not fit in u64.
    #[error("schedule: {0}")]
    Schedule(&'static str),
}

/// drand's randomness of a round: `sha256(signature bytes)` (drand `crypto/schemes.go`,
/// `RandomnessFromSignature`). `DrandBeacon.randomness(round)` returns this value for recorded rounds.
pub fn randomness(sig: &[u8]) -> [u8; 32] {
    Sha256::digest(sig).into()
}

/// Decodes hex with an optional `0x` prefix.
pub fn decode_hex(what: &'static str, s: &str) -> Result<Vec<u8>, BeaconError> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    hex::decode(s).map_err(|e| BeaconError::Hex {
        what,
        reason: e.to_string(),
    })
}

/// evmnet's group public key.
pub fn evmnet_public_key() -> PublicKey {
    // A compile-time constant that the tests parse; the fallback is unreachable.
    match decode_hex("evmnet public key", EVMNET_PUBLIC_KEY_HEX)
        .and_then(|b| PublicKey::from_bytes(&b))
    {
        Ok(pk) => pk,
        Err(e) => unreachable!("the evmnet public key constant is valid: {e}"),
    }
}

/// A beacon's round schedule: round `r >= 1` is emitted at `genesis_time + (r - 1) * period` (drand
/// `common/time.go`, `TimeOfRound`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// UNIX seconds of round 1.
    pub genesis_time: u64,
    /// Seconds between rounds, `>= 1`.
    pub period: u64,
}

impl Schedule {
    /// drand evmnet's schedule.
    pub const EVMNET: Schedule = Schedule {
        genesis_time: EVMNET_GENESIS_TIME,
        period: EVMNET_PERIOD,
    };

    /// A schedule; errors if `period` is 0.
    pub fn new(genesis_time: u64, period: u64) -> Result<Self, BeaconError> {
        if period == 0 {
            return Err(BeaconError::Schedule("period must be at least 1 s"));
        }
        Ok(Self {
            genesis_time,
            period,
        })
    }

    /// Emission time of `round` (UNIX seconds). Round 0 maps to the genesis time, as in drand. Errors on overflow.
    pub fn round_time(&self, round: u64) -> Result<u64, BeaconError> {
        round
            .saturating_sub(1)
            .checked_mul(self.period)
            .and_then(|d| d.checked_add(self.genesis_time))
            .ok_or(BeaconError::Schedule("round time overflows u64"))
    }

    /// `DrandBeacon.roundAt`: the first round whose emission time is `>= timestamp` (1 for any time up to the
    /// genesis). The round may not be emitted yet: it is the round whose randomness nobody knows at `timestamp`.
    /// Saturates at `u64::MAX` where the contract reverts `RoundOverflow` (only with period 1 and
    /// `timestamp - genesis = u64::MAX`).
    pub fn round_at(&self, timestamp: u64) -> u64 {
        if timestamp <= self.genesis_time {
            return 1;
        }
        // ceil((t - g) / period) + 1
        (timestamp - self.genesis_time)
            .div_ceil(self.period)
            .saturating_add(1)
    }

    /// The latest round emitted at or before `timestamp` (0 before the genesis): the newest round a relay can
    /// fetch and record at that time.
    pub fn latest_round_at(&self, timestamp: u64) -> u64 {
        if timestamp < self.genesis_time {
            return 0;
        }
        (timestamp - self.genesis_time) / self.period + 1
    }
}

/// A beacon whose key this process holds: the stand-in for drand in the offline demo and in tests. Signs exactly
/// what evmnet signs, so `DrandBeacon` deployed with [`LocalBeacon::public_key_words`] accepts its rounds through
/// the same verification path.
#[derive(Clone, Debug)]
pub struct LocalBeacon {
    sk: SecretKey,
    pk: PublicKey,
}

impl LocalBeacon {
    /// A beacon keyed by [`SecretKey::from_seed`]`(seed)`.
    pub fn from_seed(seed: &[u8]) -> Result<Self, BeaconError> {
        Ok(Self::from_secret_key(SecretKey::from_seed(seed)?))
    }

    /// A beacon with the given key.
    pub fn from_secret_key(sk: SecretKey) -> Self {
        let pk = sk.public_key();
        Self { sk, pk }
    }

    /// A beacon with a fresh key from the OS RNG.
    pub fn generate() -> Result<Self, BeaconError> {
        use rand::RngCore;
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Self::from_seed(&seed)
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        self.pk
    }

    /// The four words `DrandBeacon`'s constructor takes.
    pub fn public_key_words(&self) -> [U256; 4] {
        self.pk.to_words()
    }

    /// The secret key (for writing a [`KeyFile`]).
    pub fn secret_key(&self) -> &SecretKey {
        &self.sk
    }

    /// The signature of `round` in the contract encoding (64 bytes, `x ‖ y`): the `sig` argument of
    /// `DrandBeacon.record(round, sig)`.
    pub fn sign(&self, round: u64) -> Vec<u8> {
        match self.sk.sign_round(round) {
            Ok(s) => s.to_bytes().to_vec(),
            // hash_to_g1 fails only for a DST over 255 bytes; DST is a 43-byte constant.
            Err(e) => unreachable!("signing with the constant DST cannot fail: {e}"),
        }
    }
}

/// The JSON key file of `dpor-beacon keygen` / `sign`: `{"scheme", "secret_key", "public_key"}` with the secret
/// key as 0x-hex (32 bytes, big-endian) and the public key as the four constructor words in 0x-hex.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyFile {
    /// Always [`SCHEME_ID`].
    pub scheme: String,
    /// 0x-prefixed 32-byte big-endian secret scalar.
    pub secret_key: String,
    /// The public key words, 0x-prefixed, checked against `secret_key` on load.
    pub public_key: [String; 4],
}

/// Errors of reading or writing a key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file could not be read or written.
    #[error("key file {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not the expected JSON.
    #[error("key file {path}: {source}")]
    Json {
        /// The path.
        path: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The key inside is invalid, or the public key does not match the secret key.
    #[error("key file {path}: {reason}")]
    Invalid {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl KeyFile {
    /// The key file of a beacon.
    pub fn new(beacon: &LocalBeacon) -> Self {
        Self {
            scheme: SCHEME_ID.to_string(),
            secret_key: format!("0x{}", hex::encode(beacon.secret_key().to_bytes())),
            public_key: beacon.public_key_words().map(|w| format!("{w:#066x}")),
        }
    }

    /// Reads and checks a key file: the scheme, the secret key, and that the public key matches it.
    pub fn load(path: &Path) -> Result<LocalBeacon, KeyFileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Io {
            path: p.clone(),
            source,
        })?;
        let kf: KeyFile = serde_json::from_str(&text).map_err(|source| KeyFileError::Json {
            path: p.clone(),
            source,
        })?;
        let invalid = |reason: String| KeyFileError::Invalid {
            path: p.clone(),
            reason,
        };
        if kf.scheme != SCHEME_ID {
            return Err(invalid(format!(
                "scheme {:?}, expected {SCHEME_ID:?}",
                kf.scheme
            )));
        }
        let sk = decode_hex("secret_key", &kf.secret_key)
            .and_then(|b| SecretKey::from_bytes(&b))
            .map_err(|e| invalid(e.to_string()))?;
        let beacon = LocalBeacon::from_secret_key(sk);
        if KeyFile::new(&beacon).public_key.map(|s| s.to_lowercase())
            != kf.public_key.map(|s| s.to_lowercase())
        {
            return Err(invalid("public_key does not match secret_key".to_string()));
        }
        Ok(beacon)
    }

    /// Writes the key file (mode 0600 on Unix), refusing to overwrite an existing file.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyFileError> {
        let p = path.display().to_string();
        let json = serde_json::to_string_pretty(self).map_err(|source| KeyFileError::Json {
            path: p.clone(),
            source,
        })?;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        use std::io::Write;
        let mut f = opts.open(path).map_err(|source| KeyFileError::Io {
            path: p.clone(),
            source,
        })?;
        f.write_all(format!("{json}\n").as_bytes())
            .map_err(|source| KeyFileError::Io { path: p, source })
    }
}

/// The fixture `contracts/test/fixtures/beacon_local.json` that `DrandBeaconLocalTest` checks through
/// `DrandBeacon`: rounds signed by a [`LocalBeacon`] from a fixed seed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalFixture {
    /// What the file is and how to regenerate it.
    pub description: String,
    /// The key seed (0x-hex).
    pub seed: String,
    /// Constructor words of the public key (0x-hex).
    pub public_key: [String; 4],
    /// Constructor genesis time.
    pub genesis_time: u64,
    /// Constructor period.
    pub period: u64,
    /// Signed rounds.
    pub rounds: Vec<u64>,
    /// Signatures of `rounds`, 0x-hex of the 64-byte encoding.
    pub signatures: Vec<String>,
    /// `sha256(signature)` of each, 0x-hex.
    pub randomness: Vec<String>,
}

/// Seed of the committed local fixture.
pub const LOCAL_FIXTURE_SEED: &[u8] = b"dpor-beacon local fixture seed v1";
/// Genesis time of the committed local fixture (2023-11-14T22:13:20Z).
pub const LOCAL_FIXTURE_GENESIS: u64 = 1_700_000_000;
/// Fixed rounds of the committed local fixture: small, large, and the largest u64. [`LocalFixture::rounds`]
/// appends [`LOCAL_FIXTURE_RANDOM_ROUNDS`] pseudo-random rounds, so the hash to G1 is compared between Rust and
/// the EVM on many inputs (all three SVDW branches occur).
pub const LOCAL_FIXTURE_ROUNDS: [u64; 6] = [1, 2, 3, 1000, 10_000_000, u64::MAX];
/// Number of pseudo-random rounds in the local fixture: round i is the first 8 bytes (big-endian) of
/// `keccak256("dpor-beacon fixture round" ‖ i as u32 big-endian)`, plus 1 (saturating).
pub const LOCAL_FIXTURE_RANDOM_ROUNDS: u32 = 26;

impl LocalFixture {
    /// The fixture's rounds: [`LOCAL_FIXTURE_ROUNDS`], then the [`LOCAL_FIXTURE_RANDOM_ROUNDS`] pseudo-random ones.
    pub fn rounds() -> Vec<u64> {
        let mut rounds = LOCAL_FIXTURE_ROUNDS.to_vec();
        for i in 0..LOCAL_FIXTURE_RANDOM_ROUNDS {
            let h = alloy_primitives::keccak256(
                [&b"dpor-beacon fixture round"[..], &i.to_be_bytes()].concat(),
            );
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[..8]);
            rounds.push(u64::from_be_bytes(b).saturating_add(1));
        }
        rounds
    }

    /// The fixture for [`LOCAL_FIXTURE_SEED`], [`LOCAL_FIXTURE_GENESIS`], period 3 and [`LocalFixture::rounds`].
    pub fn generate() -> Result<Self, BeaconError> {
        let beacon = LocalBeacon::from_seed(LOCAL_FIXTURE_SEED)?;
        let rounds = Self::rounds();
        let sigs: Vec<Vec<u8>> = rounds.iter().map(|&r| beacon.sign(r)).collect();
        Ok(Self {
            description: "Rounds signed by dpor-beacon's LocalBeacon (seed below, as UTF-8 bytes in hex). \
                          Regenerate with `cargo run -p dpor-beacon -- local-fixture --out \
                          contracts/test/fixtures/beacon_local.json`; checked by beacon/tests/evmnet.rs and \
                          contracts/test/beacon/DrandBeacon.t.sol."
                .to_string(),
            seed: format!("0x{}", hex::encode(LOCAL_FIXTURE_SEED)),
            public_key: beacon.public_key_words().map(|w| format!("{w:#066x}")),
            genesis_time: LOCAL_FIXTURE_GENESIS,
            period: 3,
            rounds,
            randomness: sigs.iter().map(|s| format!("0x{}", hex::encode(randomness(s)))).collect(),
            signatures: sigs.iter().map(|s| format!("0x{}", hex::encode(s))).collect(),
        })
    }
}
