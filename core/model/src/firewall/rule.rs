//! One firewall rule: its fields, read from and written to PVE's one-line
//! form (the rule lines of pve-firewall's config files, and of a plan) and
//! to and from the fields of PVE's rules API, checked as PVE checks them
//! (`verify_rule` in pve-firewall's `src/PVE/Firewall.pm`).

use core::fmt;

use super::data::MACROS;
use super::grammar::{
    AddrSpec, LogLevel, MAX_GROUP_LEN, PortSpec, Proto, icmp_type_ok, is_guest_iface, is_iface,
    is_object_name,
};

/// Which traffic a rule matches (`type` in/out/forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    In,
    Out,
    Forward,
}

/// What a matching packet gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Accept,
    Drop,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accept => "ACCEPT",
            Verdict::Drop => "DROP",
            Verdict::Reject => "REJECT",
        }
    }

    /// `ACCEPT`, `DROP` or `REJECT`, in capitals as PVE requires.
    pub fn parse(s: &str) -> Option<Verdict> {
        [Verdict::Accept, Verdict::Drop, Verdict::Reject]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// A rule's `type` and `action` together: traffic with a verdict, or the
/// rules of a security group (`type: group`, `action:` its name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Head {
    Traffic(Direction, Verdict),
    Group(String),
}

impl Head {
    /// PVE's `type`, lower case as its API answers.
    pub fn pve_type(&self) -> &'static str {
        match self {
            Head::Traffic(Direction::In, _) => "in",
            Head::Traffic(Direction::Out, _) => "out",
            Head::Traffic(Direction::Forward, _) => "forward",
            Head::Group(_) => "group",
        }
    }

    /// PVE's `action`: the verdict or the group's name.
    pub fn action(&self) -> &str {
        match self {
            Head::Traffic(_, v) => v.as_str(),
            Head::Group(name) => name,
        }
    }
}

/// Where a rule list lives, which decides what its rules may say
/// (`$rule_env_direction_lookup`, `$rule_env_iface_lookup` in Firewall.pm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEnv {
    /// `/cluster/firewall/rules`: in, out, forward, group; any interface.
    Cluster,
    /// A VM's or container's rules: in, out, group; interfaces `netN`.
    Guest,
    /// A security group's rules: in, out, forward; no interface.
    Group,
}

/// A firewall rule, checked: every value is one PVE accepts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    pub head: Head,
    pub enable: bool,
    /// A macro's name as PVE spells it (`SSH`).
    pub macro_name: Option<String>,
    pub iface: Option<String>,
    pub source: Option<AddrSpec>,
    pub dest: Option<AddrSpec>,
    pub proto: Option<Proto>,
    pub dport: Option<PortSpec>,
    pub sport: Option<PortSpec>,
    pub log: Option<LogLevel>,
    pub icmp_type: Option<String>,
    /// Trimmed, never empty, one line.
    pub comment: Option<String>,
}

/// What PVE would refuse about a rule: the API parameter and PVE's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub field: &'static str,
    pub message: String,
}

