//! The check spec as written (docs/checks.md): documents, criteria and probe definitions.
//!
//! Every struct refuses unknown fields. Optional fields stay `None` as written; normalisation
//! ([`crate::load`]) fills in every default that applies, and the normalised criterion is
//! serialised with these same types, so a normalised definition is itself a valid criterion.

use crate::duration::Dur;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use verdict_core::contracts::{CriterionRole, Id};

/// The top of a spec file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpecDoc {
    /// Spec format version; must be 1.
    #[schemars(range(min = 1, max = 1))]
    pub version: u64,
    /// Values for `{{name}}` references (strings, numbers or booleans).
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::vars")]
    pub vars: BTreeMap<String, Value>,
    /// Defaults for every criterion.
    #[serde(default)]
    pub defaults: Defaults,
    /// The criteria, read one by one so errors can name them.
    #[schemars(with = "Vec<CriterionDef>", length(min = 1))]
    pub criteria: Vec<Value>,
}

/// Spec-wide defaults.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Converge deadline (default 60s).
    pub timeout: Option<Dur>,
    /// Converge and hold interval (default 1s).
    pub interval: Option<Dur>,
    /// Each probe's own timeout (default 10s).
    pub probe_timeout: Option<Dur>,
    /// Evidence freshness (default 15m).
    pub max_age: Option<Dur>,
    /// Output cap in bytes (default 8 MiB).
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
}

/// How a criterion observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Exactly one observation.
    Assert,
    /// Observe until the expectation holds or the timeout passes.
    Converge,
    /// Observe every interval for a window; any failing sample fails.
    Hold,
    /// Compare with a baseline snapshot.
    Unchanged,
}

impl Mode {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Assert => "assert",
            Self::Converge => "converge",
            Self::Hold => "hold",
            Self::Unchanged => "unchanged",
        }
    }

    /// The mode a role gets when the spec does not say.
    #[must_use]
    pub const fn default_for(role: CriterionRole) -> Self {
        match role {
            CriterionRole::Correctness => Self::Converge,
            CriterionRole::Safety | CriterionRole::Catastrophic => Self::Assert,
        }
    }
}

/// One criterion as written (and, normalised, as digested).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionDef {
    /// Identifier (the check id of its evidence).
    pub id: Id,
    /// For people; not part of the definition digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Score role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CriterionRole>,
    /// Score weight, finite and > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub weight: Option<f64>,
    /// Whether exit status and the rollup require it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Converge deadline; hold deadline for the whole window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Converge first back-off step; hold sampling interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Dur>,
    /// Converge back-off cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<Dur>,
    /// Hold window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Dur>,
    /// Unchanged: JSONPath expressions whose locations are not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore: Option<Vec<String>>,
    /// How long the evidence stays fresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Dur>,
    /// What to observe.
    #[schemars(schema_with = "crate::schema::probe")]
    pub probe: Value,
}

/// A text expectation; every field given must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextMatch {
    /// The whole text equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// The text contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The text matches this regex somewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// The text matches this regex nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_matches: Option<String>,
}

/// An inclusive range of counts or sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// Lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// Upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

impl Range {
    /// Whether `n` is inside.
    #[must_use]
    pub fn contains(&self, n: u64) -> bool {
        self.min.is_none_or(|m| n >= m) && self.max.is_none_or(|m| n <= m)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => write!(f, "exactly {a}"),
            (Some(a), Some(b)) => write!(f, "between {a} and {b}"),
            (Some(a), None) => write!(f, "at least {a}"),
            (None, Some(b)) => write!(f, "at most {b}"),
            (None, None) => f.write_str("any number"),
        }
    }
}

/// How many selected objects must satisfy `expect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    /// Every one (and at least one).
    All,
    /// At least one.
    Any,
    /// None of them (and at least one was selected).
    None,
    /// A count within bounds; `{max: 0}` requires absence.
    Count(Range),
}

