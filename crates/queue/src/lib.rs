//! Queues between capture cores and stage cores.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