impl RuleError {
    fn new(field: &'static str, message: impl Into<String>) -> RuleError {
        RuleError {
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A rule's fields as text, before any check: what a manifest, a config
/// line or an API answer gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawRule {
    pub rule_type: String,
    pub action: String,
    pub enable: bool,
    pub macro_name: Option<String>,
    pub iface: Option<String>,
    pub source: Option<String>,
    pub dest: Option<String>,
    pub proto: Option<String>,
    pub dport: Option<String>,
    pub sport: Option<String>,
    pub log: Option<String>,
    pub icmp_type: Option<String>,
    pub comment: Option<String>,
}

/// The optional fields of a rule, by PVE's names, in the order PVE writes
/// them in a config line after the interface (`$format_rules`).
const MATCH_FIELDS: [&str; 7] = [
    "source",
    "dest",
    "proto",
    "dport",
    "sport",
    "log",
    "icmp-type",
];

impl RawRule {
    fn get(&self, field: &str) -> Option<&String> {
        match field {
            "macro" => self.macro_name.as_ref(),
            "iface" => self.iface.as_ref(),
            "source" => self.source.as_ref(),
            "dest" => self.dest.as_ref(),
            "proto" => self.proto.as_ref(),
            "dport" => self.dport.as_ref(),
            "sport" => self.sport.as_ref(),
            "log" => self.log.as_ref(),
            "icmp-type" => self.icmp_type.as_ref(),
            "comment" => self.comment.as_ref(),
            _ => None,
        }
    }

    fn slot(&mut self, field: &str) -> Option<&mut Option<String>> {
        Some(match field {
            "macro" => &mut self.macro_name,
            "iface" => &mut self.iface,
            "source" => &mut self.source,
            "dest" => &mut self.dest,
            "proto" => &mut self.proto,
            "dport" => &mut self.dport,
            "sport" => &mut self.sport,
            "log" => &mut self.log,
            "icmp-type" => &mut self.icmp_type,
            "comment" => &mut self.comment,
            _ => return None,
        })
    }
}

/// The spelling PVE stores for a macro named in any case
/// (`$pve_fw_preferred_macro_names`, `verify_rule`).
pub fn macro_name(s: &str) -> Option<&'static str> {
    MACROS.iter().copied().find(|m| m.eq_ignore_ascii_case(s))
}

impl Rule {
    /// Checks a rule's fields as `verify_rule` does, all errors at once.
    /// An empty optional field counts as absent (`copy_rule_data` deletes
    /// a field given as `''`).
    pub fn from_raw(raw: &RawRule) -> Result<Rule, Vec<RuleError>> {
        let mut errors = Vec::new();
        let mut raw = raw.clone();
        for f in ["macro", "iface", "comment"]
            .into_iter()
            .chain(MATCH_FIELDS)
        {
            if let Some(slot) = raw.slot(f) {
                *slot = slot.take().filter(|v| !v.trim().is_empty());
            }
        }
        let head = head(&raw, &mut errors);
        let mut rule = Rule {
            head: head
                .clone()
                .unwrap_or(Head::Traffic(Direction::In, Verdict::Accept)),
            enable: raw.enable,
            macro_name: None,
            iface: None,
            source: None,
            dest: None,
            proto: None,
            dport: None,
            sport: None,
            log: None,
            icmp_type: None,
            comment: raw.comment.as_deref().map(|c| c.trim().to_string()),
        };
        if rule
            .comment
            .as_deref()
            .is_some_and(|c| c.contains(['\n', '\r']))
        {
            errors.push(RuleError::new("comment", "a comment is one line"));
        }
        if let Some(iface) = &raw.iface {
            if is_iface(iface) {
                rule.iface = Some(iface.clone());
            } else {
                errors.push(RuleError::new(
                    "iface",
                    format!("invalid network interface name '{iface}'"),
                ));
            }
        }
        if matches!(rule.head, Head::Group(_)) {
            // parse_fw_rule reads only `-i` after a group; $format_rules
            // writes nothing else for one.
            for f in std::iter::once("macro").chain(MATCH_FIELDS) {
                if raw.get(f).is_some() {
                    errors.push(RuleError::new(
                        "type",
                        format!("a group rule takes no '{f}'"),
                    ));
                }
            }
        } else {
            match_fields(&raw, &mut rule, &mut errors);
        }
        match (head, errors.is_empty()) {
            (Some(_), true) => Ok(rule),
            _ => Err(errors),
        }
    }

    /// Whether the rule may stand in a list of `env`, with PVE's reasons
    /// when not (`verify_rule` with its `rule_env`).
    pub fn check_env(&self, env: RuleEnv) -> Vec<RuleError> {
        let mut errors = Vec::new();
        let allowed = match (&self.head, env) {
            (Head::Group(_), RuleEnv::Group) => Err("security groups not allowed".to_string()),
            (Head::Traffic(Direction::Forward, _), RuleEnv::Guest) => {
                Err("invalid rule type 'forward' for rule_env 'vm'".to_string())
            }
            _ => Ok(()),
        };
        if let Err(msg) = allowed {
            errors.push(RuleError::new("type", msg));
        }
        if let Some(iface) = &self.iface {
            match env {
                RuleEnv::Group => errors.push(RuleError::new(
                    "type",
                    "parameter -i not allowed for this rule type",
                )),
                RuleEnv::Guest if !is_guest_iface(iface) => errors.push(RuleError::new(
                    "iface",
                    "value does not match the regex pattern 'net\\d+'",
                )),
                _ => {}
            }
        }
        errors
    }

