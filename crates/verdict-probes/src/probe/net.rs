//! TLS client configuration shared by the `http`, `json` (URL source) and `tls` probes.
//!
//! Verification is on unless a spec says `insecure: true`. A `ca` file replaces the system's
//! trust store rather than adding to it, so a probe that names its CA trusts nothing else.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::{Arc, Mutex, OnceLock};

/// The crypto provider every TLS connection uses.
#[must_use]
pub fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// The system's trust store, read once.
fn system_roots() -> Arc<RootCertStore> {
    static R: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    R.get_or_init(|| {
        let mut store = RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        // Unparsable system certificates are skipped; they could not anchor a chain anyway.
        let _ = store.add_parsable_certificates(found.certs);
        Arc::new(store)
    })
    .clone()
}

/// How to verify a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TlsSettings {
    /// PEM file of trusted CAs (instead of the system's).
    pub ca: Option<String>,
    /// Verification off.
    pub insecure: bool,
}

fn roots(settings: &TlsSettings) -> Result<Arc<RootCertStore>, String> {
    match &settings.ca {
        None => Ok(system_roots()),
        Some(path) => {
            let mut store = RootCertStore::empty();
            let mut n = 0;
            for cert in CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read ca file {path:?}: {e}"))?
            {
                let cert = cert.map_err(|e| format!("ca file {path:?} is not valid pem: {e}"))?;
                store
                    .add(cert)
                    .map_err(|e| format!("ca file {path:?}: {e}"))?;
                n += 1;
            }
            if n == 0 {
                return Err(format!("ca file {path:?} holds no certificate"));
            }
            Ok(Arc::new(store))
        }
    }
}

/// A verifier that remembers the chain it was shown, then verifies it (unless insecure).
#[derive(Debug)]
pub struct CapturingVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
    seen: Mutex<Vec<CertificateDer<'static>>>,
}

impl CapturingVerifier {
    /// A verifier for `settings`.
    pub fn new(settings: &TlsSettings) -> Result<Arc<Self>, String> {
        let provider = provider();
        let inner = if settings.insecure {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(roots(settings)?, provider.clone())
                    .build()
                    .map_err(|e| format!("cannot build a certificate verifier: {e}"))?,
            )
        };
        Ok(Arc::new(Self {
            inner,
            provider,
            seen: Mutex::new(Vec::new()),
        }))
    }

    /// The chain the server presented, leaf first (empty before a handshake).
    #[must_use]
    pub fn seen(&self) -> Vec<CertificateDer<'static>> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl ServerCertVerifier for CapturingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.clear();
            seen.push(end_entity.clone().into_owned());
            seen.extend(intermediates.iter().map(|c| c.clone().into_owned()));
        }
        match &self.inner {
            Some(v) => {
                v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client configuration using `verifier`.
pub fn client_config(verifier: Arc<dyn ServerCertVerifier>) -> Result<ClientConfig, String> {
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure tls: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// When `err` (or anything in its source chain) is a certificate the verifier refused, says why.
/// Such a refusal is a finding about the server (`fail`), not an infrastructure error.
#[must_use]
pub fn certificate_refusal(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(rustls::Error::InvalidCertificate(c)) = e.downcast_ref::<rustls::Error>() {
            return Some(format!("certificate refused: {c:?}"));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(rustls::Error::InvalidCertificate(c)) =
                inner.downcast_ref::<rustls::Error>()
        {
            return Some(format!("certificate refused: {c:?}"));
        }
        // Some layers (the HTTP client's connector) box the TLS error where it cannot be
        // downcast; rustls's own wording still identifies it.
        let text = e.to_string();
        if let Some(why) = text.strip_prefix("invalid peer certificate: ") {
            return Some(format!("certificate refused: {why}"));
        }
        cur = e.source();
    }
    None
}
