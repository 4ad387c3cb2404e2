//! The `kmirror` binary.

fn main() {}
