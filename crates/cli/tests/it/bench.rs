//! `corecap bench` end to end on a tiny configuration (issue 2): the report files exist
//! and hold the tables, with the peers that are installed.

use crate::util::{self, Scratch};

#[test]
#[ignore = "needs root"]
fn issue2_bench_writes_report_tables_plots_and_json() {
    let dir = Scratch::new("bench");
    let out = dir.path("report");
    let ns = format!("cc-bench{}", std::process::id());
    let o = util::corecap(&[
        "bench",
        "--netns",
        &ns,
        "--out",
        out.to_str().expect("utf8"),
        "--reps",
        "2",
        "--packets",
        "20000",
        "--sizes",
        "64",
        "--rates",
        "50,100",
        "--tools",
        "corecap,tcpdump",
        "--parts",
        "table1,placement",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        !std::path::Path::new("/run/netns").join(&ns).exists(),
        "bench removed its lab"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("## Captured % by frame size and offered rate"),
        "{md}"
    );
    assert!(
        md.contains("### corecap\n\n| frame size | 50% | 100% |"),
        "{md}"
    );
    assert!(md.contains("| 1 worker on another core |"), "{md}");
    assert!(md.contains("## Generator accuracy"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("json"))
            .expect("parse");
    let cells = json["table1"].as_array().expect("table1");
    let tools = if util::need("tcpdump") { 2 } else { 1 };
    assert_eq!(cells.len(), tools * 2 * 2, "tools x rates x reps");
    for c in cells {
        let offered = c["offered"].as_u64().expect("offered");
        assert!(
            offered > 0 && c["captured"].as_u64().expect("captured") <= offered,
            "{c}"
        );
    }
    let svg = std::fs::read_to_string(out.join("captured-corecap.svg")).expect("svg");
    assert!(svg.starts_with("<svg"));
}
