//! Suricata's EVE JSON records, as much of them as an alert's hold needs: the event type,
//! the time, the flow (`flow_id`, the 5-tuple, `community_id`, and the flow's start when
//! the record carries its `flow` object) and the alert's signature and severity.
//!
//! Times are Suricata's: `2017-04-07T22:24:37.251547+0100` (an offset without a colon), or
//! with none (read as UTC). A line that is not a JSON object, or lacks the event type or a
//! time, is an error the follower counts and skips.

use serde::{Deserialize, Serialize};

/// One EVE record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EveEvent {
    /// `event_type` (`alert`, `flow`, `http`, ...).
    pub event_type: String,
    /// `timestamp`, ns since the epoch.
    pub time_ns: u64,
    /// The flow it belongs to.
    pub flow: EveFlow,
    /// The flow's first packet (`flow.start`), ns, when the record has it.
    pub flow_start_ns: Option<u64>,
    /// For an alert: its signature.
    pub alert: Option<EveAlert>,
}

/// A flow as EVE names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EveFlow {
    /// Suricata's `flow_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<u64>,
    /// `community_id` (`1:...`), when Suricata writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub community_id: Option<String>,
    /// `proto` (`TCP`, `UDP`, `ICMP`, or a number).
    pub proto: String,
    /// `src_ip`.
    pub src_ip: String,
    /// `src_port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    /// `dest_ip`.
    pub dest_ip: String,
    /// `dest_port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest_port: Option<u16>,
}

/// An alert's signature.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EveAlert {
    /// `alert.signature`.
    pub signature: String,
    /// `alert.signature_id`.
    pub signature_id: u64,
    /// `alert.severity` (1 is the highest).
    pub severity: u64,
    /// `alert.category`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

impl EveFlow {
    /// Whether `other` is the same flow: the same `community_id` when both have one, else
    /// the same `flow_id`, else the same 5-tuple either way.
    pub fn same(&self, other: &EveFlow) -> bool {
        if let (Some(a), Some(b)) = (&self.community_id, &other.community_id) {
            return a == b;
        }
        if let (Some(a), Some(b)) = (self.flow_id, other.flow_id) {
            return a == b;
        }
        let fwd = (&self.src_ip, self.src_port, &self.dest_ip, self.dest_port);
        let rev = (
            &other.dest_ip,
            other.dest_port,
            &other.src_ip,
            other.src_port,
        );
        let other_fwd = (
            &other.src_ip,
            other.src_port,
            &other.dest_ip,
            other.dest_port,
        );
        self.proto.eq_ignore_ascii_case(&other.proto) && (fwd == other_fwd || fwd == rev)
    }

    /// A tcpdump filter for the flow's packets both ways (for a flow without a
    /// `community_id`); None for a protocol tcpdump cannot name or an address that is not
    /// one.
    pub fn filter(&self) -> Option<String> {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().ok();
        let (a, b) = (ip(&self.src_ip)?, ip(&self.dest_ip)?);
        let proto = match self.proto.to_ascii_lowercase().as_str() {
            "tcp" => "tcp",
            "udp" => "udp",
            "sctp" => "sctp",
            "icmp" => "icmp",
            "ipv6-icmp" | "icmpv6" => "icmp6",
            _ => return None,
        };
        let mut f = format!("{proto} and host {a} and host {b}");
        match (self.src_port, self.dest_port) {
            (Some(p), Some(q)) if matches!(proto, "tcp" | "udp" | "sctp") => {
                f.push_str(&format!(" and port {p} and port {q}"));
            }
            _ => {}
        }
        Some(f)
    }
}

