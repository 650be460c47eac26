//! `tls` probe: the certificate a server presents: verified, days to expiry, SAN, issuer.
//!
//! The chain is verified (trust and name) unless the spec says `insecure: true`. A refused
//! certificate is a `fail` with the reason, and its facts are still reported: the probe keeps
//! the certificate it was shown even when it refuses it.

use super::net::{CapturingVerifier, TlsSettings, certificate_refusal, client_config};
use super::tcp::check_address;
use super::{FieldError, Judged, ProbeDefaults, Sample, positive_timeout};
use crate::spec::{TlsProbe, Unreachable};
use crate::text_match::TextMatcher;
use rustls::pki_types::ServerName;
use serde_json::{Map, Value};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use x509_parser::extensions::GeneralName;

/// A compiled `tls` probe.
#[derive(Debug)]
pub struct TlsCheck {
    address: String,
    server_name: ServerName<'static>,
    settings: TlsSettings,
    min_days: Option<u64>,
    san: Vec<String>,
    issuer: Option<TextMatcher>,
    pub(crate) timeout: Duration,
    pub(crate) unreachable: Unreachable,
}

/// What the leaf certificate says.
struct Leaf {
    not_after: i64,
    san: Vec<String>,
    issuer: String,
    subject: String,
}

fn normalise_name(s: &str) -> String {
    s.parse::<IpAddr>().map_or_else(
        |_| s.trim_end_matches('.').to_ascii_lowercase(),
        |ip| ip.to_string(),
    )
}

fn read_leaf(der: &[u8]) -> Result<Leaf, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    let mut san = Vec::new();
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => san.push(normalise_name(d)),
                GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*b).ok().map(IpAddr::from),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        san.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(Leaf {
        not_after: cert.validity().not_after.timestamp(),
        san,
        issuer: cert.issuer().to_string(),
        subject: cert.subject().to_string(),
    })
}

impl TlsCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: TlsProbe, d: &ProbeDefaults) -> Result<(TlsProbe, Self), FieldError> {
        check_address(&p.address, "/address")?;
        let host = p
            .address
            .rsplit_once(':')
            .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_owned())
            .unwrap_or_default();
        let name = p.server_name.clone().unwrap_or(host);
        let server_name = ServerName::try_from(name.clone()).map_err(|_| {
            FieldError::new(
                "/server_name",
                format!("{name:?} is not a valid server name"),
            )
        })?;
        p.server_name = Some(name);
        let insecure = p.insecure.unwrap_or(false);
        p.insecure = Some(insecure);
        let issuer = p
            .issuer
            .as_ref()
            .map(TextMatcher::compile)
            .transpose()
            .map_err(|m| FieldError::new("/issuer", m))?;
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let unreachable = super::unreachable_setting(&mut p.unreachable);
        let san = p.san.iter().flatten().map(|s| normalise_name(s)).collect();
        Ok((
            p.clone(),
            Self {
                address: p.address,
                server_name,
                settings: TlsSettings { ca: p.ca, insecure },
                min_days: p.min_days,
                san,
                issuer,
                timeout: timeout.std(),
                unreachable,
            },
        ))
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let verifier = match CapturingVerifier::new(&self.settings) {
            Ok(v) => v,
            Err(e) => return Sample::error(e),
        };
        let config = match client_config(verifier.clone()) {
            Ok(c) => c,
            Err(e) => return Sample::error(e),
        };
        let tcp = match tokio::net::TcpStream::connect(&self.address).await {
            Ok(s) => s,
            Err(e) => {
                return Sample::unreachable(format!("cannot connect to {}: {e}", self.address));
            }
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let refusal = match connector.connect(self.server_name.clone(), tcp).await {
            Ok(_) => None,
            Err(e) => match certificate_refusal(&e) {
                Some(why) => Some(why),
                None => {
                    return Sample::error(format!(
                        "tls handshake with {} failed: {e}",
                        self.address
                    ));
                }
            },
        };
        let Some(der) = verifier.seen().into_iter().next() else {
            return Sample::error(format!("{} presented no certificate", self.address));
        };
        let leaf = match read_leaf(&der) {
            Ok(l) => l,
            Err(e) => return Sample::error(e),
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let days_left = (leaf.not_after - now).div_euclid(86_400);
        let mut f = Map::new();
        f.insert(
            "verified".into(),
            Value::Bool(refusal.is_none() && !self.settings.insecure),
        );
        f.insert(
            "not_after".into(),
            Value::String(
                verdict_core::contracts::Timestamp::from_unix_nanos(
                    i128::from(leaf.not_after) * 1_000_000_000,
                )
                .to_string(),
            ),
        );
        f.insert("days_left".into(), Value::from(days_left));
        f.insert(
            "san".into(),
            Value::Array(leaf.san.iter().cloned().map(Value::String).collect()),
        );
        f.insert("issuer".into(), Value::String(leaf.issuer.clone()));
        f.insert("subject".into(), Value::String(leaf.subject.clone()));
        f.insert(
            "certificate_sha256".into(),
            Value::String(verdict_core::digest::raw(&der).to_string()),
        );
        let mut sample = Sample::observed(f.clone(), None);
        if !judge {
            f.remove("days_left");
            sample.snapshot = Some(Value::Object(f));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = self.judge(refusal, &leaf, days_left);
        sample.judged(verdict)
    }

    fn judge(
        &self,
        refusal: Option<String>,
        leaf: &Leaf,
        days_left: i64,
    ) -> Result<String, Judged> {
        if let Some(why) = refusal {
            return Err(Judged::Fail(why));
        }
        if let Some(min) = self.min_days
            && days_left < i64::try_from(min).unwrap_or(i64::MAX)
        {
            return Err(Judged::Fail(format!(
                "certificate expires in {days_left} days, expected at least {min}"
            )));
        }
        if let Some(missing) = self.san.iter().find(|s| !leaf.san.contains(s)) {
            return Err(Judged::Fail(format!(
                "certificate SAN {:?} lacks {missing}",
                leaf.san
            )));
        }
        if let Some(m) = &self.issuer {
            m.check("issuer", &leaf.issuer).map_err(Judged::Fail)?;
        }
        Ok(format!("certificate valid for {days_left} more days"))
    }
}
