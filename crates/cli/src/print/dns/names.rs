//! The names tcpdump gives DNS's numbers: opcodes, response codes, record types,
//! classes, EDNS options and DNSSEC algorithms.

/// The opcodes' marks, by opcode.
pub(super) const OPS: [&str; 16] = [
    "",
    " inv_q",
    " stat",
    " op3",
    " notify",
    " update",
    " op6",
    " op7",
    " op8",
    " updateA",
    " updateD",
    " updateDA",
    " updateM",
    " updateMA",
    " zoneInit",
    " zoneRef",
];

/// The response codes' marks, by code (two lack their space in tcpdump too).
pub(super) const RCODES: [&str; 24] = [
    "",
    " FormErr",
    " ServFail",
    " NXDomain",
    " NotImp",
    " Refused",
    " YXDomain",
    " YXRRSet",
    " NXRRSet",
    " NotAuth",
    " NotZone",
    " Resp11",
    " Resp12",
    " Resp13",
    " Resp14",
    " NoChange",
    " BadVers",
    "Resp17",
    " Resp18",
    " Resp19",
    " Resp20",
    "Resp21",
    " Resp22",
    " BadCookie",
];

/// Record types by number, as tcpdump names them.
const TYPES: &[(u16, &str)] = &[
    (1, "A"),
    (2, "NS"),
    (3, "MD"),
    (4, "MF"),
    (5, "CNAME"),
    (6, "SOA"),
    (7, "MB"),
    (8, "MG"),
    (9, "MR"),
    (10, "NULL"),
    (11, "WKS"),
    (12, "PTR"),
    (13, "HINFO"),
    (14, "MINFO"),
    (15, "MX"),
    (16, "TXT"),
    (17, "RP"),
    (18, "AFSDB"),
    (19, "X25"),
    (20, "ISDN"),
    (21, "RT"),
    (22, "NSAP"),
    (23, "NSAP_PTR"),
    (24, "SIG"),
    (25, "KEY"),
    (26, "PX"),
    (27, "GPOS"),
    (28, "AAAA"),
    (29, "LOC"),
    (30, "NXT"),
    (31, "EID"),
    (32, "NIMLOC"),
    (33, "SRV"),
    (34, "ATMA"),
    (35, "NAPTR"),
    (36, "KX"),
    (37, "CERT"),
    (38, "A6"),
    (39, "DNAME"),
    (40, "SINK"),
    (41, "OPT"),
    (42, "APL"),
    (43, "DS"),
    (44, "SSHFP"),
    (45, "IPSECKEY"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (99, "SPF"),
    (100, "UINFO"),
    (101, "UID"),
    (102, "GID"),
    (103, "UNSPEC"),
    (104, "UNSPECA"),
    (249, "TKEY"),
    (250, "TSIG"),
    (251, "IXFR"),
    (252, "AXFR"),
    (253, "MAILB"),
    (254, "MAILA"),
    (255, "ANY"),
    (256, "URI"),
];

const CLASSES: &[(u16, &str)] = &[(1, "IN"), (3, "CHAOS"), (4, "HS"), (255, "ANY")];

/// EDNS options by code.
pub(super) const OPTIONS: &[(u16, &str)] = &[
    (1, "LLQ"),
    (2, "UL"),
    (3, "NSID"),
    (5, "DAU"),
    (6, "DHU"),
    (7, "N3U"),
    (8, "ECS"),
    (9, "EXPIRE"),
    (10, "COOKIE"),
    (11, "KEEPALIVE"),
    (12, "PADDING"),
    (13, "CHAIN"),
    (14, "KEY-TAG"),
    (16, "CLIENT-TAG"),
    (17, "SERVER-TAG"),
];

/// DNSSEC algorithms (the DAU option).
pub(super) const DAU: &[(u16, &str)] = &[
    (0, "DELETE"),
    (1, "RSAMD5"),
    (2, "DH"),
    (3, "DS"),
    (5, "RSASHA1"),
    (6, "DSA-NSEC3-SHA1"),
    (7, "RSASHA1-NSEC3-SHA1"),
    (8, "RSASHA256"),
    (10, "RSASHA512"),
    (12, "ECC-GOST"),
    (13, "ECDSAP256SHA256"),
    (14, "ECDSAP384SHA384"),
    (15, "ED25519"),
    (16, "ED448"),
    (252, "INDIRECT"),
    (253, "PRIVATEDNS"),
    (254, "PRIVATEOID"),
];

/// DS hash algorithms (the DHU option).
pub(super) const DHU: &[(u16, &str)] = &[
    (1, "SHA-1"),
    (2, "SHA-256"),
    (3, "GOST_R_34.11-94"),
    (4, "SHA-384"),
];

/// NSEC3 hash algorithms (the N3U option).
pub(super) const N3U: &[(u16, &str)] = &[(1, "SHA-1")];

pub(super) fn name_of(table: &[(u16, &'static str)], v: u16) -> Option<&'static str> {
    table.iter().find(|t| t.0 == v).map(|t| t.1)
}

pub(super) fn type_text(t: u16) -> String {
    name_of(TYPES, t).map_or_else(|| format!("Type{t}"), str::to_owned)
}

pub(super) fn class_text(c: u16) -> String {
    name_of(CLASSES, c).map_or_else(|| format!("(Class {c})"), str::to_owned)
}
