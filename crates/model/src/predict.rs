//! What `smtlab predict` planned, as the report reads it: for every measured pair the
//! keys of its cells, grouped by role (a workload beside a ruler, a ruler beside a
//! workload, a training pair, a held-out pair), and the rulers by name. The keys say
//! which cell is which, so two rulers built on one benchmark (an L1 and an L2
//! footprint, both `mem-latency`) are never taken for each other.

use serde::{Deserialize, Serialize};

use crate::keys::Form;
use crate::{CellKey, Direction};

/// The cells of one measured pair: A alone, and A beside B in each form.
#[derive(Debug, Clone, PartialEq)]
pub struct PairKeys {
    pub a: String,
    pub b: String,
    /// B's direction (higher or lower is better), for its slowdown beside A.
    pub b_direction: Direction,
    pub alone: CellKey,
    pub co: Vec<(Form, CellKey)>,
}

/// A ruler as planned: its short name, the resource it presses, and the benchmark and
/// parameters that make it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulerSpec {
    pub name: String,
    pub resource: String,
    pub workload: String,
    /// For the cache footprint rulers (a random chase over one cache's size), their
    /// order from the smallest cache: each must be slower per load than the one before,
    /// or its footprint did not leave the smaller cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint_rank: Option<u8>,
}

/// The pairs of a `predict` plan by role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanKeys {
    pub workloads: Vec<String>,
    pub rulers: Vec<RulerSpec>,
    pub forms: Vec<Form>,
    /// Each workload beside each ruler.
    pub sensitivity: Vec<PairKeys>,
    /// Each ruler beside each workload.
    pub contentiousness: Vec<PairKeys>,
    pub training: Vec<PairKeys>,
    pub held_out: Vec<PairKeys>,
}
