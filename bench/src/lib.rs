//! Benchmarks for Xoff live in `benches/` (criterion) and in `xoff bench`.
