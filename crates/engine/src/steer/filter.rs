//! The workers' userspace filter: a tcpdump expression compiled by libpcap and run by the
//! classic BPF interpreter ([`corecap_linux::cbpf`]).

pub use corecap_linux::cbpf::{Meta, Program, ProgramError};

/// Compiles a tcpdump expression for the workers' userspace filter.
pub fn compile_filter(
    linktype: u16,
    snaplen: u32,
    expr: &str,
) -> Result<Program, crate::capture::CaptureError> {
    Program::new(corecap_linux::filter::compile_offline(
        linktype, snaplen, expr,
    )?)
    .map_err(|e| crate::capture::CaptureError::Config(e.to_string()))
}
