//! `dns` probe: one lookup, against the system's resolvers or a given server.
//!
//! Answers are compared as values, not text: addresses are parsed (so `::1` equals
//! `0:0:0:0:0:0:0:1`), names are compared without case or the final dot. Nothing is cached
//! between observations, so a converging check sees each change as soon as the server does.
//! Only answers about the name asked for count: records owned by it or by a name its CNAME
//! chain in the same answer leads to. A server can put records for any name in an answer
//! section, and one owned by another name says nothing about this one. An answer whose response
//! code is not NOERROR (NXDOMAIN among them) finds nothing, whatever records it carries.

use super::{FieldError, Judged, ProbeDefaults, Sample, facts, positive_timeout};
use crate::spec::{DnsProbe, RecordKind};
use hickory_resolver::Resolver;
use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::lookup::Lookup;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::proto::rr::{Name, RData, Record};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A compiled `dns` probe.
#[derive(Debug)]
pub struct DnsCheck {
    name: String,
    kind: RecordKind,
    server: Option<SocketAddr>,
    resolves: bool,
    contains: Vec<String>,
    equals: Option<BTreeSet<String>>,
    pub(crate) timeout: Duration,
}

fn record_type(k: RecordKind) -> RecordType {
    match k {
        RecordKind::A => RecordType::A,
        RecordKind::Aaaa => RecordType::AAAA,
        RecordKind::Cname => RecordType::CNAME,
        RecordKind::Mx => RecordType::MX,
        RecordKind::Txt => RecordType::TXT,
        RecordKind::Ns => RecordType::NS,
        RecordKind::Srv => RecordType::SRV,
    }
}

/// One answer in comparable form.
fn normalise(kind: RecordKind, text: &str) -> String {
    match kind {
        RecordKind::A | RecordKind::Aaaa => text
            .parse::<IpAddr>()
            .map_or_else(|_| text.to_owned(), |ip| ip.to_string()),
        RecordKind::Txt => text.to_owned(),
        RecordKind::Cname | RecordKind::Mx | RecordKind::Ns | RecordKind::Srv => {
            text.trim_end_matches('.').to_ascii_lowercase()
        }
    }
}

/// A domain name in comparable form: no case, no final dot.
fn owner_key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn name_key(name: &Name) -> String {
    owner_key(&name.to_ascii())
}

/// The records of `lookup` of type `rtype` that answer `asked`: owned by the name asked, or by
/// a name the CNAME records in the same answer lead to from it. When `asked` is relative
/// the resolver may have completed it with a search domain; the name it queried then counts
/// as the name asked.
///
/// Only the answer section counts. Following a CNAME, the resolver lifts records of the target
/// from the last response's authority and additional sections into the answer, and those
/// sections stay in the lookup; a counted record also found there cannot be placed, and is an
/// error.
fn answers_for<'a>(
    lookup: &'a Lookup,
    asked: &str,
    rtype: RecordType,
) -> Result<Vec<&'a Record>, String> {
    // Read as the resolver reads it, so an internationalised name compares in its ASCII form.
    let (asked_key, relative) = Name::from_utf8(asked).map_or_else(
        |_| (owner_key(asked), !asked.ends_with('.')),
        |n| (name_key(&n), !n.is_fqdn()),
    );
    let queried = name_key(lookup.query().name());
    let mut owners = BTreeSet::from([asked_key.clone()]);
    if relative && queried.starts_with(&format!("{asked_key}.")) {
        owners.insert(queried);
    }
    // Each pass adds the targets of CNAMEs owned by a name already reached, so the chain is
    // followed whatever order its records come in; a pass that adds nothing ends it.
    loop {
        let before = owners.len();
        for r in lookup.answers() {
            if let RData::CNAME(target) = &r.data
                && owners.contains(&name_key(&r.name))
            {
                owners.insert(name_key(&target.0));
            }
        }
        if owners.len() == before {
            break;
        }
    }
    let counted: Vec<&Record> = lookup
        .answers()
        .iter()
        .filter(|r| r.record_type() == rtype && owners.contains(&name_key(&r.name)))
        .collect();
    let same = |a: &Record, b: &Record| {
        a.record_type() == b.record_type()
            && name_key(&a.name) == name_key(&b.name)
            && a.data == b.data
    };
    let outside = lookup.authorities().iter().chain(lookup.additionals());
    for r in outside {
        if counted.iter().any(|c| same(c, r)) {
            return Err(format!(
                "the answer's record {} {} {} is also outside its answer section; which section the server gave it in cannot be told",
                r.name,
                r.record_type(),
                r.data
            ));
        }
    }
    Ok(counted)
}

