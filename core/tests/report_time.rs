//! RFC 3339 formatting of Unix timestamps and the `/healthz` verdict.

#![allow(clippy::unwrap_used)]

use proxops_core::report::{CycleReport, StatusStore, healthz};
use proxops_core::time::{civil_from_days, rfc3339};

#[test]
fn rfc3339_matches_known_dates() {
    // Each pair checked against `date -u -d @<ts>`.
    let cases = [
        (0, "1970-01-01T00:00:00Z"),
        (86_399, "1970-01-01T23:59:59Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (951_868_800, "2000-03-01T00:00:00Z"),
        (1_700_000_000, "2023-11-14T22:13:20Z"),
        (1_709_164_800, "2024-02-29T00:00:00Z"),
        (1_798_675_200, "2026-12-31T00:00:00Z"),
        (4_102_444_800, "2100-01-01T00:00:00Z"),
        (4_107_456_000, "2100-02-28T00:00:00Z"),
        (4_107_542_400, "2100-03-01T00:00:00Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z"),
    ];
    for (ts, want) in cases {
        assert_eq!(rfc3339(ts), want, "timestamp {ts}");
    }
}

#[test]
fn civil_from_days_walks_every_day_of_four_centuries_without_gaps() {
    // Day by day from 1970 to 2370: the date advances by exactly one day,
    // months have their Gregorian lengths, leap years by the 4/100/400 rule.
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let month_len = |y: u64, m: u64| match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let mut prev = civil_from_days(0);
    assert_eq!(prev, (1970, 1, 1));
    for day in 1..146_097 {
        let (y, m, d) = civil_from_days(day);
        let (py, pm, pd) = prev;
        let expected = if pd < month_len(py, pm) {
            (py, pm, pd + 1)
        } else if pm < 12 {
            (py, pm + 1, 1)
        } else {
            (py + 1, 1, 1)
        };
        assert_eq!((y, m, d), expected, "day {day}");
        prev = (y, m, d);
    }
}

fn store_with_cycle(finished_at: u64, complete: bool) -> StatusStore {
    let mut s = StatusStore::new(1_000);
    s.record_cycle(CycleReport {
        commit: "abc".into(),
        started_at: finished_at - 5,
        finished_at,
        duration_ms: 5_000,
        complete,
        git_fetched_at: Some(finished_at - 5),
        clusters: Vec::new(),
    });
    s
}

#[test]
fn healthz_is_503_before_the_first_cycle() {
    let s = StatusStore::new(1_000);
    assert_eq!(
        healthz(&s, 1_000, 30),
        (503, "no cycle has finished yet\n".to_owned())
    );
}

#[test]
fn healthz_is_200_up_to_two_minutes_after_a_full_cycle_with_a_short_poll_interval() {
    let s = store_with_cycle(2_000, true);
    assert_eq!(healthz(&s, 2_000, 30), (200, "ok\n".to_owned()));
    assert_eq!(healthz(&s, 2_120, 30), (200, "ok\n".to_owned()));
    assert_eq!(
        healthz(&s, 2_121, 30),
        (
            503,
            "last full cycle finished 121 s ago (limit 120 s)\n".to_owned()
        )
    );
}

#[test]
fn healthz_window_is_three_poll_intervals_when_that_is_longer() {
    let s = store_with_cycle(2_000, true);
    assert_eq!(healthz(&s, 2_300, 100).0, 200);
    assert_eq!(
        healthz(&s, 2_301, 100),
        (
            503,
            "last full cycle finished 301 s ago (limit 300 s)\n".to_owned()
        )
    );
}

#[test]
fn healthz_ignores_a_cycle_cut_short_by_shutdown() {
    let s = store_with_cycle(2_000, false);
    assert_eq!(
        healthz(&s, 2_000, 30),
        (503, "no cycle has finished yet\n".to_owned())
    );
}

#[test]
fn healthz_treats_a_clock_that_went_back_as_fresh() {
    let s = store_with_cycle(2_000, true);
    assert_eq!(healthz(&s, 1_500, 30).0, 200);
}
