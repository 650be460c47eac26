//! `tls` probe: the certificate a server presents: verified, days to expiry, SAN, issuer.
//!
//! The chain is verified (trust and name) unless the spec says `insecure: true`. A refused
//! certificate is a `fail` with the reason, and its facts are still reported: the probe keeps
//! the certificate it was shown even when it refuses it. `min_days` is judged on the
//! certificate of the presented chain that expires first, leaf or not: a chain stops verifying
//! when any of its certificates expires. With a `ca` file, the anchor of the file the chain
//! leads to counts too (it is judged after the presented ones), and one out of date refuses
//! the chain: webpki would not look at its dates. A SAN expectation that is an address is met only by an
//! iPAddress SAN, never by a dNSName spelling that address.

use super::net::{CapturingVerifier, TlsSettings, certificate_refusal, client_config};
use super::tcp::check_address;
use super::{FieldError, Judged, ProbeDefaults, Sample, positive_timeout};
use crate::spec::{TlsProbe, Unreachable};
use crate::text_match::TextMatcher;
use rustls::pki_types::{CertificateDer, ServerName};
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
    san: Vec<San>,
    issuer: Option<TextMatcher>,
    pub(crate) timeout: Duration,
    pub(crate) unreachable: Unreachable,
}

/// A subjectAltName entry, by its kind: a dNSName spelling an address is not that address.
#[derive(Debug, Clone, PartialEq, Eq)]
enum San {
    Dns(String),
    Ip(IpAddr),
}

impl San {
    /// An expected entry: an address when it parses as one, else a name.
    fn expected(s: &str) -> Self {
        s.parse::<IpAddr>().map_or_else(
            |_| Self::Dns(s.trim_end_matches('.').to_ascii_lowercase()),
            Self::Ip,
        )
    }

    /// As shown in facts and reasons; a dNSName that spells an address is marked so that it is
    /// not read as one.
    fn shown(&self) -> String {
        match self {
            Self::Dns(d) if d.parse::<IpAddr>().is_ok() => format!("dns:{d}"),
            Self::Dns(d) => d.clone(),
            Self::Ip(ip) => ip.to_string(),
        }
    }
}

/// What the leaf certificate says.
struct Leaf {
    not_after: i64,
    san: Vec<San>,
    issuer: String,
    subject: String,
}

/// The certificate of the presented chain (and its `ca` anchor) that expires first.
struct FirstToExpire {
    /// Its place in the chain: 0 is the leaf; the anchor comes after the presented ones.
    position: usize,
    /// It is the `ca` anchor, not a presented certificate.
    anchor: bool,
    subject: String,
    not_after: i64,
}

impl FirstToExpire {
    fn named(&self) -> String {
        let place = match self.position {
            _ if self.anchor => "the trust anchor".to_owned(),
            0 => "the leaf".to_owned(),
            n => format!("chain certificate {n}"),
        };
        format!("{place} ({})", self.subject)
    }
}

fn parse(der: &[u8]) -> Result<x509_parser::certificate::X509Certificate<'_>, String> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| c)
        .map_err(|e| format!("cannot parse the certificate: {e}"))
}

fn read_leaf(der: &[u8]) -> Result<Leaf, String> {
    let cert = parse(der)?;
    let mut san = Vec::new();
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => {
                    san.push(San::Dns(d.trim_end_matches('.').to_ascii_lowercase()));
                }
                GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*b).ok().map(IpAddr::from),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        san.push(San::Ip(ip));
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

