//! # dpor-core
//!
//! The pure core of a dynamic proof-of-retrievability system after Shi, Stefanov and
//! Papamanthou, *Practical Dynamic Proofs of Retrievability* (CCS 2013), audited on
//! an EVM chain. Everything the storage node, the owner and the auditors must agree
//! on is defined here once: no I/O, no async, no networking, no chain client.
//!
//! - [`field`]: Goldilocks via ark-ff.
//! - [`block`]: blocks, records (index + packed bytes), file layout.
//! - [`code`]: the incrementally constructible code: `mix`, `HRebuild`, `HAdd`, `CRebuild` (§4.4–4.5).
//! - [`decode`]: decoding of a run from any half of it, correcting wrong blocks up to the bound.
//! - [`state`]: the server state U, C, H as a value that writes update (§4.1).
//! - [`extract`]: the newest file from C and H alone.
//! - [`checksum`]: the owner's keys, σ(B) = M·B, σ̃ = AEAD(σ) (§5.2–5.4).
//! - [`merkle`]: keccak256 trees: block roots over chunks, run trees, the U tree.
//! - [`salvage`]: proving block by block what a damaged provider still serves of a run.
//! - [`digest`]: the dual-signed EIP-712 digest (DESIGN §7).
//! - [`commitment`]: epoch commitments: one root per provider per epoch over its deals' responses.
//! - [`audit`]: positions from a seed, public audit and spot-check verification.
//! - [`secret_audit`]: the owner's compact secret audit (§5.5): one aggregated block per run.
//!
//! Independent blocks and columns (chunk trees, C-rebuild, decoding, checksums) are
//! processed on rayon's thread pool; results do not depend on the number of threads.
//!
//! Byte encodings shared with the contracts are specified in `docs/ENCODING.md`.

pub mod audit;
pub mod block;
pub mod c_stream;
pub mod checksum;
pub mod code;
pub mod commitment;
pub mod decode;
pub mod digest;
pub mod extract;
pub mod field;
pub mod merkle;
pub mod salvage;
pub mod secret_audit;
pub mod state;

pub use audit::RunTag;
pub use block::{BlockFormat, FileLayout};
pub use state::RunId;
pub use field::Fp;
