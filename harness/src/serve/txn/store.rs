//! The coordinator's file: every transactional id's [`TxnMetadata`], in
//! `<dest>/metadata/transactions/transactions.json`, rewritten atomically after each change
//! (Kafka's `__transaction_state` log, as one snapshot).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::state::TxnMetadata;
use super::TxnError;

/// The directory under the destination.
pub const TRANSACTIONS_DIR: &str = "metadata/transactions";
/// The file in it.
pub const TRANSACTIONS_FILE: &str = "transactions.json";

/// Where the coordinator's state is kept.
#[derive(Debug)]
pub struct TxnStore {
    dir: PathBuf,
}

impl TxnStore {
    /// The store of the destination at `root`.
    pub fn of(root: &Path) -> Self {
        TxnStore {
            dir: root.join(TRANSACTIONS_DIR),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(TRANSACTIONS_FILE)
    }

    /// Every transactional id's metadata (none when there is no file yet).
    pub fn load(&self) -> Result<BTreeMap<String, TxnMetadata>, TxnError> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TxnError::Parse {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(TxnError::Store {
                path,
                reason: e.to_string(),
            }),
        }
    }

    /// Writes `txns` atomically (a crash leaves the old file or the new one).
    pub fn save(&self, txns: &BTreeMap<String, TxnMetadata>) -> Result<(), TxnError> {
        let failed = |reason: String| TxnError::Store {
            path: self.path(),
            reason,
        };
        let bytes = serde_json::to_vec_pretty(txns).map_err(|e| failed(e.to_string()))?;
        fs::create_dir_all(&self.dir).map_err(|e| failed(e.to_string()))?;
        crate::segment::write_atomically(&self.dir, TRANSACTIONS_FILE, &bytes)
            .map_err(|e| failed(e.to_string()))
    }
}
