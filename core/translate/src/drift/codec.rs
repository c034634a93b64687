//! One codec per PVE wire type, in the manner of rustls' `Codec`: the
//! value a manifest field holds is encoded into the text PVE takes, and the
//! text PVE reports is decoded back into that value. Drift compares through
//! the codec (PVE's equivalence: ` 4` is `4`, `yes` is `1`), adoption
//! decodes, the create form encodes: one pair of functions per wire type,
//! so a key's three translations cannot disagree.
//!
//! A scalar row of an owned-key table is a [`Field`]: a PVE key, the
//! manifest field's `get`/`set`, a codec, the rule for an absent live key,
//! the impact of a change (computed from the old value, the new value and
//! the guest's hotplug settings) and the documentation line the schema and
//! the docs tables are generated from. (Rules across fields, such as
//! `balloon` ≤ `memory`, are the manifest's: `validate` checks them before
//! anything is translated.)
//! This module does no I/O.

use crate::change::{Impact, ParamValue};
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;

use super::hotplug::Hotplug;
use super::owned::Input;
use super::{Acc, DriftError};

/// A wire value the codec cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreadable;

/// One PVE wire type.
pub(crate) trait Codec: Sync {
    /// The value a manifest field holds.
    type Value: PartialEq + Clone;
    /// The text PVE takes.
    fn encode(&self, v: &Self::Value) -> String;
    /// The text PVE reports, read back.
    fn decode(&self, wire: &str) -> Result<Self::Value, Unreadable>;
    /// PVE's equivalence: does the live text already hold `want`?
    fn same(&self, live: &str, want: &Self::Value) -> bool {
        self.decode(live).is_ok_and(|l| &l == want)
    }
}

/// A whole number at least `min` (`4` = ` 4`).
pub(crate) struct Count {
    pub min: u32,
}

impl Codec for Count {
    type Value = u32;
    fn encode(&self, v: &u32) -> String {
        v.to_string()
    }
    fn decode(&self, wire: &str) -> Result<u32, Unreadable> {
        match wire.trim().parse::<u32>() {
            Ok(n) if n >= self.min => Ok(n),
            _ => Err(Unreadable),
        }
    }
    /// Any whole number PVE holds compares, in range or not.
    fn same(&self, live: &str, want: &u32) -> bool {
        live.trim().parse::<u32>() == Ok(*want)
    }
}

/// A boolean: PVE reads `1`/`0` (and `yes`, `on`, `true`, …); written
/// `1`/`0`. A value PVE holds but nobody can read counts as PVE's
/// `default` when compared (PVE falls back to it too).
pub(crate) struct Flag {
    pub default: bool,
}

impl Codec for Flag {
    type Value = bool;
    fn encode(&self, v: &bool) -> String {
        proxops_model::wire::write_bool(*v).to_owned()
    }
    fn decode(&self, wire: &str) -> Result<bool, Unreadable> {
        proxops_model::wire::parse_bool(wire).map_err(|_| Unreadable)
    }
    fn same(&self, live: &str, want: &bool) -> bool {
        self.decode(live).unwrap_or(self.default) == *want
    }
}

/// Memory in MiB, a number PVE may spell `current=<MiB>`; more than a byte
/// count can hold is unreadable.
pub(crate) struct MiB {
    pub min: u64,
}

impl Codec for MiB {
    type Value = u64;
    fn encode(&self, v: &u64) -> String {
        v.to_string()
    }
    fn decode(&self, wire: &str) -> Result<u64, Unreadable> {
        match proxops_model::wire::parse_memory_mib(wire) {
            Ok(m) if m >= self.min && m.checked_mul(1 << 20).is_some() => Ok(m),
            _ => Err(Unreadable),
        }
    }
    fn same(&self, live: &str, want: &u64) -> bool {
        proxops_model::wire::parse_memory_mib(live) == Ok(*want)
    }
}

/// A share of host CPUs (`cpulimit`): a number from 0 to `max`, fractions
/// allowed, written as ProxOps writes rates (`2` = `2.0`).
pub(crate) struct Rate {
    pub max: f64,
}

