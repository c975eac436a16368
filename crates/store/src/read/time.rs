//! Times as users give them: Unix seconds, RFC 3339, a local date and time as Wireshark
//! prints it, or relative to now.

/// A time as a user gives it, in ns since the epoch: Unix seconds (with a fraction), RFC 3339
/// with its offset, a date and time of day without one (`2026-11-23 10:00:00[.frac]`, as
/// Wireshark and capinfos print it; `2026-11-23 10:00`; `2026-11-23`) in the local time
/// zone (`TZ`, else the system's), or relative to `now` (`-15m`, `-10min`, `-2hours`,
/// `-30s`, `-1d`, `-1week`).
pub fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    parse_time_in(s, now, &jiff::tz::TimeZone::system())
}

/// [`parse_time`], with times of day without an offset in `zone`.
pub fn parse_time_in(s: &str, now: u64, zone: &jiff::tz::TimeZone) -> Result<u64, String> {
    let s = s.trim();
    if let Some(rel) = s.strip_prefix('-') {
        return relative(rel).map(|back| now.saturating_sub(back));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !s.is_empty() {
        return unix_seconds(s);
    }
    date_time(s, zone)
}

/// The time zone of `--tz`: an IANA name (`Europe/Paris`, `UTC`) from the system's zone
/// database, or a POSIX TZ rule (`CET-1CEST,M3.5.0,M10.5.0/3`); without one, `TZ` or the
/// system's zone.
pub fn time_zone(name: Option<&str>) -> Result<jiff::tz::TimeZone, String> {
    let Some(name) = name else {
        return Ok(jiff::tz::TimeZone::system());
    };
    jiff::tz::TimeZone::get(name)
        .or_else(|e| jiff::tz::TimeZone::posix(name).map_err(|_| e))
        .map_err(|e| format!("time zone {name}: {e}"))
}

/// An instant, ns since the epoch, as RFC 3339 in UTC with nanoseconds
/// (`2026-11-23T10:00:00.000000000Z`): how a window is shown back.
pub fn utc_text(ns: u64) -> String {
    let ts = i128::from(ns);
    jiff::Timestamp::from_nanosecond(ts).map_or_else(|_| format!("{ns} ns"), |t| format!("{t:.9}"))
}

/// ns in `-N UNIT` (the `-` taken off): units s, m, h, d, w, or their words.
fn relative(rel: &str) -> Result<u64, String> {
    let split = rel
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("a relative time needs a unit: s, m, h, d or w (e.g. -15m, -2hours)")?;
    let (num, unit) = rel.split_at(split);
    let secs: u64 = match unit.trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        u => {
            return Err(format!(
                "unknown unit {u:?}: s, m, h, d or w (or sec, min, hours, days, weeks)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or("not a number before the unit")?;
    Ok((n * secs as f64 * 1e9) as u64)
}

fn unix_seconds(s: &str) -> Result<u64, String> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.contains('.') {
        return Err("not a Unix time in seconds".into());
    }
    let secs: u64 = int.parse().map_err(|_| "not a Unix time in seconds")?;
    Ok(secs
        .checked_mul(1_000_000_000)
        .ok_or("time out of range")?
        .saturating_add(fraction_ns(frac)?))
}

fn fraction_ns(frac: &str) -> Result<u64, String> {
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err("bad fraction of a second".into());
    }
    let mut ns = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    Ok(ns)
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days of month `m` (1 to 12) of year `y` (proleptic Gregorian).
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Why a date and time of day that parsed as numbers does not exist, if it does not: a
/// time is never carried into the next day, month or minute (`2026-02-31` is no March 3).
/// Second 60 is refused too: Unix time, and so every packet's time, has no leap second.
fn impossible(y: i64, mo: i64, d: i64, h: i64, mi: i64, sec: i64) -> Option<String> {
    if !(1..=12).contains(&mo) {
        return Some(format!("month {mo:02} does not exist (01 to 12)"));
    }
    let days = days_in_month(y, mo);
    if !(1..=days).contains(&d) {
        let month = MONTHS[(mo - 1) as usize];
        return Some(format!(
            "day {d:02} does not exist: {month} {y:04} has {days} days"
        ));
    }
    if h > 23 {
        return Some(format!("hour {h:02} does not exist (00 to 23)"));
    }
    if mi > 59 {
        return Some(format!("minute {mi:02} does not exist (00 to 59)"));
    }
    if sec == 60 {
        return Some(
            "second 60 is a leap second, which Unix time and packet times do not have (00 to 59)"
                .into(),
        );
    }
    if sec > 59 {
        return Some(format!("second {sec:02} does not exist (00 to 59)"));
    }
    None
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][Z|±HH:MM]` (also `t` for the `T`): with an offset,
/// RFC 3339; without one, a time of day in `zone`. A date or time of day that does not
/// exist is an error that says which part.
fn date_time(s: &str, zone: &jiff::tz::TimeZone) -> Result<u64, String> {
    let bad = || {
        "not Unix seconds, a date and time (2026-11-23 10:00:00, 2026-11-23T10:00:00Z) or \
         relative (-15m, -2hours)"
            .to_string()
    };
    // The shorter forms, made whole: a date is its midnight, a minute its second 0.
    let whole;
    let s = match s.len() {
        10 => {
            whole = format!("{s} 00:00:00");
            whole.as_str()
        }
        16 => {
            whole = format!("{s}:00");
            whole.as_str()
        }
        _ => s,
    };
    let b = s.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if let Some(why) = impossible(y, mo, d, h, mi, sec) {
        return Err(why);
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac_ns = fraction_ns(&r[..n])?;
        rest = &r[n..];
    }
    // Bytes, not string slices: an offset may hold any UTF-8, and slicing a string
    // inside a character would panic.
    let offset = match rest.as_bytes() {
        b"" => return local(zone, (y, mo, d, h, mi, sec), frac_ns),
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) =>
        {
            let digit = |c: &u8| i64::from(c - b'0');
            let (oh, om) = (digit(h1) * 10 + digit(h2), digit(m1) * 10 + digit(m2));
            if oh > 23 || om > 59 {
                return Err(format!(
                    "offset {}{oh:02}:{om:02} does not exist (hours 00 to 23, minutes 00 to 59)",
                    char::from(*sign)
                ));
            }
            let v = oh * 3600 + om * 60;
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Err(bad()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    if secs < 0 {
        return Err("time before 1970".into());
    }
    Ok(secs as u64 * 1_000_000_000 + frac_ns)
}

/// A date and time of day (already checked to exist) in `zone`, ns since the epoch. A time
/// a clock change skips or repeats is taken as the clocks give it first (RFC 5545's rule).
fn local(
    zone: &jiff::tz::TimeZone,
    t: (i64, i64, i64, i64, i64, i64),
    frac_ns: u64,
) -> Result<u64, String> {
    let (y, mo, d, h, mi, sec) = t;
    let civil = jiff::civil::DateTime::new(
        y as i16,
        mo as i8,
        d as i8,
        h as i8,
        mi as i8,
        sec as i8,
        frac_ns as i32,
    )
    .map_err(|e| e.to_string())?;
    let ts = zone
        .to_ambiguous_zoned(civil)
        .compatible()
        .map_err(|e| e.to_string())?
        .timestamp();
    u64::try_from(ts.as_nanosecond()).map_err(|_| "time before 1970".to_string())
}

#[cfg(test)]
mod time_tests {
    use super::*;

    /// Issue 39: the times Wireshark and capinfos print, in a given zone, and relative
    /// times spelled out.
    #[test]
    fn test_issue39_local_times_and_spelled_units() {
        let now = 1_800_000_000_000_000_000;
        let utc = jiff::tz::TimeZone::UTC;
        let paris = time_zone(Some("CET-1CEST,M3.5.0,M10.5.0/3")).expect("rule");
        let z = parse_time("2026-11-23T10:00:00Z", now).expect("rfc 3339");
        assert_eq!(parse_time_in("2026-11-23 10:00:00", now, &utc), Ok(z));
        assert_eq!(parse_time_in("2026-11-23 11:00:00", now, &paris), Ok(z));
        assert_eq!(
            parse_time_in("2026-11-23 11:00:00.25", now, &paris),
            Ok(z + 250_000_000)
        );
        assert_eq!(parse_time_in("2026-11-23 11:00", now, &paris), Ok(z));
        assert_eq!(
            parse_time_in("2026-11-23", now, &utc),
            Ok(z - 10 * 3_600_000_000_000)
        );
        // Summer time: two hours ahead.
        let july = parse_time("2026-07-01T10:00:00Z", now).expect("july");
        assert_eq!(parse_time_in("2026-07-01 12:00:00", now, &paris), Ok(july));
        // The offset given wins over the zone.
        assert_eq!(parse_time_in("2026-11-23T10:00:00Z", now, &paris), Ok(z));
        for (rel, secs) in [
            ("-10min", 600),
            ("-2hours", 7200),
            ("-30sec", 30),
            ("-1day", 86_400),
            ("-1week", 604_800),
            ("-15m", 900),
        ] {
            assert_eq!(
                parse_time_in(rel, now, &utc),
                Ok(now - secs * 1_000_000_000),
                "{rel}"
            );
        }
        assert!(parse_time_in("-3fortnights", now, &utc).is_err());
        assert!(parse_time_in("2026-02-31 10:00:00", now, &paris).is_err());
        assert!(time_zone(Some("Not/AZone")).is_err());
    }

    #[test]
    fn test_parse_times() {
        let now = 1_800_000_000_000_000_000;
        assert_eq!(
            parse_time("1700000000", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("1700000000.25", now).unwrap(),
            1_700_000_000_250_000_000
        );
        assert_eq!(parse_time("-15m", now).unwrap(), now - 900_000_000_000);
        assert_eq!(parse_time("-2h", now).unwrap(), now - 7_200_000_000_000);
        assert_eq!(parse_time("-30s", now).unwrap(), now - 30_000_000_000);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-15T00:13:20.5+02:00", now).unwrap(),
            1_700_000_000_500_000_000
        );
        for bad in [
            "",
            "yesterday",
            "-15",
            "2023-13-01T00:00:00Z",
            "1.2.3",
            "-5x",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    /// Issue 40: `2026-02-31` was taken as March 3. A date or time of day that does not
    /// exist is refused, with one line that says which part is wrong.
    #[test]
    fn issue40_impossible_dates_are_refused() {
        let now = 1_800_000_000_000_000_000;
        for (bad, says) in [
            ("2026-02-31T00:00:00Z", "February 2026 has 28 days"),
            ("2026-02-29T12:00:00Z", "February 2026 has 28 days"),
            ("2100-02-29T12:00:00Z", "February 2100 has 28 days"),
            ("2026-04-31T00:00:00Z", "April 2026 has 30 days"),
            ("2026-01-32T00:00:00Z", "January 2026 has 31 days"),
            ("2026-01-00T00:00:00Z", "day 00"),
            ("2026-13-01T00:00:00Z", "month 13"),
            ("2026-00-01T00:00:00Z", "month 00"),
            ("2026-01-01T24:00:00Z", "hour 24"),
            ("2026-01-01T23:60:00Z", "minute 60"),
            ("2026-01-01T23:59:61Z", "second 61"),
            ("2026-01-01T10:00:60Z", "second 60"),
            ("2026-01-01T10:00:00+24:00", "offset +24:00"),
            ("2026-01-01T10:00:00+05:60", "offset +05:60"),
        ] {
            let e = parse_time(bad, now).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: one line: {e}");
        }
        // The days that do exist, leap days among them.
        for (good, secs) in [
            ("2024-02-29T00:00:00Z", 1_709_164_800u64),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("2026-02-28T23:59:59Z", 1_772_323_199),
            ("2026-12-31T23:59:59.5Z", 1_798_761_599),
        ] {
            let got = parse_time(good, now).unwrap_or_else(|e| panic!("{good}: {e}"));
            assert_eq!(got / 1_000_000_000, secs, "{good}");
        }
    }

    #[test]
    fn test_non_ascii_anywhere_is_an_error_not_a_panic() {
        let now = 1_800_000_000_000_000_000;
        let good = [
            "2023-11-14T22:13:20+05:30",
            "2023-11-14T22:13:20.5Z",
            "1700000000.25",
            "-15m",
        ];
        for g in good {
            for i in 0..=g.len() {
                for c in ["\u{e9}", "\u{20ac}", "\u{1f600}", "\u{0}"] {
                    // Inserted before byte i, and in place of the byte at i.
                    let with = format!("{}{c}{}", &g[..i], &g[i..]);
                    assert!(parse_time(&with, now).is_err(), "{with:?}");
                    if i < g.len() {
                        let instead = format!("{}{c}{}", &g[..i], &g[i + 1..]);
                        assert!(parse_time(&instead, now).is_err(), "{instead:?}");
                    }
                }
            }
        }
        // The offset a user would type with a Unicode minus sign.
        assert!(parse_time("2023-11-14T22:13:20\u{2212}05:00", now).is_err());
        assert!(parse_time("2023-11-14T22:13:20+24:00", now).is_err());
    }
}
