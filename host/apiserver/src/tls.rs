//! A generated self-signed CA and a server certificate for 127.0.0.1/localhost.

use std::sync::Arc;

/// The CA and the TLS acceptor the server serves HTTPS with.
pub struct Generated {
    /// The CA certificate (PEM) clients trust: written into the kubeconfig and the `ca.crt`
    /// of legacy service-account token Secrets.
    pub ca_pem: String,
    /// The CA's private key (PEM), to keep the CA stable across restarts.
    pub ca_key_pem: String,
    /// Accepts TLS connections with the server certificate the CA signed, for `localhost` and the
    /// loopback addresses.
    pub acceptor: tokio_rustls::TlsAcceptor,
}

/// Generates the CA and a fresh server certificate signed by it. A CA saved by an earlier start
/// (`saved`: its key, and its certificate when kept) is reused, so that kubeconfigs and the
/// token Secrets that hold the CA stay good across restarts: the server
/// certificate is signed with the same key and name, which the saved certificate verifies.
pub fn generate(saved: Option<(&str, Option<&str>)>) -> anyhow::Result<Generated> {
    let (ca_key_pem, saved_cert_pem) = match saved {
        Some((key, cert)) => (Some(key), cert),
        None => (None, None),
    };
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let ca_key = match ca_key_pem {
        Some(pem) => KeyPair::from_pem(pem)?,
        None => KeyPair::generate()?,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "lethe-apiserver-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "lethe-apiserver");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca_cert, &ca_key)?;

    // The saved certificate, when it parses, is the one clients already trust.
    let saved_cert = saved_cert_pem.and_then(|pem| {
        use rustls::pki_types::pem::PemObject as _;
        rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
            .ok()
            .map(|der| (pem.to_string(), der))
    });
    let (ca_pem, ca_der) = match saved_cert {
        Some(saved) => saved,
        None => (ca_cert.pem(), ca_cert.der().clone()),
    };
    let certs = vec![cert.der().clone(), ca_der];
    let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| anyhow::anyhow!("server key: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key_der)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Generated {
        ca_pem,
        ca_key_pem: ca_key.serialize_pem(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    })
}
