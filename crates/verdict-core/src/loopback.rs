//! Which hosts are this machine's loopback: the one rule every client of verdict applies before
//! it sends a secret (an API key, a bearer token, a webhook's signature) over plain HTTP.
//!
//! ```
//! use verdict_core::loopback::is_loopback_host;
//! assert!(is_loopback_host("127.0.0.1") && is_loopback_host("[::1]") && is_loopback_host("LocalHost"));
//! assert!(!is_loopback_host("localhost.") && !is_loopback_host("10.0.0.1"));
//! ```

/// Whether `host` (as a URL names it, an IPv6 address in brackets or not) is the loopback: an
/// address in 127.0.0.0/8, `::1`, or the name `localhost` in any case. `localhost` is reserved
/// for the loopback (RFC 6761) and resolved by the machine's own configuration; any other name
/// (one under `localhost`, or with a trailing dot) could resolve anywhere, and an IPv4-mapped
/// IPv6 address is not taken for one.
///
/// Parsing text is all it does (`core::net` holds addresses, not sockets), so it is no I/O.
#[must_use]
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .parse::<core::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn only_loopback_addresses_and_the_name_localhost_are_the_loopback() {
        for host in [
            "127.0.0.1",
            "127.3.2.1",
            "[::1]",
            "::1",
            "localhost",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "localhost.",
            "a.localhost",
            "127.0.0.1.nip.io",
            "[::ffff:127.0.0.1]",
            "0.0.0.0",
            "[::]",
            "10.0.0.1",
            "",
            "[::1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
