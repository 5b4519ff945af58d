//! Who sent a webhook, and how many bodies each sender has on their way.
//!
//! The client is the connection's address, unless that address is a trusted proxy (`server.trusted_proxies`):
//! then it is the address the proxy names in its forwarded header (`server.forwarded_header`). A header from any
//! other peer is ignored, so a client cannot pose as many clients by writing addresses into it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;

use crate::config::ForwardedHeader;

/// The proxies whose word on the client's address is taken, and the header they write it in.
#[derive(Debug, Clone, Default)]
pub struct Proxies {
    trusted: Vec<ipnet::IpNet>,
    header: ForwardedHeader,
}

impl Proxies {
    pub fn new(trusted: Vec<ipnet::IpNet>, header: ForwardedHeader) -> Proxies {
        Proxies { trusted, header }
    }

    fn trusts(&self, addr: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&addr))
    }

    /// The client of a request that came over a connection from `tcp_peer`.
    ///
    /// Each proxy appends the address it received the request from, so the header lists the hops from the client
    /// (left) to the last proxy (right). Read from the right, skipping trusted proxies: the first address that is
    /// not one is the client — everything left of it was written by that client and proves nothing. An entry that
    /// is not an address (`unknown`, an obfuscated name, garbage) stops the walk at the trusted proxy that passed
    /// it on, and when every hop is a trusted proxy the left-most is the client.
    pub fn client(&self, tcp_peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let tcp_peer = tcp_peer.to_canonical();
        if !self.trusts(tcp_peer) {
            return tcp_peer;
        }
        let hops = match self.header {
            ForwardedHeader::XForwardedFor => x_forwarded_for(headers),
            ForwardedHeader::Forwarded => forwarded_for(headers),
        };
        let mut client = tcp_peer;
        for hop in hops.into_iter().rev() {
            let Some(addr) = hop else { return client };
            client = addr;
            if !self.trusts(addr) {
                break;
            }
        }
        client
    }
}

/// The hops of every `X-Forwarded-For` header, in order (`None`: not an address).
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| String::from_utf8_lossy(v.as_bytes()).split(',').map(node).collect::<Vec<_>>())
        .collect()
}

