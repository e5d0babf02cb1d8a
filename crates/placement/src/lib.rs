//! # smtlab-placement
//!
//! Placement specs, their resolution against a topology, and pinning.

pub mod pin;
