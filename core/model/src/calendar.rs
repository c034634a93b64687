//! PVE's calendar events (`pve-calendar-event`, a backup job's
//! `schedule`), accepted or refused as PVE does.
//!
//! pve-common `PVE/CalendarEvent.pm` `pve_verify_calendar_event` trims the
//! text, refuses an empty one and hands the rest to proxmox-rs
//! `proxmox-time/src/calendar_event.rs` (`FromStr for CalendarEvent`:
//! `parse_complete_line` around `parse_calendar_event_incomplete`). That
//! parser is made of nom combinators whose every refusal is recoverable, so
//! an optional part that does not parse is stepped back over and the whole
//! text must be consumed. The functions below follow the combinators one
//! by one: each takes the text still to parse and answers the rest, or
//! `None` where nom fails. Only acceptance is modelled, not when an event
//! next fires.

/// `minutely`, `hourly`, …: the whole text (after a trailing `UTC`).
const KEYWORDS: [&str; 10] = [
    "minutely",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "quarterly",
    "semiannually",
    "semi-annually",
];

/// proxmox-time `week_days.rs` `parse_weekday`: full or three-letter
/// names, any case.
const WEEKDAYS: [&str; 14] = [
    "monday",
    "mon",
    "tuesday",
    "tue",
    "wednesday",
    "wed",
    "thursday",
    "thu",
    "friday",
    "fri",
    "saturday",
    "sat",
    "sunday",
    "sun",
];

/// `Ok` when PVE accepts `text` as a calendar event, else PVE's reason.
pub fn check(text: &str) -> Result<(), String> {
    let event = text.trim();
    if event.is_empty() {
        return Err("unable to parse calendar event - event is empty".into());
    }
    match event_rest(event) {
        Some("") => Ok(()),
        _ => Err("unable to parse calendar event".into()),
    }
}

/// `parse_calendar_event_incomplete`: the unparsed rest.
fn event_rest(text: &str) -> Option<&str> {
    let mut i = text
        .strip_suffix("UTC")
        .map_or(text, |t| t.trim_end_matches(' '));
    let mut has_spec = false;
    if i.starts_with(|c: char| c.is_ascii_alphabetic()) {
        if KEYWORDS.contains(&i) {
            return Some("");
        }
        i = space0(list1(i, weekday_range)?);
        has_spec = true;
    }
    if let Some(rest) = date_spec(i) {
        i = space0(rest);
        has_spec = true;
    }
    if let Some(rest) = time_spec(i) {
        i = rest;
        has_spec = true;
    }
    has_spec.then_some(i)
}

fn space0(i: &str) -> &str {
    i.trim_start_matches([' ', '\t'])
}

/// nom `separated_list1` with `,`: a separator whose item fails is not
/// consumed.
fn list1<'a>(i: &'a str, item: impl Fn(&'a str) -> Option<&'a str>) -> Option<&'a str> {
    let mut rest = item(i)?;
    while let Some(after) = rest.strip_prefix(',') {
        match item(after) {
            Some(r) => rest = r,
            None => break,
        }
    }
    Some(rest)
}

fn weekday(i: &str) -> Option<&str> {
    let n = i.bytes().take_while(u8::is_ascii_alphabetic).count();
    let word = i.get(..n)?.to_ascii_lowercase();
    (n > 0 && WEEKDAYS.contains(&word.as_str())).then(|| &i[n..])
}

/// `parse_weekdays_range`: `mon` or `mon..fri` (a range may wrap).
fn weekday_range(i: &str) -> Option<&str> {
    let rest = weekday(i)?;
    if let Some(end) = rest.strip_prefix("..").and_then(weekday) {
        return Some(end);
    }
    Some(rest)
}

/// `parse_time_comp(max)`: digits as a u32 below `max`.
fn comp(i: &str, max: u64) -> Option<(&str, u64)> {
    let n = i.bytes().take_while(u8::is_ascii_digit).count();
    let value: u64 = i.get(..n)?.parse().ok()?;
    (n > 0 && value <= u64::from(u32::MAX) && value < max).then(|| (&i[n..], value))
}

/// `parse_date_time_comp`: `v`, `a..b`, `v/r` or `a..b/r` (a range must
/// not run backwards).
fn date_time_comp(i: &str, max: u64) -> Option<&str> {
    let (mut i, value) = comp(i, max)?;
    if let Some((rest, end)) = i.strip_prefix("..").and_then(|r| comp(r, max)) {
        if value > end {
            return None;
        }
        i = rest;
    }
    match i.strip_prefix('/') {
        Some(r) => comp(r, max).map(|(rest, _)| rest),
        None => Some(i),
    }
}

/// `parse_date_time_comp_list`: `*`, `*/r` (r > 0) or a comma list.
fn comp_list(i: &str, max: u64) -> Option<&str> {
    if let Some(rest) = i.strip_prefix('*') {
        if let Some(r) = rest.strip_prefix('/') {
            let (after, repeat) = comp(r, max)?;
            if repeat > 0 {
                return Some(after);
            }
        }
        return Some(rest);
    }
    list1(i, |x| date_time_comp(x, max))
}

/// `parse_time_spec`: `[hour:]minute[:second]`.
fn time_spec(mut i: &str) -> Option<&str> {
    if let Some(after_hour) = comp_list(i, 24).and_then(|r| r.strip_prefix(':')) {
        i = after_hour;
    }
    let mut i = comp_list(i, 60)?;
    if let Some(seconds) = i.strip_prefix(':').and_then(|r| comp_list(r, 60)) {
        i = seconds;
    }
    Some(i)
}

/// `parse_date_spec`: `year-month-day` or `month-day`.
fn date_spec(i: &str) -> Option<&str> {
    fn dashed(i: &str, max: u64) -> Option<&str> {
        i.strip_prefix('-').and_then(|r| comp_list(r, max))
    }
    if let Some(day) = comp_list(i, 2200)
        .and_then(|r| dashed(r, 13))
        .and_then(|r| dashed(r, 32))
    {
        return Some(day);
    }
    comp_list(i, 13).and_then(|r| dashed(r, 32))
}

#[cfg(test)]
mod tests {
    use super::check;

    /// proxmox-time `calendar_event.rs` `test_calendar_event_weekday` and
    /// `test_calendar_event_*` accept these; pve-common's
    /// `test/calendar_event_test.pl` uses the same forms.
    #[test]
    fn accepts_what_pve_accepts() {
        for ok in [
            "*/15",
            "21:00",
            "mon..fri 21:00",
            "sat,sun 02:30",
            "sat..mon 1:00",
            "daily",
            "semi-annually",
            "hourly UTC",
            "2024-01-01 00:00",
            "*-1..7 4:00",
            "12-24",
            "0/5",
            "0..30/10",
            "mon",
            "Fri 22:00:30",
            // `25:00` is minute 25, second 0 (nom steps back over the hour).
            "25:00",
            "  21:00  ",
            "mon 21:00 UTC",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn refuses_what_pve_refuses() {
        for bad in [
            "",
            "   ",
            "*/0",
            "24:61",
            "noon",
            "mon..fry 21:00",
            "21:00 mon",
            "5..3",
            "2024-13-01",
            "daily 21:00",
            "21h",
            "99999999999",
        ] {
            assert!(check(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
