//! # smtlab-topology
//!
//! Discovers the CPU topology from sysfs and /proc/cpuinfo under a root directory.

use std::path::{Path, PathBuf};

use smtlab_model::Topology;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// Reads the topology of the tree under `root` (`/` for the running system).
pub fn discover(root: &Path) -> Result<Topology, TopologyError> {
    Err(TopologyError::Invalid {
        path: root.to_path_buf(),
        reason: "not implemented yet".into(),
    })
}
