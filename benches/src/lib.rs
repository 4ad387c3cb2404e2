//! Criterion benchmarks of kmirror live in `benches/`; this library is intentionally empty.
