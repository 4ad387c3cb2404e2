//! Where a source partition's log is, as its last Fetch answer said: what progress reports
//! and lag are measured against.

use kmirror_kernel::types::Offset;

/// Where a source partition's log is, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SourcePosition {
    /// The source's log start offset.
    pub log_start_offset: Offset,
    /// The source's high watermark.
    pub high_watermark: Offset,
    /// The source's last stable offset.
    pub last_stable_offset: Offset,
    /// The source's log end offset.
    pub log_end_offset: Offset,
}
