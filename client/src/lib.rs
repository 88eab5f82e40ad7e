//! # dpor-client
//!
//! The owner's and the auditor's side of the dpor protocol as a library (the `dpor` CLI, package
//! `dpor-cli`, is a shell of argument parsing and output over it):
//!
//! - [`node_client`]: a typed client of one node (`dpor_proto`).
//! - [`owner_state`]: the owner's small state file.
//! - [`owner`]: the owner's flows (DESIGN §6): upload, write, batches, resize, extract,
//!   and crash recovery, all through one state machine (`owner::machine`).
//! - [`session`]: the market client, the key, the state file, dialing a deal's node.
//! - [`disperse`]: a file k-of-n over n providers' deals (put, get, writes across
//!   shards, repair, recovery from the key), above the single-deal flows.
//! - [`progress`]: progress reports from long flows (the library prints nothing).
//! - [`beacon_relay`]: the beacon relay (local key or drand HTTP, verified before gas).
//! - [`auditor`]: the auditor's side (public audit, record, dispute, slash, mark-missed,
//!   withdraw, challenges) and `watch`, the long-running auditor's passes; each
//!   operation returns a report, `watch` reports its actions to a `WatchLog`.

pub mod auditor;
pub mod beacon_relay;
pub mod disperse;
pub mod node_client;
pub mod owner;
pub mod owner_state;
pub mod progress;
pub mod session;
