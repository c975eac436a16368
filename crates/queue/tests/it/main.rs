//! corecap-queue's integration tests, one binary: the stamped stress tests, or, built
//! with `--cfg loom`, the loom models of the mpsc protocol in their place:
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p corecap-queue --test it --release`

#[cfg(loom)]
mod loom;
#[cfg(not(loom))]
mod stress;
