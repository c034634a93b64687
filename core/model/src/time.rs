//! Time as ProxOps writes it: RFC 3339 UTC (`YYYY-MM-DDTHH:MM:SSZ`) of a
//! Unix timestamp, for `/status`, `proxops status`, apply's JSON report,
//! lock holder files and SOPS `lastmodified`.
//!
//! Owns the one calendar conversion of the project, so that every document
//! that carries a time spells it the same way. Must never read a clock: the
//! timestamp is always an argument.

/// Seconds since the Unix epoch, handed in by the caller.
pub type Timestamp = u64;

/// Formats seconds since the Unix epoch as RFC 3339 UTC,
/// `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar).
pub fn rfc3339(ts: Timestamp) -> String {
    let days = ts / 86_400;
    let secs = ts % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Year, month (1–12) and day (1–31) of the day `days` after 1970-01-01
/// (Howard Hinnant's `civil_from_days`, for non-negative day numbers: eras
/// of 400 years starting on 1 March).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from 1 March
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}
