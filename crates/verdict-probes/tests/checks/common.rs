//! Real servers on loopback and small helpers shared by the tests.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use verdict_probes::load::{self, Format, Spec};
use verdict_probes::result::{CriterionResult, Report};
use verdict_probes::runner::{self, Quiet, RunOptions, Stopper};

pub fn spec(yaml: &str) -> Spec {
    spec_vars(yaml, &[])
}

pub fn spec_vars(yaml: &str, vars: &[(&str, &str)]) -> Spec {
    let v: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    match load::load_bytes(yaml.as_bytes(), Format::Yaml, &v) {
        Ok(s) => {
            // Every spec the loader accepts is one its schema accepts, and so is every
            // normalised definition, as a criterion of a spec of its own.
            let (doc, _) = verdict_probes::yaml::parse(yaml).unwrap();
            assert_schema_accepts(&doc);
            for c in &s.checks {
                assert_schema_accepts(&json!({"version": 1, "criteria": [c.definition]}));
            }
            s
        }
        Err(e) => panic!("spec refused: {e}\n{yaml}"),
    }
}

/// The check-spec schema, compiled once.
pub fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        jsonschema::draft202012::new(&verdict_probes::schema::check_spec_schema()).unwrap()
    })
}

/// What the schema finds wrong with a spec (empty when it validates).
pub fn schema_errors(doc: &Value) -> Vec<String> {
    schema()
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

pub fn assert_schema_accepts(doc: &Value) {
    let errors = schema_errors(doc);
    assert!(errors.is_empty(), "schema refused {doc}: {errors:#?}");
}

pub fn problem(yaml: &str) -> verdict_probes::error::Problem {
    match load::load_bytes(yaml.as_bytes(), Format::Yaml, &BTreeMap::new()) {
        Ok(_) => panic!("spec accepted:\n{yaml}"),
        Err(e) => e
            .problem()
            .cloned()
            .unwrap_or_else(|| panic!("not a located problem: {e}")),
    }
}

pub async fn run(spec: &Spec) -> Report {
    run_with(spec, RunOptions::default()).await
}

pub async fn run_with(spec: &Spec, opts: RunOptions) -> Report {
    runner::run(spec, opts, Arc::new(Quiet), &Stopper::new()).await
}

/// Runs `spec` with `--during`, the agent being `sh -c script`.
pub async fn run_during(spec: &Spec, script: &str) -> Report {
    let agent = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    run_with(
        spec,
        RunOptions {
            agent: Some(agent),
            ..RunOptions::default()
        },
    )
    .await
}

pub fn result<'a>(report: &'a Report, id: &str) -> &'a CriterionResult {
    report
        .criteria
        .iter()
        .find(|r| r.id.as_str() == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

/// One scripted HTTP answer.
#[derive(Clone, Debug)]
pub struct Step {
    pub status: u16,
    pub body: String,
    pub delay_ms: u64,
}

pub fn step(status: u16, body: &str) -> Step {
    Step {
        status,
        body: body.to_owned(),
        delay_ms: 0,
    }
}

pub fn slow(status: u16, body: &str, delay_ms: u64) -> Step {
    Step {
        status,
        body: body.to_owned(),
        delay_ms,
    }
}

#[derive(Default)]
struct Scripts {
    queues: HashMap<String, VecDeque<Step>>,
    hits: HashMap<String, usize>,
}

/// A loopback HTTP server whose answers the test scripts: `/s/NAME` answers the next step of
/// queue NAME (the last step repeats); `/redirect/NAME` redirects there; `/goto?to=URL`
/// redirects to URL, `/goto` to itself; `/echo` answers the request as JSON.
pub struct Http {
    pub addr: SocketAddr,
    state: Arc<Mutex<Scripts>>,
}

async fn scripted(
    State(st): State<Arc<Mutex<Scripts>>>,
    Path(name): Path<String>,
) -> impl IntoResponse {
    let step = {
        let mut s = st.lock().unwrap();
        *s.hits.entry(name.clone()).or_default() += 1;
        let q = s.queues.entry(name).or_default();
        if q.len() > 1 {
            q.pop_front()
        } else {
            q.front().cloned()
        }
    };
    let step = step.unwrap_or_else(|| self::step(404, "no script"));
    if step.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    let mut headers = HeaderMap::new();
    headers.insert("x-served-by", "verdict-test".parse().unwrap());
    (
        StatusCode::from_u16(step.status).unwrap(),
        headers,
        step.body,
    )
}

async fn redirect(Path(name): Path<String>) -> impl IntoResponse {
    (
        StatusCode::FOUND,
        [(axum::http::header::LOCATION, format!("/s/{name}"))],
        "moved",
    )
}

async fn goto(
    axum::extract::Query(q): axum::extract::Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let to = q.get("to").cloned().unwrap_or_default();
    (
        StatusCode::FOUND,
        [(axum::http::header::LOCATION, to)],
        "moved",
    )
}

async fn echo(method: Method, headers: HeaderMap, body: String) -> impl IntoResponse {
    let h: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    axum::Json(serde_json::json!({"method": method.as_str(), "headers": h, "body": body}))
}

impl Http {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(Scripts::default()));
        let app = axum::Router::new()
            .route("/s/{name}", any(scripted))
            .route("/echo", any(echo))
            .route("/redirect/{name}", any(redirect))
            .route("/goto", any(goto))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, state }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn script(&self, name: &str, steps: Vec<Step>) {
        self.state
            .lock()
            .unwrap()
            .queues
            .insert(name.to_owned(), steps.into());
    }

    pub fn hits(&self, name: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .hits
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

/// A certificate authority and a leaf it signed, made for one test.
pub struct Pki {
    /// Keeps the CA file alive as long as the test needs it.
    _dir: tempfile::TempDir,
    pub ca_path: std::path::PathBuf,
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
}

/// `not_after` as (year, month, day).
pub fn pki(sans: &[&str], not_after: (i32, u8, u8)) -> Pki {
    let mut leaf =
        rcgen::CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
            .unwrap();
    leaf.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
    issue(leaf, None)
}

/// Sets a certificate to expire `secs` seconds from now.
pub fn expire_in(params: &mut rcgen::CertificateParams, secs: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + now + Duration::from_secs(secs);
}

/// A test CA and a leaf for `leaf` (its subject is set here, its validity starts in 2020),
/// signed by the CA, or by `intermediate` (a CA the root signed) when one is given; the server
/// presents the leaf and the certificate that signed it.
pub fn issue(
    leaf: rcgen::CertificateParams,
    intermediate: Option<rcgen::CertificateParams>,
) -> Pki {
    issue_under(
        rcgen::CertificateParams::new(Vec::<String>::new()).unwrap(),
        leaf,
        intermediate,
    )
}

/// As [`issue`], with the root made from `ca` (its dates kept, the rest set here).
pub fn issue_under(
    mut ca: rcgen::CertificateParams,
    mut leaf: rcgen::CertificateParams,
    intermediate: Option<rcgen::CertificateParams>,
) -> Pki {
    use rcgen::{BasicConstraints, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Verdict Test CA");
    ca.distinguished_name
        .push(DnType::OrganizationName, "Verdict Tests");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let root = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    let (leaf_cert, signer) = match intermediate {
        None => (
            leaf.signed_by(&leaf_key, &root).unwrap(),
            ca_cert.der().clone(),
        ),
        Some(mut mid) => {
            let mid_key = KeyPair::generate().unwrap();
            mid.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            mid.distinguished_name
                .push(DnType::CommonName, "Verdict Test Intermediate");
            mid.not_before = rcgen::date_time_ymd(2020, 1, 1);
            let mid_cert = mid.signed_by(&mid_key, &root).unwrap();
            let mid = Issuer::new(mid, mid_key);
            (
                leaf.signed_by(&leaf_key, &mid).unwrap(),
                mid_cert.der().clone(),
            )
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    Pki {
        _dir: dir,
        ca_path,
        chain: vec![leaf_cert.der().clone(), signer],
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
    }
}

/// A loopback HTTPS server answering every request `200 ok` (hand-written HTTP/1.1).
pub async fn https(pki: &Pki) -> SocketAddr {
    https_answering(
        pki,
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 9\r\nconnection: close\r\n\r\nsecure ok".to_vec(),
    )
    .await
}

/// A loopback HTTPS server answering every request with `answer`, as written.
pub async fn https_answering(pki: &Pki, answer: Vec<u8>) -> SocketAddr {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(pki.chain.clone(), pki.key.clone_key())
    .unwrap();
    serve_tls(config, answer).await
}

/// Shows `first` in the first handshake and `then` in every later one.
#[derive(Debug)]
struct Swapping {
    first: Arc<rustls::sign::CertifiedKey>,
    then: Arc<rustls::sign::CertifiedKey>,
    handshakes: std::sync::atomic::AtomicUsize,
}

impl rustls::server::ResolvesServerCert for Swapping {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let n = self
            .handshakes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(if n == 0 { &self.first } else { &self.then }.clone())
    }
}

/// A loopback HTTPS server answering `200 ok` that presents `first`'s certificate in its first
/// handshake and `then`'s afterwards, and resumes sessions (rustls's default), as a server
/// that swapped its certificate would.
pub async fn https_swapping(first: &Pki, then: &Pki) -> SocketAddr {
    let provider = rustls::crypto::ring::default_provider();
    let key = |p: &Pki| {
        Arc::new(
            rustls::sign::CertifiedKey::from_der(p.chain.clone(), p.key.clone_key(), &provider)
                .unwrap(),
        )
    };
    let resolver = Swapping {
        first: key(first),
        then: key(then),
        handshakes: 0.into(),
    };
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider.clone()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    serve_tls(
        config,
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_vec(),
    )
    .await
}

/// Serves `config` on loopback, answering every request with `answer`.
async fn serve_tls(config: rustls::ServerConfig, answer: Vec<u8>) -> SocketAddr {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let answer: Arc<[u8]> = answer.into();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let answer = answer.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if read_head(&mut tls, &mut Vec::new()).await {
                    let _ = tls.write_all(&answer).await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// Reads one request head (a test's requests have no body) into `buf`, keeping what follows
/// it there; false at the end of the stream.
async fn read_head(stream: &mut (impl AsyncReadExt + Unpin), buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            return true;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A loopback HTTP server answering every request with `answer`, as written, then closing the
/// connection: for answers a framework would not send (a field twice, a coding it did not
/// apply).
pub async fn raw_http(answer: Vec<u8>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let answer: Arc<[u8]> = answer.into();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                if read_head(&mut tcp, &mut Vec::new()).await {
                    let _ = tcp.write_all(&answer).await;
                }
                let _ = tcp.shutdown().await;
            });
        }
    });
    addr
}

/// A loopback HTTP server that accepts one connection and then closes its listener, so every
/// later connection is refused; on the one it accepted it answers `200 ok` to each request
/// for as long as the client keeps it open, whatever the client says about closing it.
pub async fn one_connection_http() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let Ok((mut tcp, _)) = listener.accept().await else {
            return;
        };
        drop(listener);
        let mut buf = Vec::new();
        while read_head(&mut tcp, &mut buf).await {
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if tcp.write_all(answer).await.is_err() {
                return;
            }
        }
    });
    addr
}

