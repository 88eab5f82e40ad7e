//! The owner's side: opening a deal ([`deal`]), posting a checkpoint ([`checkpoint`]),
//! the protocol flows ([`flows`], chain-free; extraction in
//! [`extract`]; batched writes with deferred checks in [`batch`], the owner's copy of its
//! smallest levels in [`local_levels`]; byte-range edits and sync in [`edit`]; resizes
//! in [`resize`] and their terms in [`resize_terms`]), the one state machine every
//! state-changing request goes through ([`machine`]), crash recovery ([`recover`]) and the
//! owner's secret audit ([`secret_audit`]).

pub mod batch;
pub mod checkpoint;
pub mod deal;
pub mod edit;
pub mod extract;
pub mod flows;
pub mod local_levels;
pub mod machine;
pub mod recover;
pub mod resize;
pub mod resize_terms;
pub mod secret_audit;
