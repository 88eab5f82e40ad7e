//! The owner's side: the protocol flows ([`flows`], chain-free), crash recovery
//! ([`recover`]) and the commands ([`commands`]).

pub mod commands;
pub mod flows;
pub mod recover;
