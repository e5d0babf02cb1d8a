//! How hard the runner tries: sample length, repetition bounds, convergence target,
//! warm-up and the time budget of one cell. The settings are plain data in the model
//! crate (results record them); this module checks them for the runner.

pub use smtlab_model::result::RunConfig;

use crate::error::RunError;

/// Checks the settings are usable; `measure` calls it first.
pub fn validate(cfg: &RunConfig) -> Result<(), RunError> {
    cfg.validate().map_err(|reason| RunError::Config { reason })
}
