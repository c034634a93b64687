"""PVE's calendar events (`format => 'pve-calendar-event'`), accepted or refused as PVE does.

pve-common `PVE/CalendarEvent.pm` `pve_verify_calendar_event` trims the text, refuses an
empty one ("unable to parse calendar event - event is empty") and hands the rest to
`Proxmox::RS::CalendarEvent->new`, which is proxmox-rs `proxmox-time/src/calendar_event.rs`
(`FromStr for CalendarEvent`: `parse_complete_line` around `parse_calendar_event_incomplete`).
That parser is built from nom combinators; every refusal in it is a recoverable nom error, so
`opt(...)` and `separated_list1(...)` step back over a part that does not parse, and the whole
text must be consumed (`all_consuming`). The functions below follow the combinators one by one:
each takes the text still to parse and answers (rest, value), or None where nom fails.

Only acceptance is modelled; when an event next fires (`compute_next_event`) is not.
"""

# `minutely`, `hourly`, ... : the whole text (after a trailing `UTC`) is the keyword.
KEYWORDS = frozenset(('minutely', 'hourly', 'daily', 'weekly', 'monthly', 'yearly', 'annually',
                      'quarterly', 'semiannually', 'semi-annually'))

# proxmox-time `week_days.rs` `parse_weekday`: full or three-letter names, any case.
WEEKDAYS = {'monday': 0, 'mon': 0, 'tuesday': 1, 'tue': 1, 'wednesday': 2, 'wed': 2, 'thursday': 3,
            'thu': 3, 'friday': 4, 'fri': 4, 'saturday': 5, 'sat': 5, 'sunday': 6, 'sun': 6}

U32_MAX = (1 << 32) - 1


def error(text):
    """None when PVE accepts `text` as a calendar event, else the reason (PVE's words)."""
    event = text.strip()  # PVE::Tools::trim
    if event == '':
        return 'unable to parse calendar event - event is empty'
    rest = _event(event)
    if rest is None or rest != '':
        return 'unable to parse calendar event'
    return None


def _event(i):
    """`parse_calendar_event_incomplete`: the unparsed rest, or None."""
    if i.endswith('UTC'):
        i = i[:-3].rstrip(' ')
    has_spec = False
    if i[:1].isascii() and i[:1].isalpha():
        if i in KEYWORDS:
            return ''
        days = _separated_list1(i, _weekday_range)
        if days is None:
            return None
        i = _space0(days[0])
        has_spec = True
    date = _date_spec(i)
    if date is not None:
        i = _space0(date[0])
        has_spec = True
    time = _time_spec(i)
    if time is not None:
        i = time[0]
        has_spec = True
    return i if has_spec else None


def _space0(i):
    """nom `space0`: spaces and tabs."""
    return i.lstrip(' \t')


def _separated_list1(i, item, sep=','):
    """nom `separated_list1`: one item at least; a separator whose item fails is not consumed."""
    first = item(i)
    if first is None:
        return None
    rest, values = first[0], [first[1]]
    while rest.startswith(sep):
        nxt = item(rest[len(sep):])
        if nxt is None:
            break
        rest = nxt[0]
        values.append(nxt[1])
    return rest, values


def _alpha1(i):
    n = 0
    while n < len(i) and i[n].isascii() and i[n].isalpha():
        n += 1
    return (i[n:], i[:n]) if n else None


def _weekday(i):
    word = _alpha1(i)
    if word is None or word[1].lower() not in WEEKDAYS:
        return None
    return word[0], WEEKDAYS[word[1].lower()]


def _weekday_range(i):
    """`parse_weekdays_range`: `mon` or `mon..fri` (a range may wrap: `sat..mon`)."""
    start = _weekday(i)
    if start is None:
        return None
    if start[0].startswith('..'):
        end = _weekday(start[0][2:])
        if end is not None:
            return end[0], (start[1], end[1])
    return start[0], (start[1], start[1])


def _digits(i):
    n = 0
    while n < len(i) and i[n] in '0123456789':
        n += 1
    return n


def _time_comp(maximum):
    """`parse_time_comp(max)`: digits as a u32 below `maximum`."""
    def parse(i):
        n = _digits(i)
        if n == 0 or int(i[:n]) > U32_MAX or int(i[:n]) >= maximum:
            return None
        return i[n:], int(i[:n])
    return parse


def _date_time_comp(maximum):
    """`parse_date_time_comp`: `v`, `a..b`, `v/r` or `a..b/r` (a range must not run backwards)."""
    comp = _time_comp(maximum)

    def parse(i):
        first = comp(i)
        if first is None:
            return None
        i, value = first
        if i.startswith('..'):
            end = comp(i[2:])
            if end is not None:
                i = end[0]
                if value > end[1]:
                    return None
                if i.startswith('/'):
                    return comp(i[1:])
                return i, value
        if i.startswith('/'):
            return comp(i[1:])
        return i, value
    return parse


def _date_time_comp_list(maximum):
    """`parse_date_time_comp_list`: `*`, `*/r` (r > 0) or a comma list of components."""
    comp = _date_time_comp(maximum)

    def parse(i):
        if i.startswith('*'):
            rest = i[1:]
            if rest.startswith('/'):
                repeat = _time_comp(maximum)(rest[1:])
                if repeat is None:
                    return None
                if repeat[1] > 0:
                    return repeat[0], None
            return rest, None
        return _separated_list1(i, comp)
    return parse


def _time_spec(i):
    """`parse_time_spec`: `[hour:]minute[:second]`."""
    hour = _date_time_comp_list(24)(i)
    if hour is not None and hour[0].startswith(':'):
        i = hour[0][1:]
    minute = _date_time_comp_list(60)(i)
    if minute is None:
        return None
    i = minute[0]
    if i.startswith(':'):
        second = _date_time_comp_list(60)(i[1:])
        if second is not None:
            i = second[0]
    return i, None


def _date_spec(i):
    """`parse_date_spec`: `year-month-day` or `month-day`."""
    def dashed(i, maximum):
        if not i.startswith('-'):
            return None
        return _date_time_comp_list(maximum)(i[1:])

    year = _date_time_comp_list(2200)(i)
    if year is not None:
        month = dashed(year[0], 13)
        day = dashed(month[0], 32) if month is not None else None
        if day is not None:
            return day[0], None
    month = _date_time_comp_list(13)(i)
    if month is not None:
        day = dashed(month[0], 32)
        if day is not None:
            return day[0], None
    return None
