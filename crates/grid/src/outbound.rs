//! Which hosts the gateway may reach on a user's behalf (third-party copy sources and
//! destinations): an `OutboundPolicy` and the HTTP agent that enforces it at connection time.
//!
//! By default loopback, private, link-local, shared (CGNAT), multicast and other special
//! addresses are refused, and so are the gateway's own listeners (its S3, plain-HTTP and admin
//! ports): a user could otherwise make the gateway fetch its private admin pages or a service
//! on the site network into a bucket (SSRF). The operator opens what is needed with
//! `outbound_allow` entries (networks, addresses, optionally with a port).
//!
//! The check sits in the agent's resolver, so it applies to the addresses actually connected
//! to: every redirect hop resolves again and is checked again, and a name checked once cannot
//! resolve elsewhere for the connection (DNS rebinding). Proxies from the environment are not
//! used by this agent (a proxy would connect on our behalf to an address we never see).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// One `outbound_allow` entry: a network (`10.1.0.0/16`, `::1/128`) or an address
/// (`127.0.0.1`), with an optional port (`127.0.0.1:9001`, `[::1]:9001`, `10.0.0.0/8:443`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    network: IpNet,
    port: Option<u16>,
}

impl AllowEntry {
    fn covers(&self, address: &SocketAddr) -> bool {
        self.network.contains(&address.ip().to_canonical()) && self.port.is_none_or(|port| port == address.port())
    }
}

impl std::fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.network),
            None => write!(f, "{}", self.network),
        }
    }
}

impl FromStr for AllowEntry {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let explain = || {
            format!(
                "outbound_allow entry {text:?}: use a network (10.1.0.0/16, ::1/128) or an address (127.0.0.1), \
                 optionally with a port (127.0.0.1:9001, [::1]:9001, 10.0.0.0/8:443)"
            )
        };
        if let Ok(address) = text.parse::<SocketAddr>() {
            return Ok(Self { network: IpNet::from(address.ip()), port: Some(address.port()) });
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Self { network: IpNet::from(ip), port: None });
        }
        if let Ok(network) = text.parse::<IpNet>() {
            return Ok(Self { network: network.trunc(), port: None });
        }
        // A network with a port: the port follows the prefix length (`10.0.0.0/8:443`).
        let (network, port) = text.rsplit_once(':').ok_or_else(explain)?;
        let network = network.parse::<IpNet>().map_err(|_| explain())?;
        let port = port.parse::<u16>().map_err(|_| explain())?;
        Ok(Self { network: network.trunc(), port: Some(port) })
    }
}

/// Why an outbound address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundRefusal {
    #[error(
        "{address} is a {kind} address, which the gateway does not reach on a user's behalf unless the operator lists it in outbound_allow"
    )]
    Special { address: SocketAddr, kind: &'static str },
    #[error(
        "{address} is one of this gateway's own listeners, which it does not reach on a user's behalf unless the operator lists that address and port in outbound_allow"
    )]
    OwnListener { address: SocketAddr },
    #[error("{0}")]
    Unresolved(String),
}

/// The hosts the gateway may reach for a user: everything public, plus what `allow` opens,
/// never its own listeners unless an entry names their address and port.
#[derive(Debug, Clone, Default)]
pub struct OutboundPolicy {
    allow: Vec<AllowEntry>,
    own_listeners: Vec<SocketAddr>,
}

impl OutboundPolicy {
    pub fn new(allow: Vec<AllowEntry>, own_listeners: Vec<SocketAddr>) -> Self {
        Self { allow, own_listeners }
    }

    /// Parses the config's `outbound_allow` list (the error names the entry and the forms).
    pub fn parse_allow(entries: &[String]) -> Result<Vec<AllowEntry>, String> {
        entries.iter().map(|entry| entry.parse()).collect()
    }

