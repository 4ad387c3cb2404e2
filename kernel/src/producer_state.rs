//! Producer state (placeholder; being written).

use serde::{Deserialize, Serialize};

use crate::types::Offset;

/// Kafka's `ProducerStateManager` as a value.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct ProducerStateTable {}

impl ProducerStateTable {
    /// First offset of the earliest open transaction.
    pub fn first_open_transaction_offset(&self) -> Option<Offset> {
        None
    }
}
