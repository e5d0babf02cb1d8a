//! # smtlab-runner
//!
//! Turns a prepared benchmark instance into a measured cell.
