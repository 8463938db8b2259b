//! Which addresses the downloader may connect to: the IANA IPv4 and IPv6
//! Special-Purpose Address Registries as tables, plus the blocks those registries
//! leave out but a public host never has (multicast, the reserved 240/4, IPv6
//! outside `2000::/3`). An address is public when the most specific block holding it
//! is globally reachable; IPv6 blocks that carry an IPv4 address (IPv4-mapped,
//! IPv4-compatible, SIIT, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo `2001::/32`)
//! are as public as the IPv4 addresses inside them, so `64:ff9b::a9fe:a9fe` is the
//! metadata service `169.254.169.254`, not a public host.
//! Pure: no I/O, no DNS. Where the registry says "N/A" (deprecated relays) the block
//! is treated as not public; a downloader loses nothing by refusing them.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One IPv4 registry row.
pub(super) struct V4Block {
    pub net: Ipv4Addr,
    pub len: u8,
    pub global: bool,
    pub name: &'static str,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, global: bool, name: &'static str) -> V4Block {
    V4Block {
        net: Ipv4Addr::new(a, b, c, d),
        len,
        global,
        name,
    }
}

/// IANA IPv4 Special-Purpose Address Registry (and the multicast and reserved
/// blocks of the IPv4 address space), most specific row wins.
#[rustfmt::skip]
pub(super) const V4: &[V4Block] = &[
    v4(0, 0, 0, 0, 0, true, "everything else"),
    v4(0, 0, 0, 0, 8, false, "this network (RFC 791)"),
    v4(10, 0, 0, 0, 8, false, "private-use (RFC 1918)"),
    v4(100, 64, 0, 0, 10, false, "shared address space, CGNAT (RFC 6598)"),
    v4(127, 0, 0, 0, 8, false, "loopback (RFC 1122)"),
    v4(169, 254, 0, 0, 16, false, "link local (RFC 3927)"),
    v4(172, 16, 0, 0, 12, false, "private-use (RFC 1918)"),
    v4(192, 0, 0, 0, 24, false, "IETF protocol assignments (RFC 6890)"),
    v4(192, 0, 0, 0, 29, false, "IPv4 service continuity prefix (RFC 7335)"),
    v4(192, 0, 0, 8, 32, false, "IPv4 dummy address (RFC 7600)"),
    v4(192, 0, 0, 9, 32, true, "port control protocol anycast (RFC 7723)"),
    v4(192, 0, 0, 10, 32, true, "TURN anycast (RFC 8155)"),
    v4(192, 0, 0, 170, 32, false, "NAT64/DNS64 discovery (RFC 7050)"),
    v4(192, 0, 0, 171, 32, false, "NAT64/DNS64 discovery (RFC 7050)"),
    v4(192, 0, 2, 0, 24, false, "documentation TEST-NET-1 (RFC 5737)"),
    v4(192, 31, 196, 0, 24, true, "AS112-v4 (RFC 7535)"),
    v4(192, 52, 193, 0, 24, true, "AMT (RFC 7450)"),
    v4(192, 88, 99, 0, 24, false, "deprecated 6to4 relay anycast (RFC 7526)"),
    v4(192, 168, 0, 0, 16, false, "private-use (RFC 1918)"),
    v4(192, 175, 48, 0, 24, true, "direct delegation AS112 service (RFC 7534)"),
    v4(198, 18, 0, 0, 15, false, "benchmarking (RFC 2544)"),
    v4(198, 51, 100, 0, 24, false, "documentation TEST-NET-2 (RFC 5737)"),
    v4(203, 0, 113, 0, 24, false, "documentation TEST-NET-3 (RFC 5737)"),
    v4(224, 0, 0, 0, 4, false, "multicast (RFC 5771)"),
    v4(240, 0, 0, 0, 4, false, "reserved (RFC 1112)"),
    v4(255, 255, 255, 255, 32, false, "limited broadcast (RFC 919)"),
];

