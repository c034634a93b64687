//! The dashboard `proxops run` serves at `/`: HTML rendered on the server
//! from the status store, the same data `/status` and `/metrics` render.
//!
//! Owns the pages and their addresses — the overview at `/` (every
//! cluster's sync state, last cycle, commit and object counts; the object
//! table with filters by cluster, kind and state, `/?cluster=…&kind=…&state=…`;
//! the recent cycles as a chart and a timeline) and one page per object at
//! `/objects/<cluster>/<kind>/<name>` (manifest, live node and id, state,
//! its pending and last planned actions worded exactly as the text plan
//! words them, anomalies, hold).
//!
//! Works with no network beyond the daemon: the style and the one small
//! script (which reloads the page every [`REFRESH_SECS`] and keeps its
//! scroll position; without it a `<noscript>` refresh does the same) are
//! embedded in every page, nothing is fetched from elsewhere, and the
//! server's Content-Security-Policy allows nothing else ([`STYLE`] and
//! [`SCRIPT`] are what it hashes). States are told by words and glyphs;
//! colour only adds to them.
//!
//! Must never: read a clock (`now` is an argument), show anything
//! `/status` does not (the store holds no secret, and field values are
//! already `<secret>` where they are secret), or print outside text
//! unescaped. Same store, path and `now`: same bytes.

mod chart;
mod html;
mod object;
mod overview;

use crate::exec::Timestamp;
use crate::report::StatusStore;

/// The content type of every dashboard page.
pub const CONTENT_TYPE: &str = "text/html; charset=utf-8";
/// The style sheet embedded in every page.
pub const STYLE: &str = include_str!("style.css");
/// The script embedded in every page: reload every [`REFRESH_SECS`],
/// keeping the scroll position; wait while a filter is being chosen.
pub const SCRIPT: &str = include_str!("refresh.js");
/// Seconds between two reloads of a page.
pub const REFRESH_SECS: u64 = 15;

/// A rendered page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Html {
    pub status: u16,
    pub body: String,
}

/// The page at `path` with query string `query` (without `?`), from
/// `store` as of `now`; a `404` page for an address that is none.
pub fn render(store: &StatusStore, now: Timestamp, path: &str, query: &str) -> Html {
    match Page::parse(path, query) {
        Some(Page::Overview(filter)) => Html {
            status: 200,
            body: overview::render(store, now, &filter),
        },
        Some(Page::Object {
            cluster,
            kind,
            name,
        }) => match store.object(&cluster, &kind, &name) {
            Some(o) => Html {
                status: 200,
                body: object::render(store, now, o),
            },
            None => not_found(
                store,
                now,
                &format!("No object {kind}/{name} in cluster {cluster}"),
            ),
        },
        None => not_found(store, now, "No such page"),
    }
}

fn not_found(store: &StatusStore, now: Timestamp, what: &str) -> Html {
    let body = format!(
        "<h1>{}</h1>\n<p>It may have been pruned, or renamed in the repository. <a href=\"/\">Back to the overview</a>.</p>\n",
        html::escape(what)
    );
    Html {
        status: 404,
        body: html::page(store, now, "Not found", &body),
    }
}

/// The dashboard's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// `/`, with the object table's filters.
    Overview(Filter),
    /// `/objects/<cluster>/<kind>/<name>`.
    Object {
        cluster: String,
        kind: String,
        name: String,
    },
}

/// The object table's filters: each `None` when not given (or empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub cluster: Option<String>,
    pub kind: Option<String>,
    /// An object state (`drift`, `failed`, …) or `attention`: every
    /// object that is not converged.
    pub state: Option<String>,
}

impl Page {
    /// The page at `path` and `query`; `None` for no page.
    pub fn parse(path: &str, query: &str) -> Option<Page> {
        if path == "/" {
            return Some(Page::Overview(Filter::parse(query)));
        }
        let rest = path.strip_prefix("/objects/")?;
        let mut parts = rest.split('/').map(decode);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(cluster)), Some(Some(kind)), Some(Some(name)), None)
                if !cluster.is_empty() && !kind.is_empty() && !name.is_empty() =>
            {
                Some(Page::Object {
                    cluster,
                    kind,
                    name,
                })
            }
            _ => None,
        }
    }
}

impl Filter {
    fn parse(query: &str) -> Filter {
        let mut f = Filter::default();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let Some(value) = decode(value).filter(|v| !v.is_empty()) else {
                continue;
            };
            match key {
                "cluster" => f.cluster = Some(value),
                "kind" => f.kind = Some(value),
                "state" => f.state = Some(value),
                _ => {}
            }
        }
        f
    }
}

/// A query value or path segment, percent-decoded (`+` is a space);
/// `None` when it does not decode to UTF-8.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_found_by_path_and_filters_by_query() {
        assert_eq!(
            Page::parse("/", "cluster=home&state=drift&x=1&kind="),
            Some(Page::Overview(Filter {
                cluster: Some("home".into()),
                kind: None,
                state: Some("drift".into()),
            }))
        );
        assert_eq!(
            Page::parse("/objects/home/VM/web-01", ""),
            Some(Page::Object {
                cluster: "home".into(),
                kind: "VM".into(),
                name: "web-01".into(),
            })
        );
        assert_eq!(
            Page::parse("/objects/home/VM/a%20b", "").map(|p| match p {
                Page::Object { name, .. } => name,
                Page::Overview(_) => String::new(),
            }),
            Some("a b".into())
        );
        for none in [
            "/objects/home/VM",
            "/objects/home/VM/web/x",
            "/objects//VM/web",
            "/objects/home/VM/%zz",
            "/objects/home/VM/%ff",
            "/index.html",
            "/status/x",
        ] {
            assert_eq!(Page::parse(none, ""), None, "{none}");
        }
    }
}
