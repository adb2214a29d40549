//! The register's receipt printer, and the footer it prints under every
//! receipt: a setting, the register's own, which the head office may wish
//! another. The printer carries a wish out through the replica library's
//! wishes API: it takes a footer while it is on and when it fits on its
//! 40 characters a line; off, the wish waits until it is back on; too long,
//! the wish is refused and the register's footer stands.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use magic_sync_replica::{CarryOut, Outcome, Wish};

/// How many characters the printer prints on a line.
pub const WIDTH: usize = 40;

/// The footer a register prints until it is told another.
pub const FIRST_FOOTER: &str = "Thank you for shopping with us";

/// Whether a footer fits the printer: why not, when it does not.
pub fn misfit(text: &str) -> Option<String> {
    let length = text.chars().count();
    if text.trim().is_empty() {
        Some("a footer has some text".to_owned())
    } else if length > WIDTH {
        Some(format!(
            "\"{text}\" is {length} characters, longer than the printer's {WIDTH} characters"
        ))
    } else {
        None
    }
}

/// The printer: on or off (the register's page switches it).
#[derive(Clone)]
pub struct Printer {
    on: Arc<AtomicBool>,
}

impl Printer {
    pub fn new() -> Printer {
        Printer {
            on: Arc::new(AtomicBool::new(true)),
        }
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    pub fn switch(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }
}

impl CarryOut for Printer {
    /// A footer wished: refused when it does not fit, waiting while the
    /// printer is off, applied otherwise (the engine then writes the row).
    fn carry_out(&self, wish: &Wish) -> Outcome {
        let Some(text) = wish.wanted.get("text").and_then(|t| t.as_str()) else {
            return Outcome::Refused("the wish sets no footer text".to_owned());
        };
        if let Some(why) = misfit(text) {
            return Outcome::Refused(why);
        }
        if !self.is_on() {
            return Outcome::Later("the printer is off".to_owned());
        }
        Outcome::Applied
    }
}

/// The version a footer written now carries: the instant in UTC, RFC 3339
/// to the microsecond (six digits and Z, as the protocol compares
/// versions), past `before` (the version it had) even when the clock is
/// behind it.
pub fn version_after(before: Option<&str>) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let after = before.and_then(micros_of).map_or(now, |b| now.max(b + 1));
    instant(after)
}

/// Microseconds since 1970 as `2026-12-04T15:00:00.123456Z`.
fn instant(micros: i64) -> String {
    let (secs, frac) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `2026-12-04T15:00:00.123456Z` (or fewer fractional digits) as
/// microseconds since 1970; None when it is not such an instant.
fn micros_of(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (date.next()??, date.next()??, date.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (hms.next()??, hms.next()??, hms.next()??);
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
    let frac: i64 = frac.parse().ok()?;
    let secs = days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s;
    Some(secs * 1_000_000 + frac)
}

/// Days since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_written_to_the_microsecond_in_utc() {
        assert_eq!(instant(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            micros_of("2026-10-12T10:00:00.123456Z")
                .map(instant)
                .as_deref(),
            Some("2026-10-12T10:00:00.123456Z")
        );
        assert_eq!(
            micros_of("2024-02-29T23:59:59.5Z").map(instant).as_deref(),
            Some("2024-02-29T23:59:59.500000Z")
        );
    }

    #[test]
    fn a_footer_written_moves_its_version_past_the_one_it_had_even_with_the_clock_behind() {
        let ahead = "2999-01-01T00:00:00.000000Z";
        assert_eq!(version_after(Some(ahead)), "2999-01-01T00:00:00.000001Z");
        assert!(version_after(Some("2000-01-01T00:00:00.000000Z")).as_str() > "2026");
    }

    #[test]
    fn a_footer_longer_than_the_printer_is_refused_saying_so() {
        let long = "x".repeat(41);
        assert_eq!(
            misfit(&long),
            Some(format!(
                "\"{long}\" is 41 characters, longer than the printer's 40 characters"
            ))
        );
        assert_eq!(misfit(&"x".repeat(40)), None);
        assert_eq!(misfit("  "), Some("a footer has some text".to_owned()));
    }
}
