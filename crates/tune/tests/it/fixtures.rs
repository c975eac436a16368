//! Plans, warnings, apply and restore on the fixture roots in tests/fixtures (see make.py
//! there; vm2 is a `corecap tune snapshot` of the 2-core development VM).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use corecap_tune::apply::{self, Change};
use corecap_tune::{Machine, Plan, PlanOptions, Root, WarningKind};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn plan_of(name: &str, opts: PlanOptions) -> (Machine, Plan) {
    let root = Root::at(fixture(name)).unwrap();
    let m = Machine::read(&root, "eth0").unwrap();
    let p = Plan::new(&m, opts);
    (m, p)
}

fn kinds(p: &Plan) -> Vec<WarningKind> {
    p.warnings.iter().map(|w| w.kind).collect()
}

fn irq_cpus(p: &Plan) -> Vec<Option<u32>> {
    p.workers.iter().map(|w| w.irq_cpu).collect()
}

fn queues(p: &Plan) -> Vec<Vec<u32>> {
    p.workers
        .iter()
        .map(|w| w.queues.iter().map(|q| q.queue).collect())
        .collect()
}

/// A copy of a fixture in a fresh directory (symbolic links kept), removed on drop.
struct Copy(PathBuf);

impl Copy {
    fn of(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "corecap-tune-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let ok = Command::new("cp")
            .arg("-a")
            .arg(fixture(name))
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -a failed");
        Self(dir)
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file (contents) and link (target) under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, t.as_os_str().as_encoded_bytes().to_vec());
            } else if ft.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Paths whose contents differ between two trees (files only in one side included).
