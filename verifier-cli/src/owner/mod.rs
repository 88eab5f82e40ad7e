//! The owner's side: the protocol flows ([`flows`], chain-free; extraction in
//! [`extract`]; batched writes with deferred checks in [`batch`]), crash recovery ([`recover`]) and the commands ([`commands`]).

pub mod batch;
pub mod commands;
pub mod extract;
pub mod flows;
pub mod recover;
