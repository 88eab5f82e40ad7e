//! # dpor-sim
//!
//! A discrete-event simulator of a dpor network (issue 25, item 2): providers holding
//! the shards of dispersed files, failing (disk loss, outages, whole failure domains),
//! leaving, cheating and joining over years, and owners running `dpor watch --repair`.
//! It calls the project's own decisions (`dpor_disperse::policy`: `pick_providers`,
//! `needs_repair`, `can_rebuild`), takes its costs from the project's measured figures
//! ([`costs::Costs`]) and is reproducible from a seed (ChaCha8). Results and method:
//! docs/SIMULATION.md; the binary `dpor-sim` (run by `script/simulate`).
//!
//! - [`scenario`]: the parameters and their sources;
//! - [`engine`]: the event loop;
//! - [`closed_form`]: the binomial forms it is checked against;
//! - [`costs`]: gas per operation and repair time, from docs/PERFORMANCE.md;
//! - [`report`]: the figures of a run; [`plot`]: the SVG plots of docs/SIMULATION.md.

pub mod closed_form;
pub mod costs;
pub mod engine;
pub mod plot;
pub mod report;
pub mod scenario;

pub use engine::{simulate, Outcome};
pub use scenario::Scenario;
