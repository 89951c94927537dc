//! TLS to PostgreSQL with libpq's `sslmode` semantics, on rustls (ring).
//!
//! | `sslmode`          | TLS                         | server certificate checked        |
//! |--------------------|-----------------------------|-----------------------------------|
//! | `disable`          | never                       | –                                 |
//! | `allow`, `prefer`* | if the server offers it     | no                                |
//! | `require`          | always                      | no (as `verify-ca` with a root)   |
//! | `verify-ca`        | always                      | chain, against the roots          |
//! | `verify-full`      | always                      | chain and host name               |
//!
//! (*) the default. The roots are the PEM file named by `sslrootcert`, else the system's.
//! tokio-postgres knows neither the `verify-*` modes nor `sslrootcert`, so both are taken out of
//! the URL here before it parses the rest.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;

use crate::error::{Result, SqlError};

/// The requested TLS behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// TLS settings taken from a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// The URL's `sslmode`.
    pub mode: TlsMode,
    /// The URL's `sslrootcert`: the CA certificates to verify the server against.
    pub root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// The mode tokio-postgres gets: whether TLS is off, tried, or required.
    pub fn ssl_mode(&self) -> SslMode {
        match self.mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        }
    }
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(hex) = value.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits `sslmode` and `sslrootcert` off a `postgres://` URL's query string.
pub(crate) fn split_url(url: &str) -> Result<(String, TlsSettings)> {
    let mut settings = TlsSettings {
        mode: TlsMode::Prefer,
        root_cert: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), settings));
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                settings.mode = match percent_decode(value).as_str() {
                    "disable" => TlsMode::Disable,
                    "allow" | "prefer" => TlsMode::Prefer,
                    "require" => TlsMode::Require,
                    "verify-ca" => TlsMode::VerifyCa,
                    "verify-full" => TlsMode::VerifyFull,
                    other => {
                        return Err(SqlError::Unavailable(format!(
                            "invalid PostgreSQL URL: unknown sslmode {other:?}"
                        )));
                    }
                }
            }
            "sslrootcert" => settings.root_cert = Some(PathBuf::from(percent_decode(value))),
            _ => kept.push(pair),
        }
    }
    // As in libpq, `require` with a root certificate verifies the chain.
    if settings.mode == TlsMode::Require && settings.root_cert.is_some() {
        settings.mode = TlsMode::VerifyCa;
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, settings))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trust anchors: `root_cert` (PEM), or the system's.
fn roots(root_cert: Option<&PathBuf>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match root_cert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|iter| iter.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    SqlError::Unavailable(format!(
                        "cannot read sslrootcert {}: {e}",
                        path.display()
                    ))
                })?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(SqlError::Unavailable(format!(
                    "sslrootcert {} holds no usable certificate",
                    path.display()
                )));
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(native.certs);
        }
    }
    Ok(store)
}

/// The rustls client configuration for `settings`.
pub(crate) fn client_config(settings: &TlsSettings) -> Result<rustls::ClientConfig> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| SqlError::Other(format!("TLS configuration: {e}")))?;
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ServerCertVerifier> = match settings.mode {
        TlsMode::Disable | TlsMode::Prefer | TlsMode::Require => Arc::new(Relaxed {
            chain: None,
            algorithms,
        }),
        TlsMode::VerifyCa | TlsMode::VerifyFull => {
            let webpki = WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(settings.root_cert.as_ref())?),
                provider,
            )
            .build()
            .map_err(|e| SqlError::Unavailable(format!("TLS roots: {e}")))?;
            if settings.mode == TlsMode::VerifyFull {
                webpki
            } else {
                Arc::new(Relaxed {
                    chain: Some(webpki),
                    algorithms,
                })
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// libpq's relaxed modes. `prefer`/`require` (no `chain`): encryption without authenticating
/// the server. `verify-ca`: the chain must lead to a trusted root, but the host name is not
/// checked. The handshake signatures are checked either way, so the session is bound to the
/// presented certificate.
#[derive(Debug)]
struct Relaxed {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tls_parameters_off_the_url() {
        let (url, s) = split_url("postgres://u:p@h/db").unwrap();
        assert_eq!(url, "postgres://u:p@h/db");
        assert_eq!(s.mode, TlsMode::Prefer);

        let (url, s) = split_url(
            "postgres://h/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(url, "postgres://h/db?application_name=x");
        assert_eq!(s.mode, TlsMode::VerifyFull);
        assert_eq!(s.root_cert, Some(PathBuf::from("/tmp/ca.pem")));

        let (url, s) = split_url("postgres://h/db?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(url, "postgres://h/db");
        assert_eq!(s.mode, TlsMode::VerifyCa);

        let (_, s) = split_url("postgres://h/db?sslmode=disable").unwrap();
        assert_eq!(s.ssl_mode(), SslMode::Disable);
        assert!(split_url("postgres://h/db?sslmode=bogus").is_err());
        assert_eq!(percent_decode("a%zz%2"), "a%zz%2");
    }

    #[test]
    fn builds_configs_for_every_mode() {
        for mode in [
            TlsMode::Disable,
            TlsMode::Prefer,
            TlsMode::Require,
            TlsMode::VerifyCa,
            TlsMode::VerifyFull,
        ] {
            let settings = TlsSettings {
                mode,
                root_cert: None,
            };
            // With system roots; an empty store is acceptable for this check.
            let _ = client_config(&settings);
        }
        let missing = TlsSettings {
            mode: TlsMode::VerifyFull,
            root_cert: Some(PathBuf::from("/nonexistent/ca.pem")),
        };
        assert!(matches!(
            client_config(&missing),
            Err(SqlError::Unavailable(_))
        ));
    }
}