    /// Reads one rule line of pve-firewall's config files as
    /// `parse_fw_rule` (Firewall.pm) does:
    /// `[|]TYPE ACTION [-i IFACE] [-source S] [-dest D] [-p PROTO] [-dport P]
    /// [-sport P] [-log LEVEL] [-icmp-type T] [# comment]`, a macro as
    /// `TYPE MACRO(ACTION)`, the options in any order.
    pub fn parse_line(line: &str) -> Result<Rule, Vec<RuleError>> {
        Rule::from_raw(&raw_from_line(line)?)
    }

    /// The fields of PVE's rules API (a `GET …/firewall/rules` entry):
    /// `pos`, `digest` and `ipversion` are PVE's and ignored.
    pub fn from_api(entry: &serde_json::Value) -> Result<Rule, Vec<RuleError>> {
        let text = |k: &str| match entry.get(k) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let mut raw = RawRule {
            rule_type: text("type").unwrap_or_default(),
            action: text("action").unwrap_or_default(),
            // A rule PVE loaded from its file always has `enable`
            // (parse_fw_rule sets it); a missing one reads as the file's
            // default, enabled.
            enable: text("enable").is_none_or(|e| e != "0"),
            ..RawRule::default()
        };
        for f in ["macro", "iface", "comment"]
            .into_iter()
            .chain(MATCH_FIELDS)
        {
            if let Some(slot) = raw.slot(f) {
                *slot = text(f);
            }
        }
        Rule::from_raw(&raw)
    }

    /// The parameters of a create (`POST …/firewall/rules`): every field
    /// set, `enable` always (PVE creates a rule disabled when `enable` is
    /// not sent: `register_create_rule` in `API2/Firewall/Rules.pm`).
    pub fn api_form(&self) -> Vec<(&'static str, String)> {
        let mut form = vec![
            ("type", self.head.pve_type().to_string()),
            ("action", self.head.action().to_string()),
            ("enable", if self.enable { "1" } else { "0" }.to_string()),
        ];
        for (k, v) in self.optional_fields() {
            if let Some(v) = v {
                form.push((k, v));
            }
        }
        form
    }

    /// The parameters of an update of `live` into this rule (`PUT
    /// …/firewall/rules/{pos}`): what changes, and `delete` for the fields
    /// `live` has and this rule has not (`delete_rule_properties`).
    pub fn update_form(&self, live: &Rule) -> Vec<(&'static str, String)> {
        let mut form = Vec::new();
        if self.head != live.head {
            form.push(("type", self.head.pve_type().to_string()));
            form.push(("action", self.head.action().to_string()));
        }
        if self.enable != live.enable {
            form.push(("enable", if self.enable { "1" } else { "0" }.to_string()));
        }
        let mut delete = Vec::new();
        for ((k, want), (_, have)) in self
            .optional_fields()
            .into_iter()
            .zip(live.optional_fields())
        {
            match want {
                Some(v) if have.as_ref() != Some(&v) => form.push((k, v)),
                None if have.is_some() => delete.push(k),
                _ => {}
            }
        }
        if !delete.is_empty() {
            form.push(("delete", delete.join(",")));
        }
        form
    }