fn diff(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<PathBuf> {
    let mut keys: Vec<&PathBuf> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

#[test]
fn issue6_vm2_plan() {
    let (m, p) = plan_of("vm2", PlanOptions::default());
    assert_eq!(m.topology.cpus.len(), 2);
    assert_eq!(m.nic.settings.driver.as_deref(), Some("virtio_net"));
    assert_eq!(m.nic.settings.pause, None, "virtio has no pause frames");
    assert_eq!(m.nic.irqs.len(), 1);
    assert_eq!(p.node, 0);
    assert_eq!(p.worker_cpus(), vec![0]);
    assert_eq!(p.workers[0].queue, Some(0));
    assert_eq!(p.workers[0].irq, Some(m.nic.irqs[0].irq));
    assert_eq!(irq_cpus(&p), vec![Some(1)]);
    assert!(p.stage_cpus.is_empty());
    assert_eq!(kinds(&p), vec![WarningKind::NoStageCpu]);
}

#[test]
fn issue6_dual_socket_nic_on_node0() {
    let (m, p) = plan_of("dual-node0", PlanOptions::default());
    // Paper 000 Table 2: 8 is the twin of 0; odd processors are on socket 1.
    assert!(m.topology.twins(0, 8));
    assert!(!m.topology.twins(0, 1));
    assert_eq!(m.topology.cpu(1).unwrap().node, 1);
    assert_eq!(m.nic.numa_node, Some(0));
    assert_eq!(
        m.nic.irqs.len(),
        8,
        "the link IRQ named eth0 is not a queue"
    );
    assert_eq!(p.node, 0);
    assert_eq!(p.worker_cpus(), vec![0, 2, 4, 6]);
    assert_eq!(
        queues(&p),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    // IRQs on the twins of the capture cores: off the capture CPU, on the same core's cache.
    assert_eq!(irq_cpus(&p), vec![Some(8), Some(10), Some(12), Some(14)]);
    assert_eq!(p.workers[0].irq, Some(50));
    assert_eq!(p.workers[0].queues[1].irq, Some(54));
    assert_eq!(p.stage_cpus, vec![1, 3, 5, 7, 9, 11, 13, 15]);
    assert_eq!(p.nic.channels, Some(8));
    assert_eq!(p.nic.rx_ring, Some(4096));
    assert_eq!(kinds(&p), vec![WarningKind::WrongNode, WarningKind::Pause]);
    let wrong = &p.warnings[0].message;
    assert!(wrong.contains("IRQs 50-57"), "{wrong}");
}

#[test]
fn issue6_dual_socket_too_many_and_too_few_workers() {
    let (_, p) = plan_of(
        "dual-node0",
        PlanOptions {
            workers: Some(8),
            ..Default::default()
        },
    );
    assert_eq!(p.worker_cpus(), vec![0, 2, 4, 6, 8, 10, 12, 14]);
    assert_eq!(
        irq_cpus(&p),
        p.worker_cpus().into_iter().map(Some).collect::<Vec<_>>()
    );
    let k = kinds(&p);
    for want in [
        WarningKind::TooManyWorkers,
        WarningKind::HtTwins,
        WarningKind::IrqShared,
    ] {
        assert!(k.contains(&want), "{want:?} missing from {k:?}");
    }
    assert!(!k.contains(&WarningKind::QueuesMerged));

    let (_, p) = plan_of(
        "dual-node0",
        PlanOptions {
            workers: Some(1),
            ..Default::default()
        },
    );
    assert_eq!(p.worker_cpus(), vec![0]);
    assert_eq!(queues(&p), vec![(0..8).collect::<Vec<u32>>()]);
    assert_eq!(irq_cpus(&p), vec![Some(2)]);
    assert_eq!(p.stage_cpus, vec![4, 6, 8, 10, 12, 14]);
    let k = kinds(&p);
    assert!(k.contains(&WarningKind::QueuesMerged), "{k:?}");
    assert!(!k.contains(&WarningKind::TooManyWorkers));
    assert!(!k.contains(&WarningKind::IrqShared));
}

#[test]
fn issue6_dual_socket_nic_on_node1() {
    let (m, p) = plan_of("dual-node1", PlanOptions::default());
    assert_eq!(m.nic.numa_node, Some(1));
    assert_eq!(p.node, 1);
    assert_eq!(p.worker_cpus(), vec![1, 3, 5, 7]);
    assert_eq!(irq_cpus(&p), vec![Some(9), Some(11), Some(13), Some(15)]);
    assert_eq!(p.stage_cpus, vec![0, 2, 4, 6, 8, 10, 12, 14]);
    assert_eq!(kinds(&p), vec![WarningKind::WrongNode, WarningKind::Pause]);
    assert!(p.warnings[0].message.contains("node 1"));
}

#[test]
fn issue6_irqbalance_and_all_irqs_on_core0() {
    let (m, p) = plan_of("irqbalance", PlanOptions::default());
    assert_eq!(m.irqbalance, Some(1234));
    assert_eq!(m.nic.numa_node, None);
    assert_eq!(m.nic.irqs.len(), 4, "the misc vector is not a queue");
    assert_eq!(p.worker_cpus(), vec![0, 1, 2, 3]);
    assert_eq!(irq_cpus(&p), vec![Some(4), Some(5), Some(6), Some(7)]);
    assert!(p.stage_cpus.is_empty());
    assert_eq!(
        kinds(&p),
        vec![
            WarningKind::Irqbalance,
            WarningKind::IrqSingleCpu,
            WarningKind::Rps,
            WarningKind::NoStageCpu
        ]
    );
    // Single node without NUMA information is normal: no numa_unknown warning.
    assert!(p.warnings_of(WarningKind::NumaUnknown).next().is_none());
}

#[test]
fn issue6_plan_json_shape() {
    let (_, p) = plan_of("dual-node0", PlanOptions::default());
    let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(v["interface"], "eth0");
    assert_eq!(v["node"], 0);
    let w = &v["workers"][1];
    assert_eq!((w["queue"].as_u64(), w["cpu"].as_u64()), (Some(1), Some(2)));
    assert_eq!(
        (w["irq"].as_u64(), w["irq_cpu"].as_u64()),
        (Some(51), Some(10))
    );
    assert_eq!(v["stage_cpus"][0], 1);
    assert_eq!(v["warnings"][0]["kind"], "wrong_node");
    assert!(v["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("node 0"));
}

#[test]
fn issue6_apply_writes_exactly_the_plan_and_restore_reverts() {
    let dir = Copy::of("dual-node0");
    let before = tree(&dir.0);
    let root = Root::at(&dir.0).unwrap();
    let m = Machine::read(&root, "eth0").unwrap();
    let p = Plan::new(&m, PlanOptions::default());

    // A dry run writes nothing.
    let dry = apply::apply(&root, &m, &p, true).unwrap();
    assert_eq!(tree(&dir.0), before);
    assert_eq!(dry.len(), 10, "{dry:?}");

    let done = apply::apply(&root, &m, &p, false).unwrap();
    assert_eq!(done, dry);
    let after = tree(&dir.0);
    let changed = diff(&before, &after);
    let mut want: Vec<PathBuf> = (50..58)
        .map(|i| PathBuf::from(format!("proc/irq/{i}/smp_affinity_list")))
        .collect();
    want.push("ethtool/eth0.json".into());
    want.push("var/lib/corecap/tune-eth0.json".into());
    want.sort();
    assert_eq!(changed, want);
    for (irq, cpu) in (50..58).zip([8, 10, 12, 14, 8, 10, 12, 14]) {
        let s = std::fs::read_to_string(dir.0.join(format!("proc/irq/{irq}/smp_affinity_list")));
        assert_eq!(s.unwrap(), format!("{cpu}\n"), "IRQ {irq}");
    }
    let m2 = Machine::read(&root, "eth0").unwrap();
    let ring = m2.nic.settings.ring.unwrap();
    assert_eq!((ring.rx, ring.tx), (4096, 512));
    let pause = m2.nic.settings.pause.unwrap();
    assert!(!pause.autoneg && !pause.rx && !pause.tx);
    assert_eq!(m2.nic.settings.channels, m.nic.settings.channels);

    // Applied again, the plan is in place: nothing to do, and the saved state is kept.
    let p2 = Plan::new(&m2, PlanOptions::default());
    assert!(apply::apply(&root, &m2, &p2, false).unwrap().is_empty());
    assert!(p2.warnings.is_empty(), "{:?}", p2.warnings);

    let undone = apply::restore(&root, "eth0", false).unwrap();
    assert_eq!(undone.len(), 10);
    let mut restored = tree(&dir.0);
    assert_eq!(
        restored.remove(Path::new("var/lib/corecap/tune-eth0.json")),
        None
    );
    assert_eq!(diff(&restored, &before), Vec::<PathBuf>::new());
    let err = apply::restore(&root, "eth0", false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("nothing to restore"), "{err}");
}

#[test]
fn issue6_apply_sets_channels() {
    let dir = Copy::of("dual-node0");
    let before = tree(&dir.0);
    let root = Root::at(&dir.0).unwrap();
    let m = Machine::read(&root, "eth0").unwrap();
    let p = Plan::new(
        &m,
        PlanOptions {
            queues: Some(4),
            ..Default::default()
        },
    );
    assert_eq!(p.nic.channels, Some(4));
    assert_eq!(queues(&p), vec![vec![0], vec![1], vec![2], vec![3]]);
    let done = apply::apply(&root, &m, &p, false).unwrap();
    assert!(matches!(done[0], Change::Channels { to, .. } if to.combined == 4));
    let c = Machine::read(&root, "eth0")
        .unwrap()
        .nic
        .settings
        .channels
        .unwrap();
    assert_eq!((c.combined, c.max_combined), (4, 63));
    apply::restore(&root, "eth0", false).unwrap();
    let mut restored = tree(&dir.0);
    restored.remove(Path::new("var/lib/corecap/tune-eth0.json"));
    assert_eq!(diff(&restored, &before), Vec::<PathBuf>::new());
}

#[test]
fn issue6_snapshot_round_trip() {
    // A recorded read of a fixture, copied out, reads back to the same machine.
    let root = Root::at(fixture("dual-node1")).unwrap().recording();
    let m = Machine::read(&root, "eth0").unwrap();
    let out = Copy::of("vm2");
    let snap = out.0.join("snap");
    root.copy_record(&snap).unwrap();
    std::fs::create_dir_all(snap.join("ethtool")).unwrap();
    std::fs::write(snap.join("ethtool/eth0.json"), m.nic.settings.to_json()).unwrap();
    let again = Machine::read(&Root::at(&snap).unwrap(), "eth0").unwrap();
    assert_eq!(again, m);
}

#[test]
fn issue6_unknown_interface() {
    let root = Root::at(fixture("vm2")).unwrap();
    let err = Machine::read(&root, "nope0").unwrap_err().to_string();
    assert!(err.contains("no such interface: nope0"), "{err}");
}