    /// Whether the gateway may connect to `address` for a user.
    pub fn check(&self, address: &SocketAddr) -> Result<(), OutboundRefusal> {
        // An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is judged as that IPv4 address.
        let ip = address.ip().to_canonical();
        if self.is_own_listener(ip, address.port()) {
            let named = self.allow.iter().any(|entry| entry.port.is_some() && entry.covers(address));
            return if named { Ok(()) } else { Err(OutboundRefusal::OwnListener { address: *address }) };
        }
        match special_kind(ip) {
            Some(kind) if !self.allow.iter().any(|entry| entry.covers(address)) => {
                Err(OutboundRefusal::Special { address: *address, kind })
            }
            _ => Ok(()),
        }
    }

    /// Resolves `url`'s host and checks every address it resolves to (for a clear refusal
    /// before a transfer starts; the agent checks again when it connects).
    pub fn check_url(&self, url: &str) -> Result<(), OutboundRefusal> {
        let parsed = url::Url::parse(url).map_err(|e| OutboundRefusal::Unresolved(format!("{url:?}: {e}")))?;
        let host = parsed.host_str().ok_or_else(|| OutboundRefusal::Unresolved(format!("{url:?} names no host")))?;
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| OutboundRefusal::Unresolved(format!("{url:?}: unknown port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addresses = (host, port)
            .to_socket_addrs()
            .map_err(|e| OutboundRefusal::Unresolved(format!("cannot resolve {host}: {e}")))?;
        addresses.into_iter().try_for_each(|address| self.check(&address))
    }

    fn is_own_listener(&self, ip: IpAddr, port: u16) -> bool {
        self.own_listeners.iter().any(|listener| {
            listener.port() == port
                && (listener.ip().to_canonical() == ip || (listener.ip().is_unspecified() && is_this_host(ip)))
        })
    }

    /// An HTTP agent whose every connection (redirects included) goes only where this policy
    /// allows; `config` is the caller's (timeouts, status handling), minus any proxy.
    pub fn agent(self: &Arc<Self>, config: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>) -> ureq::Agent {
        let config = config.proxy(None).build();
        ureq::Agent::with_parts(config, DefaultConnector::new(), CheckedResolver { policy: self.clone() })
    }
}

/// Whether `ip` is assigned to this host (binding to it succeeds only then).
fn is_this_host(ip: IpAddr) -> bool {
    ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// What kind of special-purpose address `ip` is, if it is one (RFC 6890 and its successors).
fn special_kind(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if v4.is_unspecified() || a == 0 {
                Some("unspecified (this network)")
            } else if a == 100 && (64..128).contains(&b) {
                Some("shared (carrier-grade NAT)")
            } else if v4.is_multicast() || v4.is_broadcast() || a >= 240 {
                Some("multicast, broadcast or reserved")
            } else if v4.is_documentation()
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || (a == 198 && (b & 0xfe) == 18)
            {
                Some("reserved (documentation, protocol assignments or benchmarking)")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_unique_local() {
                Some("private (unique local)")
            } else if v6.is_unicast_link_local() || (first & 0xffc0) == 0xfec0 {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if first == 0x64 && v6.segments()[1] == 0xff9b {
                // NAT64 embeds an IPv4 address the translator would reach: judge that one.
                let [.., c, d] = v6.segments();
                let embedded = std::net::Ipv4Addr::new((c >> 8) as u8, c as u8, (d >> 8) as u8, d as u8);
                special_kind(IpAddr::V4(embedded))
            } else if first == 0x2001 && v6.segments()[1] == 0x0db8 {
                Some("reserved (documentation)")
            } else if v6.segments()[..6] == [0; 6] {
                Some("IPv4-compatible (deprecated)")
            } else {
                None
            }
        }
    }
}

/// The default resolver, whose answers are checked against the policy before any is used.
#[derive(Debug)]
struct CheckedResolver {
    policy: Arc<OutboundPolicy>,
}

impl Resolver for CheckedResolver {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = DefaultResolver::default().resolve(uri, config, timeout)?;
        for address in resolved.iter() {
            if let Err(refusal) = self.policy.check(address) {
                tracing::warn!(%uri, %address, "outbound connection refused: {refusal}");
                return Err(ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, refusal)));
            }
        }
        Ok(resolved)
    }
}