/// How an IPv6 block is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum V6Reach {
    Global,
    NotGlobal,
    /// The low 32 bits are an IPv4 address (mapped, compatible, SIIT, NAT64).
    Low32,
    /// `2002:AABB:CCDD::/48` carries `AA.BB.CC.DD`.
    SixToFour,
    /// Teredo: the server's address in bits 32..64, the client's (inverted) in the
    /// low 32 bits; both must be public.
    Teredo,
}

/// One IPv6 registry row.
pub(super) struct V6Block {
    pub net: Ipv6Addr,
    pub len: u8,
    pub reach: V6Reach,
    pub name: &'static str,
}

const fn v6(s: [u16; 8], len: u8, reach: V6Reach, name: &'static str) -> V6Block {
    V6Block {
        net: Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
        reach,
        name,
    }
}

use V6Reach::{Global, Low32, NotGlobal, SixToFour, Teredo};

/// IANA IPv6 Special-Purpose Address Registry, plus the address architecture's
/// blocks (only `2000::/3` is global unicast; multicast, link- and site-local),
/// most specific row wins.
#[rustfmt::skip]
pub(super) const V6: &[V6Block] = &[
    v6([0; 8], 0, NotGlobal, "outside global unicast (RFC 4291)"),
    v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, Global, "global unicast (RFC 4291)"),
    v6([0; 8], 128, NotGlobal, "unspecified (RFC 4291)"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, NotGlobal, "loopback (RFC 4291)"),
    v6([0; 8], 96, Low32, "IPv4-compatible, deprecated (RFC 4291)"),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, Low32, "IPv4-mapped (RFC 4291)"),
    v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, Low32, "IPv4-translated, SIIT (RFC 2765)"),
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, Low32, "NAT64 well-known prefix (RFC 6052)"),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, NotGlobal, "local-use IPv4/IPv6 translation (RFC 8215)"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, NotGlobal, "discard-only (RFC 6666)"),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, NotGlobal, "dummy IPv6 prefix (RFC 9780)"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, NotGlobal, "IETF protocol assignments (RFC 2928)"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, Teredo, "Teredo (RFC 4380)"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128, Global, "port control protocol anycast (RFC 7723)"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, Global, "TURN anycast (RFC 8155)"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128, Global, "DNS-SD SRP anycast (RFC 9665)"),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, NotGlobal, "benchmarking (RFC 5180)"),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, Global, "AMT (RFC 7450)"),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, Global, "AS112-v6 (RFC 7535)"),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, NotGlobal, "deprecated ORCHID (RFC 4843)"),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, Global, "ORCHIDv2 (RFC 7343)"),
    v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28, Global, "drone remote ID DETs (RFC 9374)"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, NotGlobal, "documentation (RFC 3849)"),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, SixToFour, "6to4 (RFC 3056)"),
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, Global, "direct delegation AS112 service (RFC 7534)"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, NotGlobal, "documentation (RFC 9637)"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, NotGlobal, "segment routing SIDs (RFC 9602)"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, NotGlobal, "unique local (RFC 4193)"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, NotGlobal, "link local (RFC 4291)"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, NotGlobal, "site local, deprecated (RFC 3879)"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, NotGlobal, "multicast (RFC 4291)"),
];

fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// The most specific IPv4 block holding `ip`.
pub(super) fn v4_block(ip: Ipv4Addr) -> &'static V4Block {
    let x = u32::from(ip);
    V4.iter()
        .filter(|b| x & mask32(b.len) == u32::from(b.net))
        .max_by_key(|b| b.len)
        .expect("0.0.0.0/0 holds every address")
}

/// The most specific IPv6 block holding `ip`.
pub(super) fn v6_block(ip: Ipv6Addr) -> &'static V6Block {
    let x = u128::from(ip);
    V6.iter()
        .filter(|b| x & mask128(b.len) == u128::from(b.net))
        .max_by_key(|b| b.len)
        .expect("::/0 holds every address")
}

/// Whether an address is reachable on the public internet, by the registries above.
pub fn is_public(ip: IpAddr) -> bool {
    not_public_block(ip).is_none()
}

