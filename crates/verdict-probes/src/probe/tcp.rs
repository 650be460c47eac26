//! `tcp` probe: does a connection to `host:port` open, or is it refused?
//!
//! Only an accepted connection counts as open and only a refusal as closed; anything else
//! (no route, a timeout) says nothing about the port and is an error.

use super::{FieldError, Judged, ProbeDefaults, Sample, facts, positive_timeout};
use crate::spec::{TcpExpect, TcpProbe, Unreachable};
use serde_json::{Value, json};
use std::time::Duration;

/// A compiled `tcp` probe.
#[derive(Debug)]
pub struct TcpCheck {
    address: String,
    expect: TcpExpect,
    pub(crate) timeout: Duration,
    pub(crate) unreachable: Unreachable,
}

/// Checks `host:port` syntax (the port must be a number).
pub fn check_address(a: &str, at: &str) -> Result<(), FieldError> {
    let (host, port) = a
        .rsplit_once(':')
        .ok_or_else(|| FieldError::new(at, format!("address {a:?} must be host:port")))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(FieldError::new(
            at,
            format!("address {a:?} must be host:port"),
        ));
    }
    Ok(())
}

impl TcpCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: TcpProbe, d: &ProbeDefaults) -> Result<(TcpProbe, Self), FieldError> {
        check_address(&p.address, "/address")?;
        let expect = p.expect.unwrap_or(TcpExpect::Open);
        p.expect = Some(expect);
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let unreachable = super::unreachable_setting(&mut p.unreachable);
        Ok((
            p.clone(),
            Self {
                address: p.address,
                expect,
                timeout: timeout.std(),
                unreachable,
            },
        ))
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let open = match tokio::net::TcpStream::connect(&self.address).await {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => false,
            Err(e) => {
                return Sample::unreachable(format!(
                    "cannot tell whether {} is open: {e}",
                    self.address
                ));
            }
        };
        let mut sample = Sample::observed(facts([("open", Value::Bool(open))]), None);
        if !judge {
            sample.snapshot = Some(json!({"open": open}));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = match (self.expect, open) {
            (TcpExpect::Open, true) => Ok(format!("{} accepted a connection", self.address)),
            (TcpExpect::Open, false) => Err(Judged::Fail(format!(
                "{} refused the connection",
                self.address
            ))),
            (TcpExpect::Closed, false) => Ok(format!("{} refused the connection", self.address)),
            (TcpExpect::Closed, true) => Err(Judged::Fail(format!(
                "{} accepted a connection",
                self.address
            ))),
        };
        sample.judged(verdict)
    }
}