impl Codec for Rate {
    type Value = f64;
    fn encode(&self, v: &f64) -> String {
        super::rate_text(*v)
    }
    fn decode(&self, wire: &str) -> Result<f64, Unreadable> {
        match wire.trim().parse::<f64>() {
            Ok(v) if (0.0..=self.max).contains(&v) => Ok(v),
            _ => Err(Unreadable),
        }
    }
    fn same(&self, live: &str, want: &f64) -> bool {
        super::same_rate(Some(live), *want)
    }
}

/// What an absent live key means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// Nothing: no desired value is satisfied by it.
    Unset,
    /// PVE's default, as PVE would report it.
    PveDefault(&'static str),
    /// The live value of another key (`balloon` absent is `memory`).
    SameAs(&'static str),
}

impl Absent {
    /// The live text a key stands for: its own, else what its absence means.
    pub(crate) fn resolve<'a>(
        &self,
        cfg: &'a LiveConfig,
        live: Option<&'a str>,
    ) -> Option<&'a str> {
        live.or(match self {
            Absent::Unset => None,
            Absent::PveDefault(d) => Some(d),
            Absent::SameAs(other) => cfg.get(other),
        })
    }
}

/// What a change costs a running guest.
#[derive(Clone, Copy)]
pub(crate) enum ImpactRule {
    /// Always this.
    Fixed(Impact),
    /// `Live` when the guest's hotplug settings and the old and new values
    /// (`None`: absent) let PVE apply it at once, else the impact given.
    Hot(Impact, fn(&Hotplug, Option<&str>, Option<&str>) -> bool),
}

impl ImpactRule {
    /// The impact of changing `from` into `to` on a guest with `hotplug`.
    pub(crate) fn of(&self, hotplug: &Hotplug, from: Option<&str>, to: Option<&str>) -> Impact {
        match self {
            ImpactRule::Fixed(i) => *i,
            ImpactRule::Hot(i, live) => {
                if live(hotplug, from, to) {
                    Impact::Live
                } else {
                    *i
                }
            }
        }
    }

    /// The impact when PVE cannot apply the change live.
    pub(crate) fn table(&self) -> Impact {
        match self {
            ImpactRule::Fixed(i) | ImpactRule::Hot(i, _) => *i,
        }
    }
}

/// Which live values adoption declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adopt {
    /// Every readable value.
    Always,
    /// Every readable value but PVE's default (`onboot: 0` is not
    /// declared: it is what an absent field means too).
    UnlessDefault,
}

/// What the schema and the docs say about a field beyond its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doc {
    /// `x-default`: what an absent field means.
    pub default: &'static str,
    /// `x-impact-note`: when the impact differs from the table's.
    pub impact_note: Option<&'static str>,
}