impl JsonSchema for Quantifier {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantifier".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let range = generator.subschema_for::<Range>();
        schemars::json_schema!({
            "description": "How many selected objects must satisfy `expect`: all, any, none or {count: {min, max}}.",
            "anyOf": [
                {"type": "string", "enum": ["all", "any", "none"]},
                {
                    "type": "object",
                    "properties": {"count": range},
                    "required": ["count"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl Serialize for Quantifier {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::All => s.serialize_str("all"),
            Self::Any => s.serialize_str("any"),
            Self::None => s.serialize_str("none"),
            Self::Count(r) => {
                #[derive(Serialize)]
                struct C<'a> {
                    count: &'a Range,
                }
                C { count: r }.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Quantifier {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct C {
            count: Range,
        }
        let v = Value::deserialize(d)?;
        match &v {
            Value::String(s) => match s.as_str() {
                "all" => Ok(Self::All),
                "any" => Ok(Self::Any),
                "none" => Ok(Self::None),
                other => Err(serde::de::Error::custom(format!(
                    "unknown quantifier {other:?} (expected all, any, none or {{count: {{min, max}}}})"
                ))),
            },
            Value::Object(_) => serde_json::from_value::<C>(v)
                .map(|c| Self::Count(c.count))
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "expected all, any, none or {count: {min, max}}",
            )),
        }
    }
}

/// Expected HTTP status: one code, a list, or a class such as `"2xx"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusExpect {
    /// Exactly this code.
    Code(u16),
    /// Any of these codes.
    Codes(Vec<u16>),
    /// Any code of this class (1 to 5).
    Class(u8),
}

impl StatusExpect {
    /// Whether `code` is expected.
    #[must_use]
    pub fn accepts(&self, code: u16) -> bool {
        match self {
            Self::Code(c) => *c == code,
            Self::Codes(cs) => cs.contains(&code),
            Self::Class(k) => code / 100 == u16::from(*k),
        }
    }
}

impl fmt::Display for StatusExpect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(c) => write!(f, "{c}"),
            Self::Codes(cs) => {
                let parts: Vec<String> = cs.iter().map(u16::to_string).collect();
                write!(f, "one of {}", parts.join(", "))
            }
            Self::Class(k) => write!(f, "{k}xx"),
        }
    }
}

impl JsonSchema for StatusExpect {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatusExpect".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Expected HTTP status: one code, a non-empty list of codes, or a class such as \"2xx\".",
            "anyOf": [
                {"type": "integer", "minimum": 100, "maximum": 599},
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "integer", "minimum": 100, "maximum": 599}
                },
                {"type": "string", "pattern": "^[1-5]xx$"}
            ]
        })
    }
}

impl Serialize for StatusExpect {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Code(c) => s.serialize_u16(*c),
            Self::Codes(cs) => cs.serialize(s),
            Self::Class(k) => s.collect_str(&format_args!("{k}xx")),
        }
    }
}

fn status_code(v: &Value) -> Result<u16, String> {
    v.as_u64()
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (100..=599).contains(n))
        .ok_or_else(|| format!("status {v} is not an http status code (100-599)"))
}

impl<'de> Deserialize<'de> for StatusExpect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        fn e<E: serde::de::Error>(m: impl fmt::Display) -> E {
            E::custom(m)
        }
        let v = Value::deserialize(d)?;
        match &v {
            Value::Number(_) => status_code(&v).map(Self::Code).map_err(e),
            Value::Array(items) if !items.is_empty() => {
                let mut codes = items
                    .iter()
                    .map(status_code)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(e::<D::Error>)?;
                codes.sort_unstable();
                codes.dedup();
                Ok(Self::Codes(codes))
            }
            Value::String(s) => match s.as_bytes() {
                [k @ b'1'..=b'5', b'x', b'x'] => Ok(Self::Class(k - b'0')),
                _ => Err(e(format!("status {s:?} is not a class such as \"2xx\""))),
            },
            _ => Err(e(
                "status must be a code, a non-empty list of codes or a class such as \"2xx\"",
            )),
        }
    }
}

/// TLS options of an HTTP request or a TLS probe.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsOptions {
    /// PEM file of the certificate authorities to trust instead of the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Turns certificate verification off (it is on by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
}

/// `command` probe: one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandProbe {
    /// Program and arguments (no shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// A shell script run with `sh -c`, when a shell is really wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Standard input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Expected exit code (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = i32::MIN, max = i32::MAX))]
    pub exit_code: Option<i32>,
    /// Standard output expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<TextMatch>,
    /// Standard error expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<TextMatch>,
    /// CEL over standard output parsed as JSON (`self`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Output cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
}

/// Where a `json` probe reads its document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonSource {
    /// A command whose standard output is the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// A file holding the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// An HTTP(S) URL answering the document to a GET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Request headers (with `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// TLS options (with `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsOptions>,
}

/// `json` probe: a document, objects selected in it, an expectation over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonProbe {
    /// Where the document comes from.
    pub source: JsonSource,
    /// RFC 9535 JSONPath picking the objects (default: the document itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    /// CEL over each object (`self`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// How many objects must satisfy `expect` (default all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantifier: Option<Quantifier>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Output cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
    /// With a `url` source only: see [`HttpProbe::unreachable`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
}

/// What an observation that could not reach the system (no connection, no answer within the
/// probe's timeout) counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unreachable {
    /// `error` (the default): the system could not be observed, which is never a pass.
    Error,
    /// `fail`: the criterion asks that the system be reachable, so not reaching it is a
    /// failure of the criterion ("stays up").
    Fail,
}

/// `http` probe: one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpProbe {
    /// The URL.
    pub url: String,
    /// Method (default GET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// Expected status (default `"2xx"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusExpect>,
    /// Expected response headers (a missing header fails; a repeated one is judged on its values
    /// joined with ", ").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<BTreeMap<String, TextMatch>>,
    /// Expected body text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<TextMatch>,
    /// CEL over the body parsed as JSON (`self`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// TLS options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsOptions>,
    /// Follow redirects within the url's origin (default false: a redirect is an observation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_redirects: Option<bool>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Output cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
    /// What an observation that cannot reach the system counts as: `error` (default) or
    /// `fail`. Present in the normalised definition only when `fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
}

