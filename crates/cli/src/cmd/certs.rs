//! `corecap certs DIR`: a CA of the fleet's own, a certificate for the daemon with the
//! names clients reach it by, and a client certificate, as PEM files that `serve --listen`
//! (`--tls-cert`, `--tls-key`, `--tls-client-ca`) and `request --url https://...`
//! (`--tls-ca`, `--tls-cert`, `--tls-key`) take. Keys are ECDSA P-256, written with mode
//! 0600; nothing that exists is replaced. `--add-client NAME` signs another client's
//! certificate with the CA made here before, one per analyst. There is no revocation
//! list: taking a client's access away means a new CA.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::args::CertsArgs;

/// The CA's common name; `--add-client` rebuilds the issuer from it and ca.key.
const CA_NAME: &str = "corecap fleet CA";

/// Writes `text` to a new file `dir/name` with `mode`; an existing file is an error.
fn write_new(dir: &Path, name: &str, text: &str, mode: u32) -> Result<()> {
    let p = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&p)
        .with_context(|| {
            format!(
                "creating {} (an existing file is never replaced)",
                p.display()
            )
        })?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Parameters valid from yesterday for `days` days, named `cn`.
fn params(cn: &str, days: u32) -> Result<CertificateParams> {
    let mut p = CertificateParams::default();
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(i64::from(days));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    p.distinguished_name = dn;
    Ok(p)
}

/// The CA's parameters: the same every time, so `--add-client` can sign with ca.key.
fn ca_params(days: u32) -> Result<CertificateParams> {
    let mut p = params(CA_NAME, days)?;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(p)
}

/// A client certificate named `cn`, signed by `ca`, as `dir/STEM.pem` and `dir/STEM.key`.
fn client(dir: &Path, stem: &str, cn: &str, days: u32, ca: &Issuer<'_, KeyPair>) -> Result<()> {
    let mut p = params(cn, days)?;
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, ca)?;
    write_new(dir, &format!("{stem}.key"), &key.serialize_pem(), 0o600)?;
    write_new(dir, &format!("{stem}.pem"), &cert.pem(), 0o644)?;
    Ok(())
}

/// Runs `corecap certs`.
pub(crate) fn run(a: &CertsArgs) -> Result<i32> {
    if a.days == 0 {
        bail!("--days must be 1 or more");
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    if let Some(name) = &a.add_client {
        check_name(name)?;
        let key = std::fs::read_to_string(a.dir.join("ca.key")).with_context(|| {
            format!("reading {}/ca.key (made by corecap certs)", a.dir.display())
        })?;
        let ca = Issuer::new(ca_params(a.days)?, KeyPair::from_pem(&key)?);
        client(&a.dir, name, name, a.days, &ca)?;
        eprintln!("wrote {0}/{name}.pem and {0}/{name}.key", a.dir.display());
        return Ok(0);
    }
    check_name(&a.client_name)?;
    let names = if a.server_names.is_empty() {
        vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ]
    } else {
        a.server_names.clone()
    };
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params(a.days)?.self_signed(&ca_key)?;
    write_new(&a.dir, "ca.key", &ca_key.serialize_pem(), 0o600)?;
    write_new(&a.dir, "ca.pem", &ca_cert.pem(), 0o644)?;
    let ca = Issuer::new(ca_params(a.days)?, ca_key);

    let mut p = params(&names[0], a.days)?;
    p.subject_alt_names = names
        .iter()
        .map(|n| match n.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(n.as_str().try_into().with_context(
                || format!("--server-name {n}: not a DNS name or an IP address"),
            )?)),
        })
        .collect::<Result<_>>()?;
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, &ca)?;
    write_new(&a.dir, "server.key", &key.serialize_pem(), 0o600)?;
    write_new(&a.dir, "server.pem", &cert.pem(), 0o644)?;
    client(&a.dir, "client", &a.client_name, a.days, &ca)?;
    let d = a.dir.display();
    eprintln!("wrote {d}/ca.pem, server.pem and client.pem, with their keys (mode 0600)");
    eprintln!("  serve:   --listen ADDR --tls-cert {d}/server.pem --tls-key {d}/server.key --tls-client-ca {d}/ca.pem");
    eprintln!("  request: --url https://{}:PORT --tls-ca {d}/ca.pem --tls-cert {d}/client.pem --tls-key {d}/client.key", names[0]);
    Ok(0)
}

/// A client name is a file name: letters, digits, `-`, `_` and `.`, not leading `.`.
fn check_name(n: &str) -> Result<()> {
    let ok = !n.is_empty()
        && !n.starts_with('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok || ["ca", "server"].contains(&n) {
        bail!("client name '{n}': use letters, digits, '-', '_' and '.', not ca or server");
    }
    Ok(())
}
