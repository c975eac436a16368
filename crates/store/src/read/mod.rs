//! Reading a recording: what a file holds ([`sniff`]), which regions of which files a
//! query must read ([`plan`]), reading them ([`stream`]), and the query that merges them in
//! time order ([`query`]); [`time`] parses the times users give.
pub mod outcome;
pub mod plan;
pub mod query;
pub mod sniff;
pub mod stream;
pub mod time;