/// How long an outbound connection may take to open (shared by the transfer agents).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], own: &[&str]) -> OutboundPolicy {
        let allow = allow.iter().map(|entry| entry.parse().unwrap()).collect();
        OutboundPolicy::new(allow, own.iter().map(|a| a.parse().unwrap()).collect())
    }

    fn refused(policy: &OutboundPolicy, address: &str) -> bool {
        policy.check(&address.parse().unwrap()).is_err()
    }

    #[test]
    fn special_addresses_are_refused_by_default_and_public_ones_reached() {
        let closed = policy(&[], &[]);
        for address in [
            "127.0.0.1:80",
            "127.8.9.10:80",
            "10.1.2.3:443",
            "172.16.0.1:80",
            "192.168.1.1:80",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "100.64.0.1:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
            "[::1]:80",
            "[::]:80",
            "[fd00::1]:80",
            "[fe80::1]:80",
            "[::ffff:127.0.0.1]:80",
            "[::ffff:169.254.169.254]:80",
            "[64:ff9b::7f00:1]:80",
            "[::127.0.0.1]:80",
        ] {
            assert!(refused(&closed, address), "{address} must be refused");
        }
        for address in ["8.8.8.8:443", "[2606:4700::1111]:443", "[64:ff9b::808:808]:80", "193.0.0.1:80"] {
            assert!(!refused(&closed, address), "{address} is public");
        }
    }

    #[test]
    fn the_allow_list_opens_networks_addresses_and_ports() {
        let open = policy(&["127.0.0.0/8", "10.1.0.0/16:9000", "[::1]:8080", "fd00::/8"], &[]);
        assert!(!refused(&open, "127.0.0.5:1234"));
        assert!(!refused(&open, "[::ffff:127.0.0.1]:1"), "a mapped address is judged as its IPv4 form");
        assert!(!refused(&open, "10.1.200.3:9000"));
        assert!(refused(&open, "10.1.200.3:9001"), "the entry names a port");
        assert!(refused(&open, "10.2.0.1:9000"));
        assert!(!refused(&open, "[::1]:8080"));
        assert!(refused(&open, "[::1]:8081"));
        assert!(!refused(&open, "[fd12::3]:80"));
        for entry in ["127.0.0.0/8", "10.1.0.0/16:9000", "::1/128:8080"] {
            assert_eq!(entry.parse::<AllowEntry>().unwrap().to_string(), entry);
        }
        for bad in ["", "localhost", "10.0.0.0/33", "10.0.0.0/8:port", "1.2.3.4:70000"] {
            assert!(bad.parse::<AllowEntry>().is_err(), "{bad:?} is not an entry");
        }
    }

    #[test]
    fn own_listeners_stay_refused_unless_named_with_their_port() {
        let own = ["127.0.0.1:9000", "0.0.0.0:9100"];
        let open = policy(&["127.0.0.0/8"], &own);
        assert!(matches!(open.check(&"127.0.0.1:9000".parse().unwrap()), Err(OutboundRefusal::OwnListener { .. })));
        // A listener on every address is reached through any of this host's addresses.
        assert!(refused(&open, "127.0.0.1:9100"));
        assert!(refused(&open, "127.3.3.3:9100"));
        assert!(!refused(&open, "127.0.0.1:9001"), "another service on an allowed network");
        let named = policy(&["127.0.0.0/8", "127.0.0.1:9000"], &own);
        assert!(!refused(&named, "127.0.0.1:9000"));
    }

    #[test]
    fn urls_are_judged_by_what_their_names_resolve_to() {
        let closed = Arc::new(policy(&[], &[]));
        assert!(matches!(closed.check_url("http://localhost:9/x"), Err(OutboundRefusal::Special { .. })));
        assert!(closed.check_url("http://[::1]/x").is_err());
        assert!(closed.check_url("http://127.1/x").is_err(), "short forms of loopback");
        assert!(closed.check_url("http://2130706433/x").is_err(), "a decimal loopback");
        assert!(closed.check_url("not a url").is_err());
        // The agent refuses at connection time too (what a redirect or a rebinding reaches).
        let agent = closed.agent(ureq::Agent::config_builder().http_status_as_error(false));
        let err = agent.get("http://localhost:9/").call().unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
    }
}