/// A record a test DNS server puts in an answer section: an address or an alias, each with
/// its owner.
pub enum Rr {
    A(&'static str, Ipv4Addr),
    Cname(&'static str, &'static str),
    /// Not a record: the answer's code is NXDOMAIN, whatever records it carries.
    NxDomain,
    /// An address record in the additional section, not the answer.
    Additional(&'static str, Ipv4Addr),
}

/// A loopback DNS server on UDP answering A queries from `records`; other names are NXDOMAIN.
pub async fn dns(records: &[(&'static str, &[Ipv4Addr])]) -> SocketAddr {
    let table = records
        .iter()
        .map(|(n, ips)| (*n, ips.iter().map(|ip| Rr::A(n, *ip)).collect()))
        .collect();
    dns_answering(table).await
}

/// A loopback DNS server on UDP: to an A query for a name in `answers` it answers the records
/// listed there, whatever names own them; other names are NXDOMAIN.
pub async fn dns_answering(answers: Vec<(&'static str, Vec<Rr>)>) -> SocketAddr {
    use hickory_proto::op::{Message, ResponseCode};
    use hickory_proto::rr::rdata::{A, CNAME};
    use hickory_proto::rr::{Name, RData, Record, RecordType};
    let table: HashMap<String, Vec<Rr>> = answers
        .into_iter()
        .map(|(n, rrs)| (n.trim_end_matches('.').to_ascii_lowercase(), rrs))
        .collect();
    let sock = tokio::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        loop {
            let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let Ok(req) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
            resp.metadata.recursion_desired = req.metadata.recursion_desired;
            resp.metadata.recursion_available = true;
            resp.metadata.authoritative = true;
            resp.add_queries(req.queries.iter().cloned());
            if let Some(q) = req.queries.first() {
                let name = q
                    .name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                match table.get(&name) {
                    Some(rrs) if q.query_type() == RecordType::A => {
                        for rr in rrs {
                            let (owner, data) = match rr {
                                Rr::NxDomain => {
                                    resp.metadata.response_code = ResponseCode::NXDomain;
                                    continue;
                                }
                                Rr::Additional(owner, ip) => {
                                    resp.add_additional(Record::from_rdata(
                                        Name::from_ascii(owner).unwrap(),
                                        60,
                                        RData::A(A(*ip)),
                                    ));
                                    continue;
                                }
                                Rr::A(owner, ip) => (owner, RData::A(A(*ip))),
                                Rr::Cname(owner, target) => (
                                    owner,
                                    RData::CNAME(CNAME(Name::from_ascii(target).unwrap())),
                                ),
                            };
                            resp.add_answer(Record::from_rdata(
                                Name::from_ascii(owner).unwrap(),
                                60,
                                data,
                            ));
                        }
                    }
                    Some(_) => {}
                    None => resp.metadata.response_code = ResponseCode::NXDomain,
                }
            }
            if let Ok(bytes) = resp.to_vec() {
                let _ = sock.send_to(&bytes, peer).await;
            }
        }
    });
    addr
}

/// A TCP port that was just free (nothing listens on it).
pub async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    l.local_addr().unwrap().port()
}