/// The certificate of `chain` (leaf first), then `anchor` unless the server presented it, that
/// expires first; the earliest in that order when several expire together. A certificate that
/// cannot be read is an error: the chain's expiry could not be judged.
fn first_to_expire(
    chain: &[CertificateDer<'_>],
    anchor: Option<&CertificateDer<'_>>,
) -> Result<FirstToExpire, String> {
    let anchor = anchor.filter(|a| !chain.contains(a));
    let mut first: Option<FirstToExpire> = None;
    for (position, der) in chain.iter().chain(anchor).enumerate() {
        let cert = parse(der).map_err(|e| format!("chain certificate {position}: {e}"))?;
        let not_after = cert.validity().not_after.timestamp();
        if first.as_ref().is_none_or(|f| not_after < f.not_after) {
            first = Some(FirstToExpire {
                position,
                anchor: position >= chain.len(),
                subject: cert.subject().to_string(),
                not_after,
            });
        }
    }
    first.ok_or_else(|| "no certificate was presented".to_owned())
}

fn timestamp(unix: i64) -> Value {
    Value::String(
        verdict_core::contracts::Timestamp::from_unix_nanos(i128::from(unix) * 1_000_000_000)
            .to_string(),
    )
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
        let san = p.san.iter().flatten().map(|s| San::expected(s)).collect();
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
        let chain = verifier.seen();
        let anchor = verifier.anchor();
        let Some(der) = chain.first() else {
            return Sample::error(format!("{} presented no certificate", self.address));
        };
        let (leaf, first) =
            match read_leaf(der).and_then(|l| Ok((l, first_to_expire(&chain, anchor.as_ref())?))) {
                Ok(read) => read,
                Err(e) => return Sample::error(e),
            };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let days = |not_after: i64| (not_after - now).div_euclid(86_400);
        let mut f = Map::new();
        f.insert(
            "verified".into(),
            Value::Bool(refusal.is_none() && !self.settings.insecure),
        );
        f.insert("not_after".into(), timestamp(leaf.not_after));
        f.insert("days_left".into(), Value::from(days(leaf.not_after)));
        let mut expires_first = Map::new();
        expires_first.insert("position".into(), Value::from(first.position));
        expires_first.insert("anchor".into(), Value::Bool(first.anchor));
        expires_first.insert("subject".into(), Value::String(first.subject.clone()));
        expires_first.insert("not_after".into(), timestamp(first.not_after));
        expires_first.insert("days_left".into(), Value::from(days(first.not_after)));
        f.insert("chain_expires_first".into(), Value::Object(expires_first));
        f.insert(
            "san".into(),
            Value::Array(leaf.san.iter().map(|s| Value::String(s.shown())).collect()),
        );
        f.insert("issuer".into(), Value::String(leaf.issuer.clone()));
        f.insert("subject".into(), Value::String(leaf.subject.clone()));
        f.insert(
            "certificate_sha256".into(),
            Value::String(verdict_core::digest::raw(der).to_string()),
        );
        let mut sample = Sample::observed(f.clone(), None);
        if !judge {
            // Days left change by themselves; a snapshot keeps what the server chose.
            f.remove("days_left");
            if let Some(Value::Object(e)) = f.get_mut("chain_expires_first") {
                e.remove("days_left");
            }
            sample.snapshot = Some(Value::Object(f));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = self.judge(refusal, &leaf, &first, days(first.not_after));
        sample.judged(verdict)
    }

    fn judge(
        &self,
        refusal: Option<String>,
        leaf: &Leaf,
        first: &FirstToExpire,
        days_left: i64,
    ) -> Result<String, Judged> {
        if let Some(why) = refusal {
            return Err(Judged::Fail(why));
        }
        // `insecure: true` waives the chain's trust, never its dates: an expired certificate
        // is no valid one, verified or not.
        if days_left < 0 {
            return Err(Judged::Fail(format!(
                "certificate chain expired {} days ago, when {} did",
                days_left.unsigned_abs(),
                first.named()
            )));
        }
        if let Some(min) = self.min_days
            && days_left < i64::try_from(min).unwrap_or(i64::MAX)
        {
            return Err(Judged::Fail(format!(
                "certificate chain expires in {days_left} days, when {} does, expected at least {min}",
                first.named()
            )));
        }
        if let Some(missing) = self.san.iter().find(|s| !leaf.san.contains(s)) {
            let shown: Vec<String> = leaf.san.iter().map(San::shown).collect();
            let what = match missing {
                San::Ip(ip) => format!("the address {ip}"),
                San::Dns(d) => d.clone(),
            };
            return Err(Judged::Fail(format!(
                "certificate SAN {shown:?} lacks {what}"
            )));
        }
        if let Some(m) = &self.issuer {
            m.check("issuer", &leaf.issuer).map_err(Judged::Fail)?;
        }
        if self.settings.insecure {
            // Nothing here was verified: the reason must not read as if it had been.
            return Ok(format!(
                "certificate chain not verified (insecure: true); it expires in {days_left} days, when {} does",
                first.named()
            ));
        }
        Ok(format!(
            "certificate chain valid for {days_left} more days (until {} expires)",
            first.named()
        ))
    }
}
