//! The NIC settings tune changes through ethtool: channel counts, ring sizes, pause frames.
//!
//! On the live machine they come from SIOCETHTOOL ioctls. Under a fixture root they come
//! from `ethtool/IF.json` (written by `corecap tune snapshot`), and `apply` writes them
//! there, so tests can check every change. A section that is absent or `null` means the
//! driver does not support it.

use serde::{Deserialize, Serialize};

use corecap_linux::ethtool::{Channels, Ethtool};

use crate::error::{Error, Result};
use crate::root::Root;

/// Queue counts by kind, with the driver's maximums.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChannelCounts {
    /// RX-only channels now.
    pub rx: u32,
    /// TX-only channels now.
    pub tx: u32,
    /// Other channels now.
    pub other: u32,
    /// Combined channels now.
    pub combined: u32,
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum other channels.
    pub max_other: u32,
    /// Maximum combined channels.
    pub max_combined: u32,
}

impl ChannelCounts {
    /// Receive queues now: combined plus RX-only channels.
    pub fn rx_queues(&self) -> u32 {
        self.combined + self.rx
    }

    /// Most receive queues the driver allows.
    pub fn max_rx_queues(&self) -> u32 {
        if self.max_combined > 0 {
            self.max_combined
        } else {
            self.max_rx
        }
    }
}

/// Descriptor ring sizes.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RingSizes {
    /// RX ring now.
    pub rx: u32,
    /// TX ring now.
    pub tx: u32,
    /// Largest RX ring.
    pub rx_max: u32,
    /// Largest TX ring.
    pub tx_max: u32,
}

/// Ethernet flow control.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PauseFrames {
    /// Pause autonegotiation.
    pub autoneg: bool,
    /// Honour received pause frames.
    pub rx: bool,
    /// Send pause frames.
    pub tx: bool,
}

/// `on` or `off`, as ethtool prints a flag.
pub fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Everything ethtool reports that tune uses.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Settings {
    /// Driver name.
    #[serde(default)]
    pub driver: Option<String>,
    /// Channel counts, if the driver reports them.
    #[serde(default)]
    pub channels: Option<ChannelCounts>,
    /// Ring sizes, if the driver reports them.
    #[serde(default)]
    pub ring: Option<RingSizes>,
    /// Pause frames, if the driver has them.
    #[serde(default)]
    pub pause: Option<PauseFrames>,
}

/// Path of the settings file of `iface` under a fixture root.
pub fn fixture_path(iface: &str) -> String {
    format!("ethtool/{iface}.json")
}

impl Settings {
    /// Reads the settings of `iface`: ioctls on the live machine, the JSON file otherwise.
    pub fn read(root: &Root, iface: &str) -> Result<Self> {
        if !root.is_live() {
            let rel = fixture_path(iface);
            return match root.read(&rel) {
                Ok(s) => serde_json::from_str(&s).map_err(|e| Error::Parse {
                    what: root.display(&rel),
                    value: e.to_string(),
                }),
                Err(_) => Ok(Self::default()),
            };
        }
        let et = Ethtool::open(iface)?;
        Ok(Self {
            driver: et.driver()?,
            channels: et.channels()?.map(|c| ChannelCounts {
                rx: c.rx,
                tx: c.tx,
                other: c.other,
                combined: c.combined,
                max_rx: c.max_rx,
                max_tx: c.max_tx,
                max_other: c.max_other,
                max_combined: c.max_combined,
            }),
            ring: et.ring()?.map(|r| RingSizes {
                rx: r.rx,
                tx: r.tx,
                rx_max: r.rx_max,
                tx_max: r.tx_max,
            }),
            pause: et.pause()?.map(|p| PauseFrames {
                autoneg: p.autoneg != 0,
                rx: p.rx != 0,
                tx: p.tx != 0,
            }),
        })
    }

    /// The settings as the fixture file holds them.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("settings serialize") + "\n"
    }

    /// Edits the fixture file of `iface`: `edit` gets the settings and returns `None` when
    /// the driver lacks the section it changes.
    fn edit_fixture(
        root: &Root,
        iface: &str,
        what: &str,
        edit: impl FnOnce(&mut Self) -> Option<()>,
    ) -> Result<()> {
        let mut s = Self::read(root, iface)?;
        edit(&mut s).ok_or_else(|| unsupported(iface, what))?;
        root.write(fixture_path(iface), &s.to_json())
    }

    /// Sets the channel counts.
    pub fn set_channels(root: &Root, iface: &str, to: ChannelCounts) -> Result<()> {
        if root.is_live() {
            let mut c = Channels::default();
            (c.rx, c.tx, c.other, c.combined) = (to.rx, to.tx, to.other, to.combined);
            return Ok(Ethtool::open(iface)?.set_channels(&c)?);
        }
        Self::edit_fixture(root, iface, "channels", |s| {
            let cur = s.channels.as_mut()?;
            (cur.rx, cur.tx, cur.other, cur.combined) = (to.rx, to.tx, to.other, to.combined);
            Some(())
        })
    }

    /// Sets the RX and TX ring sizes.
    pub fn set_ring(root: &Root, iface: &str, rx: u32, tx: u32) -> Result<()> {
        if root.is_live() {
            return Ok(Ethtool::open(iface)?.set_ring(rx, tx)?);
        }
        Self::edit_fixture(root, iface, "ring sizes", |s| {
            let cur = s.ring.as_mut()?;
            (cur.rx, cur.tx) = (rx, tx);
            Some(())
        })
    }

    /// Sets pause frames.
    pub fn set_pause(root: &Root, iface: &str, to: PauseFrames) -> Result<()> {
        if root.is_live() {
            return Ok(Ethtool::open(iface)?.set_pause(to.autoneg, to.rx, to.tx)?);
        }
        Self::edit_fixture(root, iface, "pause frames", |s| {
            *s.pause.as_mut()? = to;
            Some(())
        })
    }
}

fn unsupported(iface: &str, what: &str) -> Error {
    Error::Invalid(format!("the driver of {iface} does not support {what}"))
}