/// A row's desired value from the manifest being translated.
pub(crate) type Getter<S, V> = fn(&Input<'_, S>) -> Result<Option<V>, DriftError>;

/// One scalar PVE key a guest kind owns.
pub(crate) struct Field<S: 'static, C: Codec + 'static> {
    /// The PVE key.
    pub key: &'static str,
    /// The manifest field that owns it.
    pub path: &'static str,
    pub codec: C,
    /// The desired value; `None` when the manifest does not own the key.
    pub get: Getter<S, C::Value>,
    /// The adopted value into the manifest being built.
    pub set: fn(&mut S, C::Value),
    pub absent: Absent,
    pub impact: ImpactRule,
    pub adopt: Adopt,
    /// A gap's note when PVE has no value (`None`: an absent key is simply
    /// not declared).
    pub missing: Option<&'static str>,
    /// A gap's note when PVE's value is unreadable.
    pub unreadable: &'static str,
    pub doc: Doc,
}

impl<S> Field<S, MiB> {
    /// `memory`, required: a whole, non-zero number of MiB; unset or
    /// unreadable on PVE is a gap and the manifest's 512 MiB, which the
    /// first apply writes.
    pub(crate) const fn memory(
        get: Getter<S, u64>,
        set: fn(&mut S, u64),
        impact: ImpactRule,
        impact_note: Option<&'static str>,
    ) -> Field<S, MiB> {
        Field {
            key: "memory",
            path: "spec.memory",
            codec: MiB { min: 1 },
            get,
            set,
            absent: Absent::Unset,
            impact,
            adopt: Adopt::Always,
            missing: Some(
                "memory not set on PVE (default 512 MiB): the manifest says 512MiB and the first apply writes it",
            ),
            unreadable: "memory unreadable: the manifest says 512MiB and the first apply writes it",
            doc: Doc {
                default: "— (required)",
                impact_note,
            },
        }
    }
}

/// A scalar row behind one interface, whatever its codec.
pub(crate) trait Scalar<S>: Sync {
    fn key(&self) -> &'static str;
    fn path(&self) -> &'static str;
    fn impact(&self) -> &ImpactRule;
    fn doc(&self) -> &Doc;
    fn absent(&self) -> &Absent;
    fn desired(&self, input: &Input<'_, S>) -> Result<Option<ParamValue>, DriftError>;
    fn drift(
        &self,
        input: &Input<'_, S>,
        cfg: &LiveConfig,
        acc: &mut Acc,
    ) -> Result<(), DriftError>;
    fn adopt(&self, cx: &mut GuestCx<'_>, spec: &mut S);
}

impl<S: Sync, C: Codec> Scalar<S> for Field<S, C>
where
    C::Value: Sync,
{
    fn key(&self) -> &'static str {
        self.key
    }
    fn path(&self) -> &'static str {
        self.path
    }
    fn impact(&self) -> &ImpactRule {
        &self.impact
    }
    fn doc(&self) -> &Doc {
        &self.doc
    }
    fn absent(&self) -> &Absent {
        &self.absent
    }

    fn desired(&self, input: &Input<'_, S>) -> Result<Option<ParamValue>, DriftError> {
        Ok((self.get)(input)?.map(|v| ParamValue::Plain(self.codec.encode(&v))))
    }

    fn drift(
        &self,
        input: &Input<'_, S>,
        cfg: &LiveConfig,
        acc: &mut Acc,
    ) -> Result<(), DriftError> {
        let Some(want) = (self.get)(input)? else {
            return Ok(());
        };
        let live = cfg.get(self.key);
        if self
            .absent
            .resolve(cfg, live)
            .is_some_and(|l| self.codec.same(l, &want))
        {
            return Ok(());
        }
        let to = self.codec.encode(&want);
        let impact = self.impact.of(acc.hotplug(), live, Some(&to));
        acc.set_decided(self.key, live, ParamValue::Plain(to), impact);
        Ok(())
    }

    fn adopt(&self, cx: &mut GuestCx<'_>, spec: &mut S) {
        let Some(live) = cx.take(self.key) else {
            if let Some(note) = self.missing {
                cx.gap(self.key, None, note);
            }
            return;
        };
        match self.codec.decode(live) {
            Ok(v) => {
                let default = match self.absent {
                    Absent::PveDefault(d) => self.codec.decode(d).ok(),
                    Absent::Unset | Absent::SameAs(_) => None,
                };
                if self.adopt == Adopt::Always || default.as_ref() != Some(&v) {
                    (self.set)(spec, v);
                }
            }
            Err(Unreadable) => cx.gap(self.key, Some(live), self.unreadable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_codec_reads_back_what_it_writes() {
        assert_eq!(Count { min: 1 }.decode(&Count { min: 1 }.encode(&4)), Ok(4));
        assert_eq!(Count { min: 1 }.decode("0"), Err(Unreadable));
        assert!(Count { min: 1 }.same(" 4", &4));
        let flag = Flag { default: true };
        assert_eq!(flag.decode(&flag.encode(&false)), Ok(false));
        assert_eq!(flag.decode("yes"), Ok(true));
        assert!(flag.same("bogus", &true));
        assert_eq!(MiB { min: 0 }.decode("current=2048"), Ok(2048));
        assert_eq!(MiB { min: 1 }.decode("0"), Err(Unreadable));
        assert_eq!(Rate { max: 128.0 }.decode("129"), Err(Unreadable));
        assert!(Rate { max: 128.0 }.same("2", &2.0));
    }
}
