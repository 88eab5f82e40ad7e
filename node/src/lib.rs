//! # dpor-node
//!
//! The storage provider daemon of dpor: it keeps each deal's file as U, C and H
//! (Shi–Stefanov–Papamanthou, CCS 2013, §4.1) on disk, serves owners and auditors over
//! libp2p (`dpor_proto`), and acts on chain (`dpor_chain`): registers, accepts deals,
//! co-signs checkpoint digests, proves each epoch, answers disputes and withdraws.
//!
//! - [`store`]: sled metadata + immutable run files, crash-safe writes, GC pins.
//! - [`handler`]: the answer to every protocol request.
//! - [`signing`]: the provider key and owner-request authentication.
//! - [`chain_tasks`]: the chain agent (epoch proofs, disputes, deals, payments).
//! - [`tamper`]: testing only: zero coded blocks on disk, as a cheating provider would.
//! - [`metrics`]: Prometheus metrics and the health report (`metrics_listen`).
//! - [`dashboard`]: the read-only web dashboard (`dashboard_listen`).
//! - [`config`]: the configuration file.
//! - [`service`]: wiring it all into one running node.

pub mod chain_tasks;
pub mod config;
pub mod dashboard;
pub mod handler;
pub mod metrics;
pub mod service;
pub mod signing;
pub mod store;
pub mod tamper;