/// Parses one EVE line.
pub fn parse(line: &str) -> Result<EveEvent, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
    let event_type = s("event_type").ok_or("no event_type")?.to_owned();
    let time_ns = parse_time(s("timestamp").ok_or("no timestamp")?)?;
    let port = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
    };
    let flow = EveFlow {
        flow_id: v.get("flow_id").and_then(serde_json::Value::as_u64),
        community_id: s("community_id").map(str::to_owned),
        proto: match v.get("proto") {
            Some(serde_json::Value::String(p)) => p.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => String::new(),
        },
        src_ip: s("src_ip").unwrap_or_default().to_owned(),
        src_port: port("src_port"),
        dest_ip: s("dest_ip").unwrap_or_default().to_owned(),
        dest_port: port("dest_port"),
    };
    let flow_start_ns = v
        .get("flow")
        .and_then(|f| f.get("start"))
        .and_then(serde_json::Value::as_str)
        .and_then(|t| parse_time(t).ok());
    let alert = match v.get("alert") {
        Some(a) if event_type == "alert" => Some(EveAlert {
            signature: a
                .get("signature")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            signature_id: a
                .get("signature_id")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            severity: a
                .get("severity")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            category: a
                .get("category")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        }),
        _ => None,
    };
    if event_type == "alert" && alert.is_none() {
        return Err("an alert without its alert object".into());
    }
    Ok(EveEvent {
        event_type,
        time_ns,
        flow,
        flow_start_ns,
        alert,
    })
}

/// Suricata's timestamp: RFC 3339, but with an offset written `+0100`, or none (UTC).
pub fn parse_time(t: &str) -> Result<u64, String> {
    let t = t.trim();
    let fixed = match t.len().checked_sub(5).map(|i| t.split_at(i)) {
        Some((head, off))
            if (off.starts_with('+') || off.starts_with('-'))
                && off[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{head}{}:{}", &off[..3], &off[3..])
        }
        _ if t.ends_with('Z') || t.contains('+') || t.rfind('-').is_some_and(|i| i > 10) => {
            t.to_owned()
        }
        _ => format!("{t}Z"),
    };
    let ts: jiff::Timestamp = fixed.parse().map_err(|e| format!("timestamp {t}: {e}"))?;
    u64::try_from(ts.as_nanosecond()).map_err(|_| format!("timestamp {t}: before 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Suricata's documentation (eve-json-format), with a flow object and a
    /// Community ID added as Suricata writes them.
    const ALERT: &str = r#"{"timestamp":"2017-04-07T22:24:37.251547+0100","flow_id":586497171462735,"pcap_cnt":53381,"event_type":"alert","src_ip":"192.168.2.14","src_port":50096,"dest_ip":"209.53.113.5","dest_port":80,"proto":"TCP","community_id":"1:abc=","alert":{"action":"allowed","gid":1,"signature_id":2018358,"rev":10,"signature":"ET HUNTING GENERIC SUSPICIOUS POST","category":"Potentially Bad Traffic","severity":2},"flow":{"pkts_toserver":4,"start":"2017-04-07T22:24:36.000000+0100"},"app_proto":"http"}"#;

    #[test]
    fn test_parse() {
        let e = parse(ALERT).expect("alert");
        assert_eq!(e.event_type, "alert");
        assert_eq!(e.time_ns, 1_491_600_277_251_547_000);
        assert_eq!(e.flow_start_ns, Some(1_491_600_276_000_000_000));
        assert_eq!(e.flow.community_id.as_deref(), Some("1:abc="));
        assert_eq!(e.flow.dest_port, Some(80));
        let a = e.alert.expect("signature");
        assert_eq!((a.signature_id, a.severity), (2018358, 2));
        assert_eq!(
            e.flow.filter().as_deref(),
            Some("tcp and host 192.168.2.14 and host 209.53.113.5 and port 50096 and port 80")
        );
    }

    #[test]
    fn test_truncated() {
        assert!(parse(&ALERT[..60]).is_err());
        assert!(parse(r#"{"event_type":"alert","timestamp":"2017-04-07T22:24:37Z"}"#).is_err());
        assert!(parse(r#"{"timestamp":"nonsense","event_type":"flow"}"#).is_err());
        assert_eq!(
            parse_time("2009-11-24T21:27:09.534255"),
            Ok(1_259_098_029_534_255_000)
        );
    }
}
