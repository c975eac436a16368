//! `--flow-cutoff` and `--cutoff` resolved into the engine's [`CutoffConfig`].

use anyhow::{bail, Result};
use corecap_engine::cutoff::{CutoffClass, CutoffConfig};

use crate::args::CutoffArgs;

/// The cutoff asked for, or None when neither `--flow-cutoff` nor `--cutoff` is given.
pub(crate) fn cutoff(a: &CutoffArgs) -> Result<Option<CutoffConfig>> {
    if a.flow_cutoff.is_none() && a.classes.is_empty() {
        return Ok(None);
    }
    let default = a
        .flow_cutoff
        .as_deref()
        .map(|s| corecap_engine::limits::size(s, "--flow-cutoff"))
        .transpose()?;
    let classes = a
        .classes
        .iter()
        .map(|c| CutoffClass::parse(c))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if a.cutoff_flows == 0 {
        bail!("--cutoff-flows must be at least 1");
    }
    Ok(Some(CutoffConfig {
        default,
        classes,
        flows: a.cutoff_flows,
        idle: corecap_engine::limits::seconds(a.cutoff_idle, "--cutoff-idle")?,
        // serve gives its holds once it has them (config::serve).
        holds: None,
    }))
}

/// Whether any cutoff flag was typed (they need a recording).
pub(crate) fn cutoff_given(a: &CutoffArgs) -> bool {
    a.flow_cutoff.is_some() || !a.classes.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flow: Option<&str>, classes: &[&str]) -> CutoffArgs {
        CutoffArgs {
            flow_cutoff: flow.map(str::to_owned),
            classes: classes.iter().map(|s| (*s).to_owned()).collect(),
            cutoff_flows: 16,
            cutoff_idle: 120.0,
        }
    }

    #[test]
    fn test_cutoff_classes() {
        assert_eq!(cutoff(&args(None, &[])).unwrap(), None);
        let c = cutoff(&args(
            Some("15k"),
            &["tcp port 443=20k", "udp port 53 = none"],
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.default, Some(15 << 10));
        assert_eq!(
            c.classes,
            vec![
                CutoffClass {
                    filter: "tcp port 443".into(),
                    limit: Some(20 << 10)
                },
                CutoffClass {
                    filter: "udp port 53".into(),
                    limit: None
                },
            ]
        );
        for bad in ["tcp port 80", "=5k", "tcp=lots"] {
            assert!(cutoff(&args(None, &[bad])).is_err(), "{bad}");
        }
        assert!(cutoff(&args(Some("1.5k"), &[])).is_err());
    }
}
