//! TLS for the API on a network address, both ends: the daemon's certificate and key with
//! client certificates checked against a CA file (mutual TLS), and the client's trust in
//! that CA with its own certificate. PEM files as openssl (or `corecap certs`) writes them.
//!
//! rustls with its ring provider (ring is already how sealed files are encrypted): no
//! system library, and the same build on every machine. A client whose certificate does
//! not chain to the CA fails the handshake, so its request never reaches a handler.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
pub use rustls::{ClientConfig, ServerConfig};

/// The provider every config is built with.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An error about `path`, the way a user finds what to fix.
fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} ({what}): {e}", path.display()),
    )
}

/// The certificates of a PEM file, at least one.
fn certs(path: &Path, what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(path, what, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(path, what, e))?;
    if certs.is_empty() {
        return Err(bad(path, what, "no CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
fn key(path: &Path, what: &str) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| bad(path, what, e))
}

/// The CAs of a PEM file as trust roots.
fn roots(path: &Path, what: &str) -> io::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in certs(path, what)? {
        roots.add(c).map_err(|e| bad(path, what, e))?;
    }
    Ok(roots)
}

/// The daemon's side: its certificate chain and key, and the CA that client certificates
/// must chain to (every client must present one).
pub fn server_config(cert: &Path, key_file: &Path, client_ca: &Path) -> io::Result<ServerConfig> {
    let p = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots(client_ca, "--tls-client-ca")?),
        p.clone(),
    )
    .build()
    .map_err(|e| bad(client_ca, "--tls-client-ca", e))?;
    let mut c = ServerConfig::builder_with_provider(p)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert, "--tls-cert")?, key(key_file, "--tls-key")?)
        .map_err(|e| bad(key_file, "--tls-key does not match --tls-cert", e))?;
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(c)
}

/// The client's side: the CA the daemon's certificate must chain to, and the client's
/// certificate and key (both or neither).
pub fn client_config(
    ca: &Path,
    cert: Option<&Path>,
    key_file: Option<&Path>,
) -> io::Result<ClientConfig> {
    let b = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots(ca, "--tls-ca")?);
    let mut c = match (cert, key_file) {
        (Some(c), Some(k)) => b
            .with_client_auth_cert(certs(c, "--tls-cert")?, key(k, "--tls-key")?)
            .map_err(|e| bad(k, "--tls-key does not match --tls-cert", e))?,
        (None, None) => b.with_no_client_auth(),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "--tls-cert and --tls-key go together",
            ))
        }
    };
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(c)
}

/// A blocking TLS connection to `host` (the name its certificate must carry) over `tcp`.
pub fn connect(
    config: Arc<ClientConfig>,
    host: &str,
    tcp: std::net::TcpStream,
) -> io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let mut conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut tcp = tcp;
    // The handshake now, so a refused certificate is an error of the connect, not of the
    // request's first read.
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)?;
    }
    Ok(rustls::StreamOwned::new(conn, tcp))
}
