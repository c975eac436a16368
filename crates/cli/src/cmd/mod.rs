//! One module per subcommand.
pub(crate) mod bench;
pub(crate) mod capture;
pub(crate) mod certs;
pub(crate) mod client;
pub(crate) mod demo;
pub(crate) mod extcap;
pub(crate) mod fleet;
pub(crate) mod flows;
pub(crate) mod gen;
pub(crate) mod generate;
pub(crate) mod index;
pub(crate) mod lab;
pub(crate) mod query;
pub(crate) mod request;
pub(crate) mod seal;
pub(crate) mod serve;
pub(crate) mod tune;
