//! What measuring one cell produced. The types live in the model crate so the store and
//! the report can read them without depending on the runner.

pub use smtlab_model::result::{Calibration, CalibrationStep, CellResult, StopReason, Warmup};
