//! Building a [`Match`] from match words: field settings, protocol shorthands, duplicate and
//! conflict detection, and the prerequisite check once every word is in.

use packet::{Field, FlowKey};

use super::error::{ErrorKind, PResult, Problem};
use super::fields::{self, FieldDef, Prereq, Settings, SHORTHANDS};
use crate::model::Match;

/// One word already applied: what it set, to name it in conflicts.
struct Applied {
    word: String,
    value: FlowKey,
    mask: FlowKey,
}

/// Accumulates match words into a [`Match`].
pub(crate) struct MatchBuilder {
    matcher: Match,
    applied: Vec<Applied>,
    /// Field definitions used so far: index into [`fields::FIELDS`] and the name written.
    used: Vec<(usize, String)>,
    /// Prerequisites to check at the end: field name and what it needs.
    prereqs: Vec<(String, Prereq)>,
}

impl MatchBuilder {
    /// An empty (match-everything) builder.
    pub(crate) fn new() -> MatchBuilder {
        MatchBuilder {
            matcher: Match::ANY,
            applied: Vec::new(),
            used: Vec::new(),
            prereqs: Vec::new(),
        }
    }

    /// Applies a protocol shorthand (`ip`, `tcp`, `arp`, ...); `Ok(false)` if `word` is none.
    pub(crate) fn shorthand(&mut self, word: &str) -> PResult<bool> {
        let Some(&(_, eth, proto)) = SHORTHANDS
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(word))
        else {
            return Ok(false);
        };
        let mut s: Settings = vec![(Field::EthType, eth as u128, 0xffff)];
        if let Some(p) = proto {
            s.push((Field::IpProto, p as u128, 0xff));
        }
        self.apply(word, &s)?;
        Ok(true)
    }

    /// Applies `name=value` if `name` is a match field; `Ok(false)` if it is not.
    pub(crate) fn field(&mut self, name: &str, value: &str) -> PResult<bool> {
        let Some((index, def)) = fields::lookup(name) else {
            return Ok(false);
        };
        if let Some((_, first)) = self.used.iter().find(|(i, _)| *i == index) {
            let also = if first.eq_ignore_ascii_case(name) {
                String::new()
            } else {
                format!(" (already given as {first})")
            };
            return Err(Problem::new(
                ErrorKind::Duplicate,
                name,
                format!("duplicate field {name}{also}"),
                "give each field once",
            ));
        }
        let s = fields::settings(def, name, value)?;
        self.apply(&format!("{name}={value}"), &s)?;
        self.used.push((index, name.to_string()));
        if def.prereq != Prereq::None {
            self.prereqs.push((name.to_string(), def.prereq));
        }
        Ok(true)
    }

    fn apply(&mut self, word: &str, settings: &[(Field, u128, u128)]) -> PResult<()> {
        let mut value = FlowKey::ZERO;
        let mut mask = FlowKey::ZERO;
        for &(f, v, m) in settings {
            // Settings of one word may share a field's word (vlan_pcp with the present bit):
            // merge them bit by bit.
            let old_m = mask.get(f);
            let old_v = value.get(f);
            mask.set(f, old_m | m);
            value.set(f, (old_v & !m) | (v & m));
        }
        for prev in &self.applied {
            for i in 0..packet::KEY_WORDS {
                let both = prev.mask.w[i] & mask.w[i];
                if (prev.value.w[i] ^ value.w[i]) & both != 0 {
                    return Err(Problem::new(
                        ErrorKind::Conflict,
                        word,
                        format!(
                            "{word} conflicts with {}: they need different values of the same bits",
                            prev.word
                        ),
                        "remove one of them",
                    ));
                }
            }
        }
        for i in 0..packet::KEY_WORDS {
            self.matcher.mask.w[i] |= mask.w[i];
            self.matcher.value.w[i] = (self.matcher.value.w[i] & !mask.w[i]) | value.w[i];
        }
        self.applied.push(Applied {
            word: word.to_string(),
            value,
            mask,
        });
        Ok(())
    }

    /// Checks every field's prerequisites and returns the match.
    pub(crate) fn finish(self) -> PResult<Match> {
        for (name, p) in &self.prereqs {
            if !p.holds(&self.matcher) {
                let (needs, fix) = p.explain();
                return Err(Problem::new(
                    ErrorKind::Prerequisite,
                    name,
                    format!("{name} needs {needs}"),
                    fix,
                ));
            }
        }
        Ok(self.matcher)
    }
}

/// Whether `name` is a match field name (used to explain a field given without a value).
pub(crate) fn is_field(name: &str) -> bool {
    fields::lookup(name).is_some()
}

/// The definition of a match field by name.
pub(crate) fn field_def(name: &str) -> Option<&'static FieldDef> {
    fields::lookup(name).map(|(_, d)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(words: &[(&str, Option<&str>)]) -> PResult<Match> {
        let mut b = MatchBuilder::new();
        for (n, v) in words {
            let known = match v {
                Some(v) => b.field(n, v)?,
                None => b.shorthand(n)?,
            };
            assert!(known, "{n}");
        }
        b.finish()
    }

    #[test]
    fn shorthand_sets_eth_type_and_proto() {
        let m = build(&[("tcp6", None)]).unwrap();
        assert_eq!(m.get(Field::EthType), (0x86dd, 0xffff));
        assert_eq!(m.get(Field::IpProto), (6, 0xff));
        let m = build(&[("ip", None), ("tcp", None)]).unwrap();
        assert_eq!(m.get(Field::IpProto), (6, 0xff));
    }

    #[test]
    fn conflicts_name_both_words() {
        let e = build(&[("tcp", None), ("udp", None)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(
            e.problem,
            "udp conflicts with tcp: they need different values of the same bits"
        );
        let e = build(&[("dl_vlan", Some("0xffff")), ("dl_vlan_pcp", Some("3"))]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        // Same bits, same values: fine.
        let m = build(&[("dl_vlan", Some("5")), ("vlan_pcp", Some("3"))]).unwrap();
        assert_eq!(m.get(Field::VlanTci), (0x7005, 0xffff));
    }

    #[test]
    fn prerequisites_are_checked_at_the_end() {
        let m = build(&[("tp_dst", Some("80")), ("tcp", None)]).unwrap();
        assert_eq!(m.get(Field::TpDst), (80, 0xffff));
        let e = build(&[("tp_dst", Some("80"))]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Prerequisite);
        assert_eq!(
            format!("{}; {}", e.problem, e.expected),
            "tp_dst needs a protocol; add tcp, udp or sctp before it"
        );
        assert!(build(&[("arp", None), ("nw_src", Some("10.0.0.1"))]).is_ok());
        assert!(build(&[("arp", None), ("ipv4_src", Some("10.0.0.1"))]).is_err());
        assert!(build(&[
            ("icmp6", None),
            ("icmp_type", Some("135")),
            ("nd_sll", Some("00:00:00:00:00:01"))
        ])
        .is_ok());
        assert!(build(&[
            ("icmp6", None),
            ("icmp_type", Some("136")),
            ("nd_sll", Some("00:00:00:00:00:01"))
        ])
        .is_err());
    }
}
