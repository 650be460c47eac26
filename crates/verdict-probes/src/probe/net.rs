//! TLS client configuration shared by the `http`, `json` (URL source) and `tls` probes.
//!
//! Verification is on unless a spec says `insecure: true`. A `ca` file replaces the system's
//! trust store rather than adding to it, so a probe that names its CA trusts nothing else.
//! Sessions are never resumed: a resumed handshake shows no certificate, so a server that
//! changed its certificate would be judged on the one it showed before. webpki does not judge
//! the dates of a trust anchor, so the anchor a `ca` chain leads to is judged here.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore,
    SignatureScheme,
};
use std::fmt;
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

/// The certificates of a `ca` file, in order.
fn ca_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read ca file {path:?}: {e}"))?
        .map(|c| c.map_err(|e| format!("ca file {path:?} is not valid pem: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(format!("ca file {path:?} holds no certificate"));
    }
    Ok(certs)
}

/// A store trusting `certs` only.
fn store_of(certs: &[CertificateDer<'static>], path: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    for cert in certs {
        store
            .add(cert.clone())
            .map_err(|e| format!("ca file {path:?}: {e}"))?;
    }
    Ok(store)
}

/// A trust anchor the presented chain leads to, outside its validity period.
#[derive(thiserror::Error)]
#[error("trust anchor {subject} {why}")]
pub struct AnchorOutOfDate {
    subject: String,
    why: String,
}

// Shown through rustls's `Debug` of the error that carries it, so it reads as its message.
impl fmt::Debug for AnchorOutOfDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `Ok(not_after)` when the anchor `der` is valid at `now`, else why not.
fn anchor_in_date(der: &CertificateDer<'_>, now: UnixTime) -> Result<i64, AnchorOutOfDate> {
    let cert = x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| c)
        .map_err(|e| AnchorOutOfDate {
            subject: "(unreadable)".into(),
            why: format!("cannot be read to judge its dates: {e}"),
        })?;
    let v = cert.validity();
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let why = if now > v.not_after.timestamp() {
        format!("expired at {}", v.not_after)
    } else if now < v.not_before.timestamp() {
        format!("is not valid before {}", v.not_before)
    } else {
        return Ok(v.not_after.timestamp());
    };
    Err(AnchorOutOfDate {
        subject: cert.subject().to_string(),
        why,
    })
}

/// A verifier that remembers the chain it was shown, then verifies it (unless insecure).
#[derive(Debug)]
pub struct CapturingVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
    seen: Mutex<Vec<CertificateDer<'static>>>,
    /// Each certificate of the `ca` file, with a store trusting it alone.
    anchors: Vec<(CertificateDer<'static>, RootCertStore)>,
    /// The `ca` anchor the last chain led to.
    anchor: Mutex<Option<CertificateDer<'static>>>,
}

impl CapturingVerifier {
    /// A verifier for `settings`.
    pub fn new(settings: &TlsSettings) -> Result<Arc<Self>, String> {
        let provider = provider();
        let mut anchors = Vec::new();
        let inner = if settings.insecure {
            None
        } else {
            let roots = match &settings.ca {
                None => system_roots(),
                Some(path) => {
                    let certs = ca_certs(path)?;
                    for cert in &certs {
                        anchors.push((cert.clone(), store_of(std::slice::from_ref(cert), path)?));
                    }
                    Arc::new(store_of(&certs, path)?)
                }
            };
            Some(
                WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("cannot build a certificate verifier: {e}"))?,
            )
        };
        Ok(Arc::new(Self {
            inner,
            provider,
            seen: Mutex::new(Vec::new()),
            anchors,
            anchor: Mutex::new(None),
        }))
    }

    /// The `ca` certificate the last presented chain led to, if a `ca` file is used and the
    /// chain led to one of its certificates.
    #[must_use]
    pub fn anchor(&self) -> Option<CertificateDer<'static>> {
        self.anchor.lock().ok().and_then(|a| a.clone())
    }

    /// Judges the dates of the `ca` anchor a verified chain leads to. Each anchor is tried
    /// alone, so the one found is one a valid path ends at; of several, one in date is enough.
    fn judge_anchor(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        if self.anchors.is_empty() {
            return Ok(());
        }
        let leaf = ParsedCertificate::try_from(end_entity)?;
        let algs = self.provider.signature_verification_algorithms.all;
        let mut best: Option<(i64, &CertificateDer<'static>)> = None;
        let mut out_of_date: Option<(AnchorOutOfDate, &CertificateDer<'static>)> = None;
        for (der, store) in &self.anchors {
            if verify_server_cert_signed_by_trust_anchor(&leaf, store, intermediates, now, algs)
                .is_err()
            {
                continue;
            }
            match anchor_in_date(der, now) {
                Ok(until) if best.is_none_or(|(b, _)| until > b) => best = Some((until, der)),
                Ok(_) => {}
                Err(e) => {
                    out_of_date.get_or_insert((e, der));
                }
            }
        }
        let (found, verdict) = match (best, out_of_date) {
            (Some((_, der)), _) => (Some(der), Ok(())),
            (None, Some((e, der))) => (
                Some(der),
                Err(CertificateError::Other(OtherError(Arc::new(e))).into()),
            ),
            // The whole store verified the chain but no one anchor does: refuse, not guess.
            (None, None) => (None, Err(CertificateError::UnknownIssuer.into())),
        };
        if let Ok(mut a) = self.anchor.lock() {
            *a = found.cloned();
        }
        verdict
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
        if let Ok(mut a) = self.anchor.lock() {
            *a = None;
        }
        match &self.inner {
            Some(v) => {
                let verified = v.verify_server_cert(
                    end_entity,
                    intermediates,
                    server_name,
                    ocsp_response,
                    now,
                )?;
                self.judge_anchor(end_entity, intermediates, now)?;
                Ok(verified)
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
/// Resumption is off: every connection shows the server's certificate and has it verified.
pub fn client_config(verifier: Arc<dyn ServerCertVerifier>) -> Result<ClientConfig, String> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure tls: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.resumption = Resumption::disabled();
    Ok(config)
}

/// When `err` (or anything in its source chain) is a certificate the verifier refused, says why.
/// Such a refusal is a finding about the server (`fail`), not an infrastructure error.
#[must_use]
pub fn certificate_refusal(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(rustls::Error::InvalidCertificate(c)) = e.downcast_ref::<rustls::Error>() {
            return Some(refused(&format!("{c:?}")));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(rustls::Error::InvalidCertificate(c)) =
                inner.downcast_ref::<rustls::Error>()
        {
            return Some(refused(&format!("{c:?}")));
        }
        // Some layers (the HTTP client's connector) box the TLS error where it cannot be
        // downcast; rustls's own wording still identifies it.
        let text = e.to_string();
        if let Some(why) = text.strip_prefix("invalid peer certificate: ") {
            return Some(refused(why));
        }
        cur = e.source();
    }
    None
}

/// A refusal's reason, without the wrapping rustls puts around a verifier's own error.
fn refused(why: &str) -> String {
    let why = why
        .strip_prefix("Other(OtherError(")
        .and_then(|w| w.strip_suffix("))"))
        .unwrap_or(why);
    format!("certificate refused: {why}")
}
