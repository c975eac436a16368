//! Reading a recording: what a file holds ([`sniff`]), which regions of which files a
//! query must read ([`plan`]), reading them ([`stream`]), and the query that merges them in
//! time order ([`query`]); [`frames`] reads a compressed recording by its frames; [`time`] parses the times users give. [`flows`] lists the
//! connections the sessions files beside the capture files keep, and [`flow_match`] says
//! which match and turns them into a query for their packets. [`reach`] says which part
//! of a query's window is on record, and why the rest is not.
pub mod flow_doc;
pub mod flow_match;
pub mod flows;
pub mod frames;
pub mod narrow;
pub mod outcome;
pub mod plan;
pub mod query;
pub mod reach;
pub(crate) mod read_at;
pub mod session_match;
pub mod sniff;
pub mod stream;
pub mod time;
