//! Topology and tuning: NUMA nodes, cores, IRQs and queues, from sysfs to a placement plan.
//!
//! The data flow: a [`Root`] (the live `/` or a fixture tree) → [`Machine`] (the
//! [`Topology`] of CPUs and nodes, the [`Nic`] with its queues, IRQs and ethtool
//! [`Settings`], and whether irqbalance runs) → a [`Plan`] (worker CPUs, IRQ CPUs, stage
//! CPUs, NIC settings, warnings) → [`apply::apply`], which saves the old state for
//! [`apply::restore`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod apply;
pub mod cpus;
mod error;
pub mod machine;
pub mod nic;
pub mod plan;
pub mod root;
pub mod settings;
pub mod show;
pub mod topology;

pub use error::{Error, Result};
pub use machine::Machine;
pub use nic::Nic;
pub use plan::{Plan, PlanOptions, Warning, WarningKind};
pub use root::Root;
pub use settings::Settings;
pub use topology::Topology;