/// The registry block that makes `ip` not public (for an IPv6 address that carries
/// an IPv4 address, the IPv4 block), or `None` when it is public.
pub fn not_public_block(ip: IpAddr) -> Option<&'static str> {
    let v4 = |a: Ipv4Addr| {
        let b = v4_block(a);
        (!b.global).then_some(b.name)
    };
    let v4_at = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match ip {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => {
            let s = a.segments();
            let b = v6_block(a);
            match b.reach {
                Global => None,
                NotGlobal => Some(b.name),
                Low32 => v4(Ipv4Addr::from(u128::from(a) as u32)),
                SixToFour => v4(v4_at(s[1], s[2])),
                Teredo => v4(v4_at(s[2], s[3])).or_else(|| v4(v4_at(!s[6], !s[7]))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first and last address of a CIDR block.
    fn edges(cidr: &str) -> [IpAddr; 2] {
        let (net, len) = cidr.split_once('/').expect("a CIDR");
        let len: u32 = len.parse().unwrap();
        match net.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => {
                let host = u32::MAX.checked_shr(len).unwrap_or(0);
                let first = u32::from(a) & !host;
                [first, first | host].map(|x| IpAddr::V4(x.into()))
            }
            IpAddr::V6(a) => {
                let host = u128::MAX.checked_shr(len).unwrap_or(0);
                let first = u128::from(a) & !host;
                [first, first | host].map(|x| IpAddr::V6(x.into()))
            }
        }
    }

    /// Every registry block: its first and last address are (not) public as the
    /// registry says.
    #[test]
    fn every_block_is_judged_at_both_edges() {
        let rows: &[(&str, bool)] = &[
            ("0.0.0.0/8", false),
            ("10.0.0.0/8", false),
            ("100.64.0.0/10", false),
            ("127.0.0.0/8", false),
            ("169.254.0.0/16", false),
            ("172.16.0.0/12", false),
            ("192.0.0.0/24", false),
            ("192.0.0.0/29", false),
            ("192.0.0.8/32", false),
            ("192.0.0.9/32", true),
            ("192.0.0.10/32", true),
            ("192.0.0.170/32", false),
            ("192.0.0.171/32", false),
            ("192.0.2.0/24", false),
            ("192.31.196.0/24", true),
            ("192.52.193.0/24", true),
            ("192.88.99.0/24", false),
            ("192.168.0.0/16", false),
            ("192.175.48.0/24", true),
            ("198.18.0.0/15", false),
            ("198.51.100.0/24", false),
            ("203.0.113.0/24", false),
            ("224.0.0.0/4", false),
            ("240.0.0.0/4", false),
            ("255.255.255.255/32", false),
            ("::/128", false),
            ("::1/128", false),
            ("64:ff9b:1::/48", false),
            ("100::/64", false),
            ("100:0:0:1::/64", false),
            ("2001::/23", false),
            ("2001:1::1/128", true),
            ("2001:1::2/128", true),
            ("2001:1::3/128", true),
            ("2001:2::/48", false),
            ("2001:3::/32", true),
            ("2001:4:112::/48", true),
            ("2001:10::/28", false),
            ("2001:20::/28", true),
            ("2001:30::/28", true),
            ("2001:db8::/32", false),
            ("2620:4f:8000::/48", true),
            ("3fff::/20", false),
            ("5f00::/16", false),
            ("fc00::/7", false),
            ("fe80::/10", false),
            ("fec0::/10", false),
            ("ff00::/8", false),
            ("::/8", false),
            ("4000::/3", false),
        ];
        for (cidr, public) in rows {
            for ip in edges(cidr) {
                assert_eq!(is_public(ip), *public, "{ip} in {cidr}");
            }
        }
    }

    /// The addresses just outside each block, and single addresses inside the
    /// blocks that carry an IPv4 address.
    #[test]
    fn neighbours_and_embedded_ipv4() {
        let rows: &[(&str, bool)] = &[
            ("1.0.0.0", true),
            ("9.255.255.255", true),
            ("11.0.0.0", true),
            ("100.63.255.255", true),
            ("100.128.0.0", true),
            ("126.255.255.255", true),
            ("128.0.0.0", true),
            ("169.253.255.255", true),
            ("169.255.0.0", true),
            ("172.15.255.255", true),
            ("172.32.0.0", true),
            ("191.255.255.255", true),
            ("192.0.0.11", false),
            ("192.0.1.0", true),
            ("192.0.1.255", true),
            ("192.0.3.0", true),
            ("192.88.98.255", true),
            ("192.88.100.0", true),
            ("192.167.255.255", true),
            ("192.169.0.0", true),
            ("198.17.255.255", true),
            ("198.20.0.0", true),
            ("198.51.99.255", true),
            ("198.51.101.0", true),
            ("203.0.112.255", true),
            ("203.0.114.0", true),
            ("223.255.255.255", true),
            ("8.8.8.8", true),
            ("93.184.216.34", true),
            // IPv4-mapped, -compatible and SIIT: as public as the IPv4 inside.
            ("::ffff:0.0.0.0", false),
            ("::ffff:255.255.255.255", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:192.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("::2", false),
            ("::10.0.0.1", false),
            ("::8.8.8.8", true),
            ("::ffff:0:a00:1", false),
            ("::ffff:0:808:808", true),
            // NAT64 64:ff9b::/96: the gateway would connect to the IPv4 inside.
            ("64:ff9b::", false),
            ("64:ff9b::ffff:ffff", false),
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("64:ff9b::c000:1", false),
            ("64:ff9b::a00:1", false),
            ("64:ff9b::808:808", true),
            ("64:ff9b:0:0:0:1::", false),
            ("64:ff9b:1::808:808", false),
            // 6to4 2002::/16: the IPv4 in bits 16..48.
            ("2002::", false),
            ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("2002:7f00:1::", false),
            ("2002:a9fe:a9fe::1", false),
            ("2002:c000:201::1", false),
            ("2002:c000:0::1", false),
            ("2002:808:808::1", true),
            ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("2003::", true),
            // Teredo 2001::/32: server in bits 32..64, client inverted in the low 32.
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", false), // client 192.0.2.45
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", false), // client 127.0.0.1
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", false),     // server 10.0.0.1
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", true),  // client 8.8.8.8
            // The IETF block's neighbours and holes.
            ("2001:1::", false),
            ("2001:1::4", false),
            ("2001:4:113::", false),
            ("2001:40::", false),
            ("2001:200::", true),
            ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("2001:db9::", true),
            ("2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", true),
            ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("3fff:1000::", true),
            ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("2000::", true),
            ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("2606:4700::1111", true),
        ];
        for (a, public) in rows {
            assert_eq!(is_public(a.parse().unwrap()), *public, "{a}");
        }
    }

    #[test]
    fn the_blocking_block_is_named() {
        let why = |a: &str| not_public_block(a.parse().unwrap());
        assert_eq!(why("169.254.169.254"), Some("link local (RFC 3927)"));
        assert_eq!(why("64:ff9b::a9fe:a9fe"), Some("link local (RFC 3927)"));
        assert_eq!(why("fd00::1"), Some("unique local (RFC 4193)"));
        assert_eq!(why("8.8.8.8"), None);
    }

    /// The tables hold what their comments claim: canonical networks, no duplicate
    /// rows.
    #[test]
    fn tables_are_canonical() {
        for b in V4 {
            assert_eq!(
                u32::from(b.net) & !mask32(b.len),
                0,
                "{} ({})",
                b.net,
                b.name
            );
        }
        for b in V6 {
            assert_eq!(
                u128::from(b.net) & !mask128(b.len),
                0,
                "{} ({})",
                b.net,
                b.name
            );
        }
        for (i, a) in V4.iter().enumerate() {
            assert!(!V4[i + 1..].iter().any(|b| b.net == a.net && b.len == a.len));
        }
        for (i, a) in V6.iter().enumerate() {
            assert!(!V6[i + 1..].iter().any(|b| b.net == a.net && b.len == a.len));
        }
    }
}