/// What a `tcp` probe expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TcpExpect {
    /// A connection is accepted.
    Open,
    /// The connection is refused.
    Closed,
}

/// `tcp` probe: one connection attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TcpProbe {
    /// `host:port`.
    pub address: String,
    /// Open (default) or closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<TcpExpect>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// What an observation that cannot reach the system counts as: `error` (default) or
    /// `fail`. Present in the normalised definition only when `fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
}

/// DNS record types a `dns` probe can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RecordKind {
    /// IPv4 address.
    A,
    /// IPv6 address.
    #[serde(rename = "AAAA")]
    Aaaa,
    /// Canonical name.
    #[serde(rename = "CNAME")]
    Cname,
    /// Mail exchanger.
    #[serde(rename = "MX")]
    Mx,
    /// Text.
    #[serde(rename = "TXT")]
    Txt,
    /// Name server.
    #[serde(rename = "NS")]
    Ns,
    /// Service.
    #[serde(rename = "SRV")]
    Srv,
}

/// `dns` probe: one lookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsProbe {
    /// Name to look up.
    pub name: String,
    /// Record type (default A).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub record_type: Option<RecordKind>,
    /// `ip` or `ip:port` of the server to ask (default: the system's resolvers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Whether the name must resolve (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolves: Option<bool>,
    /// Records that must all be among the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<Vec<String>>,
    /// The exact set of answers (order does not matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Vec<String>>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
}

/// File types a `file` probe can expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link (not followed).
    Symlink,
}

/// `file` probe: one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileProbe {
    /// The path (relative paths are relative to the working directory).
    pub path: String,
    /// Whether it must exist (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// Expected type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub file_type: Option<FileKind>,
    /// Expected permission bits, octal text such as `"0644"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Expected owner: a user name or a numeric uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Expected group: a group name or a numeric gid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Expected size bounds in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Range>,
    /// Expected SHA-256 of the content (64 lowercase hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Expected content text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<TextMatch>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Content cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
}

/// `log` probe: regex matches in lines of a file or a command's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogProbe {
    /// A log file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// A command printing the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The regex a line must match to count.
    pub matches: String,
    /// How many matching lines are expected (default at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Range>,
    /// Count only lines written since the run began (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_start: Option<bool>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Output cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub max_output: Option<u64>,
}

/// `tls` probe: the certificate served at an address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsProbe {
    /// `host:port`.
    pub address: String,
    /// Name to ask for and verify (default: the host of `address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// PEM file of the certificate authorities to trust instead of the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Inspect without verifying the chain and name (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Every certificate the server presents (leaf and chain) must stay valid at least this
    /// many more days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_days: Option<u64>,
    /// DNS names or IP addresses the leaf's SAN must include (an address only as an IP address
    /// entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub san: Option<Vec<String>>,
    /// Expectation over the issuer's distinguished name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<TextMatch>,
    /// Timeout of one observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// What an observation that cannot reach the system counts as: `error` (default) or
    /// `fail`. Present in the normalised definition only when `fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
}

/// A probe definition of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeDef {
    /// `command`.
    Command(CommandProbe),
    /// `json`.
    Json(JsonProbe),
    /// `http`.
    Http(HttpProbe),
    /// `tcp`.
    Tcp(TcpProbe),
    /// `dns`.
    Dns(DnsProbe),
    /// `file`.
    File(FileProbe),
    /// `log`.
    Log(LogProbe),
    /// `tls`.
    Tls(TlsProbe),
}

impl ProbeDef {
    /// Every kind name.
    pub const KINDS: [&'static str; 8] = [
        "command", "json", "http", "tcp", "dns", "file", "log", "tls",
    ];

    /// The kind name.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Command(_) => "command",
            Self::Json(_) => "json",
            Self::Http(_) => "http",
            Self::Tcp(_) => "tcp",
            Self::Dns(_) => "dns",
            Self::File(_) => "file",
            Self::Log(_) => "log",
            Self::Tls(_) => "tls",
        }
    }

    /// The definition as a JSON object with its `kind`.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        let v = match self {
            Self::Command(p) => serde_json::to_value(p),
            Self::Json(p) => serde_json::to_value(p),
            Self::Http(p) => serde_json::to_value(p),
            Self::Tcp(p) => serde_json::to_value(p),
            Self::Dns(p) => serde_json::to_value(p),
            Self::File(p) => serde_json::to_value(p),
            Self::Log(p) => serde_json::to_value(p),
            Self::Tls(p) => serde_json::to_value(p),
        }?;
        Ok(match v {
            Value::Object(mut m) => {
                m.insert("kind".into(), Value::String(self.kind().into()));
                Value::Object(m)
            }
            other => other,
        })
    }
}