    fn optional_fields(&self) -> [(&'static str, Option<String>); 10] {
        let s = |v: &Option<String>| v.clone();
        [
            ("macro", s(&self.macro_name)),
            ("iface", s(&self.iface)),
            ("source", self.source.as_ref().map(|a| a.to_string())),
            ("dest", self.dest.as_ref().map(|a| a.to_string())),
            ("proto", self.proto.as_ref().map(|p| p.to_string())),
            ("dport", self.dport.as_ref().map(|p| p.to_string())),
            ("sport", self.sport.as_ref().map(|p| p.to_string())),
            ("log", self.log.map(|l| l.as_str().to_string())),
            ("icmp-type", s(&self.icmp_type)),
            ("comment", s(&self.comment)),
        ]
    }
}

/// The rule line, as `$format_rules` (Firewall.pm) writes it.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.enable {
            f.write_str("|")?;
        }
        f.write_str(&self.head.pve_type().to_ascii_uppercase())?;
        match &self.macro_name {
            Some(m) => write!(f, " {m}({})", self.head.action())?,
            None => write!(f, " {}", self.head.action())?,
        }
        if let Some(iface) = &self.iface {
            write!(f, " -i {iface}")?;
        }
        let opts = [
            ("-source", self.source.as_ref().map(AddrSpec::as_str)),
            ("-dest", self.dest.as_ref().map(AddrSpec::as_str)),
            ("-p", self.proto.as_ref().map(Proto::as_str)),
            ("-dport", self.dport.as_ref().map(PortSpec::as_str)),
            ("-sport", self.sport.as_ref().map(PortSpec::as_str)),
            ("-log", self.log.map(LogLevel::as_str)),
            ("-icmp-type", self.icmp_type.as_deref()),
        ];
        for (flag, value) in opts {
            if let Some(v) = value {
                write!(f, " {flag} {v}")?;
            }
        }
        if let Some(c) = &self.comment {
            write!(f, " # {c}")?;
        }
        Ok(())
    }
}

/// `type` and `action` (`verify_rule`): in/out/forward with ACCEPT, DROP
/// or REJECT (no REJECT on forward), or group with a group's name.
fn head(raw: &RawRule, errors: &mut Vec<RuleError>) -> Option<Head> {
    let action = raw.action.as_str();
    let direction = match raw.rule_type.as_str() {
        "in" => Direction::In,
        "out" => Direction::Out,
        "forward" => Direction::Forward,
        "group" => {
            if is_object_name(action) && action.len() <= MAX_GROUP_LEN {
                return Some(Head::Group(action.to_string()));
            }
            errors.push(RuleError::new(
                "action",
                "invalid characters in security group name",
            ));
            return None;
        }
        "" => {
            errors.push(RuleError::new("type", "missing property"));
            return None;
        }
        other => {
            errors.push(RuleError::new(
                "type",
                format!("unknown rule type '{other}'"),
            ));
            return None;
        }
    };
    let Some(verdict) = Verdict::parse(action) else {
        errors.push(RuleError::new(
            "action",
            format!("unknown action '{action}'"),
        ));
        return None;
    };
    if direction == Direction::Forward && verdict == Verdict::Reject {
        errors.push(RuleError::new(
            "action",
            "cannot define REJECT rules on forward chain",
        ));
        return None;
    }
    Some(Head::Traffic(direction, verdict))
}

