//! Topology and tuning: NUMA nodes, cores, IRQs and queues, from sysfs to a placement plan.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
