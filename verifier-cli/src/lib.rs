//! # dpor-cli
//!
//! The verifier CLI of dpor (binary `dpor`): owner commands (open a deal, upload,
//! read, write, checkpoint, download, extract, status) and auditor commands (audit,
//! record, dispute, slash), each verifying everything the node returns against roots
//! the user trusts (its own, or a digest posted on chain).
//!
//! - [`context`]: global flags, the chain client, finding a deal's node.
//! - [`node_client`], [`owner_state`]: re-exported from the library `dpor_client`.
//! - [`owner`]: the owner's commands (the flows are `dpor_client::owner`).
//! - [`auditor`]: the public audit and its on-chain consequences; `watch`, the long-running auditor.
//! - [`beacon`]: `dpor beacon relay`, recording local-beacon rounds on chain.
//! - [`disperse`]: `dpor put` / `dpor get`, a file k-of-n over n providers' deals.
//! - [`output`]: human and JSON output.

pub mod auditor;
pub mod beacon;
pub mod context;
pub mod disperse;
pub mod output;
pub mod owner;

pub use dpor_client::{node_client, owner_state};
