//! The workers' userspace filter: a tcpdump expression compiled by libpcap and run by the
//! classic BPF interpreter ([`corecap_linux::cbpf`]).

pub use corecap_linux::cbpf::{Meta, Program, ProgramError};

/// Why an expression did not become a filter.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// libpcap refused the expression, or is not installed.
    #[error(transparent)]
    Compile(#[from] corecap_linux::Error),
    /// The program libpcap gave cannot run in the interpreter.
    #[error(transparent)]
    Program(#[from] ProgramError),
}

impl FilterError {
    /// Whether the machine is at fault (libpcap missing or failing) rather than the
    /// expression.
    pub fn is_system(&self) -> bool {
        matches!(self, FilterError::Compile(e) if e.kind() != corecap_linux::ErrorKind::Filter)
    }
}

/// Compiles a tcpdump expression for the workers' userspace filter.
pub fn compile_filter(linktype: u16, snaplen: u32, expr: &str) -> Result<Program, FilterError> {
    Ok(Program::new(corecap_linux::filter::compile_offline(
        linktype, snaplen, expr,
    )?)?)
}
