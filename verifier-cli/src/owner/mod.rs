//! The owner's side: the protocol flows ([`flows`], chain-free) and the commands
//! ([`commands`]).

pub mod commands;
pub mod flows;