/// The `for=` of each element of every `Forwarded` header, in order (`None`: no `for`, or not an address).
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("forwarded")
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|element| {
                    element.split(';').find_map(|pair| {
                        let (key, value) = pair.split_once('=')?;
                        key.trim().eq_ignore_ascii_case("for").then(|| node(value)).flatten()
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One hop: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`, possibly quoted.
fn node(text: &str) -> Option<IpAddr> {
    let text = text.trim().trim_matches('"');
    let addr = if let Some(rest) = text.strip_prefix('[') {
        rest.split_once(']')?.0.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    } else {
        text.parse::<IpAddr>().ok().or_else(|| text.parse::<std::net::SocketAddr>().ok().map(|s| s.ip()))
    };
    addr.map(|a| a.to_canonical())
}

/// What counts as one sender: an IPv4 address, or an IPv6 /64 (one host or network usually has the whole /64,
/// and would otherwise have as many addresses as it likes).
fn sender(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// The webhook bodies each sender has on their way, capped per sender (`server.max_bodies_per_peer`).
#[derive(Debug)]
pub struct PeerCounts {
    limit: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
}

impl PeerCounts {
    pub fn new(limit: usize) -> Arc<PeerCounts> {
        Arc::new(PeerCounts { limit, counts: Mutex::new(HashMap::new()) })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Counts one more body from `client`, or `None` when it already has `limit` on their way. The count goes down
    /// when the returned guard is dropped.
    pub fn admit(self: &Arc<Self>, client: IpAddr) -> Option<InFlight> {
        let key = sender(client);
        let mut counts = self.counts.lock().expect("peer counts lock");
        let count = counts.entry(key).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(InFlight { counts: self.clone(), key })
    }

    /// Bodies on their way, from every sender.
    pub fn total(&self) -> usize {
        self.counts.lock().expect("peer counts lock").values().sum()
    }
}

/// One body on its way from one sender.
#[derive(Debug)]
pub struct InFlight {
    counts: Arc<PeerCounts>,
    key: IpAddr,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.counts.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                // Only senders with something on its way are kept: the map is at most as large as the connections.
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    fn proxies(trusted: &[&str], header: ForwardedHeader) -> Proxies {
        let config = crate::config::ServerConfig {
            trusted_proxies: trusted.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        Proxies::new(config.trusted_proxy_networks().unwrap(), header)
    }

    #[test]
    fn the_header_is_ignored_unless_the_connection_comes_from_a_trusted_proxy() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let h = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(p.client(ip("198.51.100.1"), &h), ip("198.51.100.1"));
        assert_eq!(p.client(ip("10.1.2.3"), &h), ip("203.0.113.7"));
        // No proxy configured: never read.
        assert_eq!(Proxies::default().client(ip("10.1.2.3"), &h), ip("10.1.2.3"));
        // From a trusted proxy without the header: the proxy is the client.
        assert_eq!(p.client(ip("10.1.2.3"), &HeaderMap::new()), ip("10.1.2.3"));
    }

    #[test]
    fn the_client_is_the_right_most_address_that_is_not_a_trusted_proxy() {
        let p = proxies(&["10.0.0.0/8", "192.168.1.1"], ForwardedHeader::XForwardedFor);
        // The client wrote "1.1.1.1" itself; the outer proxy appended the real client, the inner one the outer.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.7, 192.168.1.1")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("203.0.113.7"));
        // Several header lines are one list.
        let h = headers(&[("x-forwarded-for", "1.1.1.1"), ("x-forwarded-for", "203.0.113.8, 10.9.9.9")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("203.0.113.8"));
        // Every hop trusted: the left-most.
        let h = headers(&[("x-forwarded-for", "10.5.5.5, 192.168.1.1")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.5.5.5"));
        // Ports, brackets, IPv4 mapped into IPv6.
        let h = headers(&[("x-forwarded-for", "[2001:db8::7]:4711")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("2001:db8::7"));
        let h = headers(&[("x-forwarded-for", "203.0.113.9:5000")]);
        assert_eq!(p.client(ip("::ffff:10.0.0.2"), &h), ip("203.0.113.9"));
    }

    #[test]
    fn an_entry_that_is_not_an_address_stops_at_the_proxy_that_passed_it_on() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        for garbage in ["unknown", "", "evil, ", "_hidden", "1.2.3.4.5"] {
            let h = headers(&[("x-forwarded-for", &format!("203.0.113.7, {garbage}"))]);
            assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.0.0.2"), "{garbage:?}");
        }
        let h = headers(&[("x-forwarded-for", "203.0.113.7, unknown, 10.3.3.3")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.3.3.3"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let both = headers(&[("x-forwarded-for", "203.0.113.1"), ("forwarded", "for=203.0.113.2")]);
        let xff = proxies(&["127.0.0.1"], ForwardedHeader::XForwardedFor);
        let fwd = proxies(&["127.0.0.1"], ForwardedHeader::Forwarded);
        assert_eq!(xff.client(ip("127.0.0.1"), &both), ip("203.0.113.1"));
        assert_eq!(fwd.client(ip("127.0.0.1"), &both), ip("203.0.113.2"));
    }

    #[test]
    fn forwarded_elements_are_read_for_their_for_parameter() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let h = headers(&[(
            "forwarded",
            r#"for=1.1.1.1, For="[2001:db8:cafe::17]:4711";proto=https;by=10.0.0.1, for=10.0.0.9"#,
        )]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("2001:db8:cafe::17"));
        let h = headers(&[("forwarded", "proto=https;for=203.0.113.4;host=example.com")]);
        assert_eq!(p.client(ip("10.0.0.2"), &h), ip("203.0.113.4"));
        // An element without `for`, or `for=unknown`: the proxy that passed it on.
        for value in ["proto=https", "for=unknown", "for=_mysecret"] {
            let h = headers(&[("forwarded", &format!("for=203.0.113.4, {value}"))]);
            assert_eq!(p.client(ip("10.0.0.2"), &h), ip("10.0.0.2"), "{value}");
        }
    }

    #[test]
    fn each_sender_has_at_most_the_limit_on_its_way_and_gets_its_turns_back() {
        let counts = PeerCounts::new(2);
        let a = ip("203.0.113.1");
        let first = counts.admit(a).unwrap();
        let second = counts.admit(a).unwrap();
        assert!(counts.admit(a).is_none());
        // Another sender is counted apart.
        let other = counts.admit(ip("203.0.113.2")).unwrap();
        assert_eq!(counts.total(), 3);
        drop(first);
        let third = counts.admit(a).unwrap();
        drop((second, third, other));
        assert_eq!(counts.total(), 0);
        assert!(counts.counts.lock().unwrap().is_empty(), "senders with nothing on its way are forgotten");
    }

    #[test]
    fn an_ipv6_sender_is_its_slash_64() {
        let counts = PeerCounts::new(1);
        let _one = counts.admit(ip("2001:db8:1:2::1")).unwrap();
        assert!(counts.admit(ip("2001:db8:1:2:ffff::9")).is_none(), "same /64");
        assert!(counts.admit(ip("2001:db8:1:3::1")).is_some(), "another /64");
        // An IPv4 client seen on an IPv6 socket is the IPv4 address.
        let _v4 = counts.admit(ip("::ffff:203.0.113.5")).unwrap();
        assert!(counts.admit(ip("203.0.113.5")).is_none());
    }
}
