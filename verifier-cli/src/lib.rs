//! # dpor-cli
//!
//! The verifier CLI of dpor (binary `dpor`): owner commands (open a deal, upload,
//! read, write, checkpoint, download, extract, status) and auditor commands (audit,
//! record, dispute, slash), each verifying everything the node returns against roots
//! the user trusts (its own, or a digest posted on chain).
//!
//! - [`context`]: global flags, turned into the library's `dpor_client::session::Session`, and the output flags.
//! - [`node_client`], [`owner_state`]: re-exported from the library `dpor_client`.
//! - [`owner`]: the owner's commands (the flows are `dpor_client::owner`).
//! - [`auditor`]: the arguments and output of the auditor's commands (the public audit,
//!   its on-chain consequences, `watch`); what they do is `dpor_client::auditor`.
//! - [`beacon`]: `dpor beacon relay`, recording local-beacon rounds on chain.
//! - [`disperse`]: the arguments and output of `dpor put` / `get` / `repair` / ...; the
//!   dispersal itself is `dpor_client::disperse`.
//! - [`output`]: human and JSON output.

pub mod auditor;
pub mod beacon;
pub mod context;
pub mod disperse;
pub mod output;
pub mod owner;

pub use dpor_client::{node_client, owner_state};