fn parse_server(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

impl DnsCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: DnsProbe, d: &ProbeDefaults) -> Result<(DnsProbe, Self), FieldError> {
        if p.name.trim().is_empty() {
            return Err(FieldError::new("/name", "name is empty"));
        }
        let kind = p.record_type.unwrap_or(RecordKind::A);
        p.record_type = Some(kind);
        let server = match &p.server {
            Some(s) => Some(parse_server(s).ok_or_else(|| {
                FieldError::new("/server", format!("server {s:?} must be an ip or ip:port"))
            })?),
            None => None,
        };
        let resolves = p.resolves.unwrap_or(true);
        p.resolves = Some(resolves);
        if !resolves && (p.contains.is_some() || p.equals.is_some()) {
            return Err(FieldError::new(
                "/resolves",
                "resolves: false cannot be combined with contains or equals",
            ));
        }
        if matches!(kind, RecordKind::A | RecordKind::Aaaa) {
            for (field, list) in [("contains", &p.contains), ("equals", &p.equals)] {
                for (i, a) in list.iter().flatten().enumerate() {
                    if a.parse::<IpAddr>().is_err() {
                        return Err(FieldError::new(
                            format!("/{field}/{i}"),
                            format!("{a:?} is not an ip address"),
                        ));
                    }
                }
            }
        }
        let contains = p
            .contains
            .iter()
            .flatten()
            .map(|s| normalise(kind, s))
            .collect();
        let equals = p
            .equals
            .as_ref()
            .map(|l| l.iter().map(|s| normalise(kind, s)).collect());
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        Ok((
            p.clone(),
            Self {
                name: p.name,
                kind,
                server,
                resolves,
                contains,
                equals,
                timeout: timeout.std(),
            },
        ))
    }

    fn resolver(&self) -> Result<Resolver<TokioRuntimeProvider>, String> {
        let mut builder = match self.server {
            Some(addr) => {
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for c in &mut ns.connections {
                    c.port = addr.port();
                }
                let mut b = Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![ns]),
                    TokioRuntimeProvider::default(),
                );
                b.options_mut().use_hosts_file = ResolveHosts::Never;
                b
            }
            None => Resolver::builder_tokio()
                .map_err(|e| format!("cannot read the system's dns configuration: {e}"))?,
        };
        let opts = builder.options_mut();
        opts.cache_size = 0;
        opts.timeout = self.timeout;
        opts.attempts = 1;
        builder
            .build()
            .map_err(|e| format!("cannot build a dns resolver: {e}"))
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let resolver = match self.resolver() {
            Ok(r) => r,
            Err(e) => return Sample::error(e),
        };
        let mut refused_code = None;
        let answers: BTreeSet<String> = match resolver
            .lookup(self.name.as_str(), record_type(self.kind))
            .await
        {
            // Records beside NXDOMAIN (or another failure code) are not an answer: the server
            // said the name has none.
            Ok(lookup) if lookup.message().metadata.response_code != ResponseCode::NoError => {
                refused_code = Some(format!("{:?}", lookup.message().metadata.response_code));
                BTreeSet::new()
            }
            Ok(lookup) => match answers_for(&lookup, &self.name, record_type(self.kind)) {
                Ok(records) => records
                    .into_iter()
                    .map(|r| normalise(self.kind, &r.data.to_string()))
                    .collect(),
                Err(e) => return Sample::error(format!("lookup of {}: {e}", self.name)),
            },
            Err(e) if e.is_no_records_found() => BTreeSet::new(),
            Err(e) => return Sample::error(format!("lookup of {} failed: {e}", self.name)),
        };
        let list: Vec<Value> = answers.iter().cloned().map(Value::String).collect();
        let mut f = facts([("answers", Value::Array(list.clone()))]);
        if let Some(code) = &refused_code {
            f.insert("response_code".into(), Value::String(code.clone()));
        }
        let mut sample = Sample::observed(f, None);
        if !judge {
            sample.snapshot = Some(json!({"answers": list}));
            return sample.judged(Ok("observed".into()));
        }
        let shown = answers.iter().cloned().collect::<Vec<_>>().join(", ");
        let verdict = if answers.is_empty() {
            if self.resolves {
                let code = refused_code
                    .as_ref()
                    .map_or_else(String::new, |c| format!(" (the answer is {c})"));
                Err(Judged::Fail(format!(
                    "{} has no {:?} record{code}",
                    self.name, self.kind
                )))
            } else {
                Ok(format!("{} does not resolve", self.name))
            }
        } else if !self.resolves {
            Err(Judged::Fail(format!("{} resolves to {shown}", self.name)))
        } else if let Some(missing) = self.contains.iter().find(|c| !answers.contains(*c)) {
            Err(Judged::Fail(format!(
                "{} resolves to {shown}, without {missing}",
                self.name
            )))
        } else if let Some(eq) = &self.equals
            && *eq != answers
        {
            let want = eq.iter().cloned().collect::<Vec<_>>().join(", ");
            Err(Judged::Fail(format!(
                "{} resolves to {shown}, expected exactly {want}",
                self.name
            )))
        } else {
            Ok(format!("{} resolves to {shown}", self.name))
        };
        sample.judged(verdict)
    }
}
