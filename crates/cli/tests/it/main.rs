//! corecap's integration tests, one binary: each module drives the `corecap` binary on
//! one feature, most of them on a veth lab in a namespace of their own. Tests that need
//! root are marked `#[ignore = "needs root"]`; run them as root with `--include-ignored`,
//! one module at a time with a filter (`cargo test -p corecap --test it -- serve::`).

mod util;
mod webdriver;

mod bench;
mod catalog;
mod compress;
mod compressed;
mod cutoff;
mod durability;
mod extcap;
mod fleet;
mod habits;
mod install;
mod ipfix;
mod keep;
mod lookback;
mod net;
mod newcomer;
mod observe;
mod order;
mod page;
mod parity;
mod print;
mod query;
mod readme;
mod record;
mod seal;
mod serve;
mod sessions;
mod steer;
mod tune;
mod xdp;
