//! The web dashboard (docs/OPERATIONS.md, "Web dashboard"): a read-only page the node
//! serves on `dashboard_listen` (off unless set; loopback unless an access token is
//! set), showing the provider's deals with their epochs, its space, earnings and
//! disputes, and per deal its digest history and audits, with plots of space and
//! earnings over time. The front end is dashboard/ (Vite + TypeScript + uPlot), built
//! into the folder `dashboard_dir` names.
//!
//! - [`model`]: what the JSON API answers.
//! - [`collect`]: the task that reads the chain and the store into a snapshot.
//! - [`auth`]: loopback by default, the access token otherwise.
//! - [`assets`]: the built front end, held in memory.
//! - [`server`]: the HTTP routes.

pub mod assets;
pub mod auth;
pub mod collect;
pub mod model;
pub mod server;

pub use collect::{Collector, SharedSnapshot};
pub use server::DashboardServer;