/// The match fields of a traffic rule, checked in `verify_rule`'s order.
fn match_fields(raw: &RawRule, rule: &mut Rule, errors: &mut Vec<RuleError>) {
    let mut err = |field, msg: String| errors.push(RuleError::new(field, msg));
    if let Some(m) = &raw.macro_name {
        match macro_name(m) {
            Some(name) => rule.macro_name = Some(name.to_string()),
            None => err("macro", format!("unknown macro '{m}'")),
        }
    }
    let mut versions = Vec::new();
    if let Some(p) = &raw.proto {
        match Proto::parse(p) {
            Ok(p) => {
                versions.extend(p.v6());
                rule.proto = Some(p);
            }
            Err(e) => err("proto", e),
        }
    }
    let is_icmp = rule.proto.as_ref().is_some_and(Proto::is_icmp);
    let ports_ok = |p: &Option<Proto>| {
        p.as_ref()
            .is_some_and(|p| super::data::PROTOCOLS_WITH_PORTS.contains(&p.as_str()))
    };
    for (field, icmp_ok) in [("dport", is_icmp), ("sport", false)] {
        let Some(text) = raw.get(field) else { continue };
        match PortSpec::parse(text, icmp_ok) {
            Ok(p) if field == "dport" => rule.dport = Some(p),
            Ok(p) => rule.sport = Some(p),
            Err(e) => err(field, e),
        }
        match &raw.proto {
            None => err(
                "proto",
                format!("missing property - '{field}' requires this property"),
            ),
            Some(p) if rule.proto.is_some() && !ports_ok(&rule.proto) && !icmp_ok => {
                err(field, format!("protocol '{p}' does not support ports"));
            }
            Some(_) => {}
        }
    }
    if let Some(t) = &raw.icmp_type {
        match &rule.proto {
            Some(p) if p.is_icmp() => {
                if raw.dport.is_some() {
                    err(
                        "icmp-type",
                        "'icmp-type' cannot be specified together with 'dport'".into(),
                    );
                } else if icmp_type_ok(p, t) {
                    rule.icmp_type = Some(t.clone());
                } else {
                    err(
                        "icmp-type",
                        format!("invalid icmp-type '{t}' for proto '{p}'"),
                    );
                }
            }
            _ => err(
                "proto",
                "missing property - 'icmp-type' requires this property".into(),
            ),
        }
    }
    for field in ["source", "dest"] {
        let Some(text) = raw.get(field) else { continue };
        match AddrSpec::parse(text) {
            Ok(a) => {
                versions.extend(a.v6());
                if field == "source" {
                    rule.source = Some(a);
                } else {
                    rule.dest = Some(a);
                }
            }
            Err(e) => err(field, e),
        }
    }
    if versions.windows(2).any(|w| w[0] != w[1]) {
        err(
            "source",
            "detected mixed ipv4/ipv6 addresses in rule".into(),
        );
    }
    if let Some(l) = &raw.log {
        match LogLevel::parse(l) {
            Ok(l) => rule.log = Some(l),
            Err(e) => err("log", e),
        }
    }
}

/// A config line's fields (`parse_fw_rule`), not yet checked.
fn raw_from_line(line: &str) -> Result<RawRule, Vec<RuleError>> {
    let fail = |m: String| vec![RuleError::new("rule", m)];
    // "we can add single line comments to the end of the rule"
    let (body, comment) = match line.split_once('#') {
        Some((b, c)) => (b, Some(c.trim().to_string()).filter(|c| !c.is_empty())),
        None => (line, None),
    };
    let body = body.trim();
    // "we can disable a rule when prefixed with '|'"
    let (enable, body) = match body.strip_prefix('|') {
        Some(rest) => (false, rest),
        None => (true, body),
    };
    let mut words = body.split_whitespace();
    let (Some(rule_type), Some(action)) = (words.next(), words.next()) else {
        return Err(fail(format!("unable to parse rule: {body}")));
    };
    let mut raw = RawRule {
        rule_type: rule_type.to_ascii_lowercase(),
        action: action.to_string(),
        enable,
        comment,
        ..RawRule::default()
    };
    if raw.rule_type != "group"
        && let Some((m, verdict)) = action.strip_suffix(')').and_then(|a| a.split_once('('))
        && Verdict::parse(verdict).is_some()
        && !m.is_empty()
    {
        raw.macro_name = Some(m.to_string());
        raw.action = verdict.to_string();
    }
    while let Some(flag) = words.next() {
        let field = option_field(flag, raw.rule_type == "group");
        let (Some(field), Some(value)) = (field, words.next()) else {
            return Err(fail(format!("unable to parse rule parameters: {flag}")));
        };
        if let Some(slot) = raw.slot(field) {
            *slot = Some(value.to_string());
        }
    }
    Ok(raw)
}

/// The field an option of a rule line sets (`parse_fw_rule`: `-i`, `-p`,
/// and each of the others with one or two dashes); a group takes `-i` only.
fn option_field(flag: &str, group: bool) -> Option<&'static str> {
    if flag == "-i" {
        return Some("iface");
    }
    if group {
        return None;
    }
    if flag == "-p" {
        return Some("proto");
    }
    let name = flag.strip_prefix("--").or_else(|| flag.strip_prefix('-'))?;
    [
        "proto",
        "dport",
        "sport",
        "source",
        "dest",
        "log",
        "icmp-type",
    ]
    .into_iter()
    .find(|f| *f == name)
}
