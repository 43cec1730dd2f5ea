//! Where the server may send (contract section 12): `https` URLs only, and never to a
//! loopback, private, link-local, unspecified, multicast or broadcast address. A URL's
//! literal address is checked at registration and before each attempt; a name is checked
//! on every resolution ([`Guarded`]), so that a name that resolves to such an address
//! (at registration or later) makes a failed attempt, never a request.

use std::net::{IpAddr, SocketAddr};

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The longest URL a webhook may have, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// The rule an address breaks, or `None` when the server may send to it.
pub fn refused(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() {
                Some("a private address (RFC 1918)")
            } else if v4.is_link_local() {
                Some("a link-local address (169.254.0.0/16)")
            } else if v4.octets()[0] == 0 {
                Some("the unspecified address (0.0.0.0/8)")
            } else if v4.is_broadcast() {
                Some("the broadcast address")
            } else if v4.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return refused(IpAddr::V4(v4));
            }
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unique_local() {
                Some("a private address (fc00::/7)")
            } else if v6.is_unicast_link_local() {
                Some("a link-local address (fe80::/10)")
            } else if v6.is_unspecified() {
                Some("the unspecified address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// The IPv4 address an IPv6 address carries, where the network may turn it into that
/// IPv4 address: IPv4-mapped (`::ffff:a.b.c.d`), SIIT (`::ffff:0:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`, not `::` or `::1`), NAT64 (`64:ff9b::/96`,
/// `64:ff9b:1::/48`) and 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = || std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => Some(tail()),
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(tail()),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, ..] => Some(tail()),
        [0x2002, ..] => Some(std::net::Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// The URL's host when it is an address literal.
/// (The URL parser writes every IPv4 form, `2130706433` or `0x7f.1`, as a dotted quad, and
/// an IPv6 one in brackets.)
fn literal(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse()
        .ok()
}

/// Checks a webhook URL at registration: absolute `https` (or `http` with
/// `allow_private`), with a host, no credentials, at most [`MAX_URL_BYTES`], and no
/// refused address literal unless `allow_private`. The error is the rule broken.
pub fn check(url: &str, allow_private: bool) -> Result<Url, String> {
    if url.len() > MAX_URL_BYTES {
        return Err(format!("must be at most {MAX_URL_BYTES} bytes"));
    }
    let parsed = Url::parse(url).map_err(|e| format!("must be an absolute URL ({e})"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ if allow_private => return Err("must be an `https` or `http` URL".into()),
        _ => return Err("must be an `https` URL".into()),
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not hold credentials".into());
    }
    if !allow_private && let Some(rule) = literal(&parsed).and_then(refused) {
        return Err(format!("must not be {rule}: the server never sends there"));
    }
    Ok(parsed)
}

/// Checks a URL again before an attempt (the rules may have changed with the flag since
/// registration): the rule broken, when one is.
pub fn check_before_sending(url: &Url, allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    if url.scheme() != "https" {
        return Err("refused: not an `https` URL".into());
    }
    match literal(url).and_then(refused) {
        Some(rule) => Err(format!("refused: the address is {rule}")),
        None => Ok(()),
    }
}

/// The resolver of deliveries: the system's, with every refused address left out; a name
/// that resolves to refused addresses alone fails, naming the rule.
#[derive(Debug, Clone, Copy)]
pub struct Guarded;

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut rule = None;
            let allowed: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| match refused(a.ip()) {
                    Some(r) => {
                        rule = Some(r);
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                // The rule, never the address: a tenant learns nothing of what a name
                // resolves to inside the server's network.
                let why = match rule {
                    Some(r) => format!("refused: `{host}` resolves to {r}"),
                    None => format!("`{host}` resolves to no address"),
                };
                return Err(why.into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_of_refused_address_is_named() {
        for (ip, rule) in [
            ("127.0.0.1", "a loopback address"),
            ("127.255.0.9", "a loopback address"),
            ("10.0.0.1", "a private address (RFC 1918)"),
            ("172.16.5.4", "a private address (RFC 1918)"),
            ("192.168.1.1", "a private address (RFC 1918)"),
            ("169.254.169.254", "a link-local address (169.254.0.0/16)"),
            ("0.0.0.0", "the unspecified address (0.0.0.0/8)"),
            ("0.1.2.3", "the unspecified address (0.0.0.0/8)"),
            ("255.255.255.255", "the broadcast address"),
            ("224.0.0.1", "a multicast address"),
            ("::1", "a loopback address"),
            ("::ffff:127.0.0.1", "a loopback address"),
            ("::ffff:10.1.2.3", "a private address (RFC 1918)"),
            ("fd00::1", "a private address (fc00::/7)"),
            ("fe80::1", "a link-local address (fe80::/10)"),
            ("::", "the unspecified address"),
            ("::ffff:0:10.0.0.1", "a private address (RFC 1918)"),
            ("::127.0.0.1", "a loopback address"),
            ("64:ff9b::a00:1", "a private address (RFC 1918)"),
            (
                "64:ff9b:1::a9fe:a9fe",
                "a link-local address (169.254.0.0/16)",
            ),
            ("2002:a00:1::1", "a private address (RFC 1918)"),
            ("2002:7f00:1::", "a loopback address"),
            ("ff02::1", "a multicast address"),
        ] {
            assert_eq!(refused(ip.parse().unwrap()), Some(rule), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "172.32.0.1",
            "2606:2800:220:1::1",
            "1.1.1.1",
        ] {
            assert_eq!(refused(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn a_url_is_checked_at_registration() {
        assert!(check("https://hooks.example.com/x", false).is_ok());
        assert_eq!(
            check("http://hooks.example.com/x", false).unwrap_err(),
            "must be an `https` URL"
        );
        assert!(check("http://hooks.example.com/x", true).is_ok());
        assert_eq!(
            check("ftp://hooks.example.com/x", true).unwrap_err(),
            "must be an `https` or `http` URL"
        );
        for (url, rule) in [
            ("https://127.0.0.1/", "a loopback address"),
            ("https://169.254.169.254/latest", "a link-local address"),
            ("https://10.0.0.1:8443/", "a private address (RFC 1918)"),
            ("https://[::1]/", "a loopback address"),
            ("https://[::ffff:7f00:1]/", "a loopback address"),
            ("https://2130706433/", "a loopback address"),
            ("https://0x7f.1/", "a loopback address"),
        ] {
            let e = check(url, false).unwrap_err();
            assert!(
                e.contains(rule) && e.starts_with("must not be"),
                "{url}: {e}"
            );
            assert!(check(url, true).is_ok(), "{url}");
        }
        assert!(
            check("not a url", false)
                .unwrap_err()
                .starts_with("must be an absolute URL")
        );
        assert_eq!(
            check("https://u:p@hooks.example.com/", false).unwrap_err(),
            "must not hold credentials"
        );
        let long = format!("https://a.example/{}", "x".repeat(MAX_URL_BYTES));
        assert_eq!(
            check(&long, false).unwrap_err(),
            "must be at most 2048 bytes"
        );
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let name: Name = "localhost".parse().unwrap();
        let e = Guarded.resolve(name).await.err().expect("refused");
        assert!(
            e.to_string()
                .starts_with("refused: `localhost` resolves to "),
            "{e}"
        );
        assert!(e.to_string().ends_with("a loopback address"), "{e}");
    }
}
