//! The owner's commands ([`commands`]) and the secret audit ([`secret_audit`]); the
//! protocol flows they run are the library's (`dpor_client::owner`, re-exported here).

pub use dpor_client::owner::{batch, checkpoint, deal, edit, extract, flows, local_levels, machine, recover, resize, resize_terms};
pub mod commands;
pub mod secret_audit;
