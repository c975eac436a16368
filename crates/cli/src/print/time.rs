//! The time stamp that starts each line, as tcpdump's `-t` flags choose it. Times are
//! printed to the microsecond (tcpdump's default precision; nanoseconds are cut, not
//! rounded, as libpcap cuts them), in local time by `TZ` or the system's zone.

use std::fmt::Write;

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Which time stamp, by how many `-t` were given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// None given: `HH:MM:SS.ffffff`, local time.
    #[default]
    Clock,
    /// `-t`: no time stamp.
    Off,
    /// `-tt`: seconds since the epoch, `1700000000.123456`.
    Epoch,
    /// `-ttt`: time since the previous packet, ` 00:00:00.001000`.
    SincePrevious,
    /// `-tttt`: `YYYY-MM-DD HH:MM:SS.ffffff`, local time.
    DateClock,
    /// `-ttttt`: time since the first packet.
    SinceFirst,
}

impl Stamp {
    /// The stamp of `n` times `-t` (more than five is five, as tcpdump counts them).
    pub(crate) fn from_count(n: u8) -> Stamp {
        match n {
            0 => Stamp::Clock,
            1 => Stamp::Off,
            2 => Stamp::Epoch,
            3 => Stamp::SincePrevious,
            4 => Stamp::DateClock,
            _ => Stamp::SinceFirst,
        }
    }
}

/// Writes time stamps; keeps the reference of the relative ones.
#[derive(Debug)]
pub(super) struct Clock {
    stamp: Stamp,
    zone: TimeZone,
    /// Microseconds of the first packet (`-ttttt`) or of the previous one (`-ttt`).
    reference: Option<u64>,
}

impl Clock {
    pub(super) fn new(stamp: Stamp) -> Self {
        let zone = match stamp {
            Stamp::Clock | Stamp::DateClock => TimeZone::system(),
            _ => TimeZone::UTC,
        };
        Self {
            stamp,
            zone,
            reference: None,
        }
    }

    /// Writes the stamp of a packet at `ts_ns` and the space after it.
    pub(super) fn write(&mut self, ts_ns: u64, line: &mut String) {
        let us = ts_ns / 1000;
        match self.stamp {
            Stamp::Off => return,
            Stamp::Clock => self.civil(us, false, line),
            Stamp::DateClock => self.civil(us, true, line),
            Stamp::Epoch => {
                let _ = write!(line, "{}.{:06}", us / 1_000_000, us % 1_000_000);
            }
            Stamp::SincePrevious | Stamp::SinceFirst => {
                let reference = *self.reference.get_or_insert(us);
                let (sign, delta) = if us < reference {
                    ('-', reference - us)
                } else {
                    (' ', us - reference)
                };
                line.push(sign);
                hms(delta, line);
                if self.stamp == Stamp::SincePrevious {
                    self.reference = Some(us);
                }
            }
        }
        line.push(' ');
    }

    /// `[YYYY-MM-DD ]HH:MM:SS.ffffff` in the zone.
    fn civil(&self, us: u64, date: bool, line: &mut String) {
        let secs = (us / 1_000_000) as i64;
        let Ok(t) = Timestamp::from_second(secs) else {
            line.push_str("[Error converting time]");
            return;
        };
        let d = self.zone.to_offset(t).to_datetime(t);
        if date {
            let _ = write!(line, "{:04}-{:02}-{:02} ", d.year(), d.month(), d.day());
        }
        let _ = write!(
            line,
            "{:02}:{:02}:{:02}.{:06}",
            d.hour(),
            d.minute(),
            d.second(),
            us % 1_000_000
        );
    }
}

/// A span of microseconds as `HH:MM:SS.ffffff`; whole days are dropped, as tcpdump's
/// `gmtime` of the span drops them.
fn hms(us: u64, line: &mut String) {
    let s = us / 1_000_000;
    let _ = write!(
        line,
        "{:02}:{:02}:{:02}.{:06}",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        us % 1_000_000
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamps(stamp: Stamp, times_ns: &[u64]) -> Vec<String> {
        let mut c = Clock::new(stamp);
        c.zone = TimeZone::UTC;
        times_ns
            .iter()
            .map(|&t| {
                let mut s = String::new();
                c.write(t, &mut s);
                s
            })
            .collect()
    }

    #[test]
    fn test_stamps() {
        let t = [1_700_000_000_123_456_789, 1_700_000_001_000_000_000];
        assert_eq!(
            stamps(Stamp::Clock, &t),
            ["22:13:20.123456 ", "22:13:21.000000 "]
        );
        assert_eq!(
            stamps(Stamp::DateClock, &t)[0],
            "2023-11-14 22:13:20.123456 "
        );
        assert_eq!(stamps(Stamp::Epoch, &t)[1], "1700000001.000000 ");
        assert_eq!(
            stamps(Stamp::SincePrevious, &[t[0], t[1], t[1]]),
            [
                " 00:00:00.000000 ",
                " 00:00:00.876544 ",
                " 00:00:00.000000 "
            ]
        );
        assert_eq!(
            stamps(Stamp::SinceFirst, &[t[1], t[0]]),
            [" 00:00:00.000000 ", "-00:00:00.876544 "]
        );
        assert_eq!(stamps(Stamp::Off, &t)[0], "");
    }
}
