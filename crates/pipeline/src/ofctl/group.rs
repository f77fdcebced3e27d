//! `add-group` lines into [`Group`]s and back:
//! `group_id=1,type=select,bucket=weight:10,output:1,bucket=output:2`.
//!
//! Words before the first `bucket=` describe the group (`group_id=`, `type=` one of `all`,
//! `select`, `indirect`, `ff`/`fast_failover`). Each `bucket=` starts a bucket; its words are
//! `weight:N` (select), `watch_port:N` / `watch_group:N` (fast-failover) and actions, up to
//! the next `bucket=`. Select buckets weigh 1 unless given a weight.

use super::actions::{parse_action_list, GROUP_MAX};
use super::error::{ErrorKind, FlowParseError, PResult, Problem, TextKind};
use super::format::format_action_list;
use super::lexer::{split_eq, split_words};
use super::values::{format_port, parse_num, parse_port};
use crate::model::{ports, Bucket, Group, GroupType, GROUP_ANY};

const TYPES: &[(&str, GroupType)] = &[
    ("all", GroupType::All),
    ("select", GroupType::Select),
    ("indirect", GroupType::Indirect),
    ("ff", GroupType::FastFailover),
    ("fast_failover", GroupType::FastFailover),
];

/// Parses an `add-group` line.
pub fn parse_group(text: &str) -> Result<Group, FlowParseError> {
    parse(text).map_err(|p| p.into_error(TextKind::Group, text))
}

/// One bucket while its words come in.
#[derive(Default)]
struct Draft {
    weight: Option<u16>,
    watch_port: Option<u32>,
    watch_group: Option<u32>,
    actions: String,
}

fn duplicate(word: &str) -> Problem {
    Problem::new(
        ErrorKind::Duplicate,
        word,
        format!("duplicate {word}"),
        "give it once",
    )
}

fn parse(text: &str) -> PResult<Group> {
    let mut id = None;
    let mut kind = None;
    let mut drafts: Vec<Draft> = Vec::new();
    for w in split_words(text)? {
        let (key, value) = split_eq(w.text);
        match (key.to_ascii_lowercase().as_str(), value) {
            ("bucket", v) => {
                let mut d = Draft::default();
                if let Some(v) = v.filter(|v| !v.is_empty()) {
                    bucket_word(&mut d, v)?;
                }
                drafts.push(d);
            }
            ("group_id", Some(v)) if drafts.is_empty() => {
                if id.is_some() {
                    return Err(duplicate("group_id"));
                }
                id = Some(parse_num("group_id", v, GROUP_MAX as u128)? as u32);
            }
            ("type", Some(v)) if drafts.is_empty() => {
                if kind.is_some() {
                    return Err(duplicate("type"));
                }
                let t = TYPES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(v))
                    .ok_or_else(|| {
                        Problem::new(
                            ErrorKind::BadValue,
                            v,
                            format!("unknown group type \"{v}\""),
                            "expected one of all, select, indirect, ff, fast_failover",
                        )
                    })?;
                kind = Some(t.1);
            }
            _ => match drafts.last_mut() {
                Some(d) => bucket_word(d, w.text)?,
                None => {
                    return Err(Problem::new(
                        ErrorKind::UnknownField,
                        w.text,
                        format!("unknown group field \"{}\"", w.text),
                        "expected group_id=, type= or bucket= (actions go inside a bucket)",
                    ))
                }
            },
        }
    }
    let id = id.ok_or_else(|| {
        Problem::new(
            ErrorKind::Misplaced,
            "",
            "missing group_id=",
            "add group_id=N first",
        )
    })?;
    let kind = kind.ok_or_else(|| {
        Problem::new(
            ErrorKind::Misplaced,
            "",
            "missing type=",
            "add type=all, select, indirect or ff",
        )
    })?;
    let mut buckets = Vec::new();
    for (n, d) in drafts.into_iter().enumerate() {
        buckets.push(finish_bucket(kind, n + 1, d)?);
    }
    if kind == GroupType::Indirect && buckets.len() != 1 {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "bucket",
            format!(
                "an indirect group has exactly one bucket, not {}",
                buckets.len()
            ),
            "give one bucket=, or use type=all or type=select",
        ));
    }
    Ok(Group { id, kind, buckets })
}

/// One word inside a bucket: a bucket parameter or an action.
fn bucket_word(d: &mut Draft, word: &str) -> PResult<()> {
    let (name, arg) = match word.split_once([':', '=']) {
        Some((n, a)) => (n.trim().to_ascii_lowercase(), Some(a)),
        None => (word.to_ascii_lowercase(), None),
    };
    match (name.as_str(), arg) {
        ("weight", Some(a)) => {
            if d.weight.is_some() {
                return Err(duplicate("weight"));
            }
            d.weight = Some(parse_num("weight", a, 0xffff)? as u16);
        }
        ("watch_port", Some(a)) => {
            if d.watch_port.is_some() {
                return Err(duplicate("watch_port"));
            }
            d.watch_port = Some(parse_port("watch_port", a)?);
        }
        ("watch_group", Some(a)) => {
            if d.watch_group.is_some() {
                return Err(duplicate("watch_group"));
            }
            d.watch_group = Some(parse_num("watch_group", a, GROUP_ANY as u128)? as u32);
        }
        ("actions", Some(a)) if word.get(7..).is_some_and(|r| r.starts_with('=')) => {
            push_action(d, a)
        }
        _ => push_action(d, word),
    }
    Ok(())
}

fn push_action(d: &mut Draft, a: &str) {
    if !d.actions.is_empty() {
        d.actions.push(',');
    }
    d.actions.push_str(a);
}

fn finish_bucket(kind: GroupType, n: usize, d: Draft) -> PResult<Bucket> {
    if d.weight.is_some() && kind != GroupType::Select {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "weight",
            format!("bucket {n} has a weight, which only select groups use"),
            "remove weight: or use type=select",
        ));
    }
    let watched = d.watch_port.is_some() || d.watch_group.is_some();
    if watched && kind != GroupType::FastFailover {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "watch_port",
            format!("bucket {n} watches a port or group, which only fast-failover groups use"),
            "remove watch_port:/watch_group: or use type=ff",
        ));
    }
    if !watched && kind == GroupType::FastFailover {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "bucket",
            format!("fast-failover bucket {n} watches nothing"),
            "add watch_port:N or watch_group:N to the bucket",
        ));
    }
    let actions = parse_action_list(&d.actions, "in a group bucket")?;
    Ok(Bucket {
        weight: d
            .weight
            .unwrap_or(if kind == GroupType::Select { 1 } else { 0 }),
        watch_port: d.watch_port.unwrap_or(ports::ANY),
        watch_group: d.watch_group.unwrap_or(GROUP_ANY),
        actions,
        actions_as_sent: None,
    })
}

/// Formats a group as an `add-group` line that [`parse_group`] reads back.
pub fn format_group(g: &Group) -> String {
    let kind = match g.kind {
        GroupType::All => "all",
        GroupType::Select => "select",
        GroupType::Indirect => "indirect",
        GroupType::FastFailover => "ff",
    };
    let mut s = format!("group_id={},type={kind}", g.id);
    for b in &g.buckets {
        let mut words = Vec::new();
        if g.kind == GroupType::Select {
            words.push(format!("weight:{}", b.weight));
        }
        if b.watch_port != ports::ANY {
            words.push(format!("watch_port:{}", format_port(b.watch_port)));
        }
        if b.watch_group != GROUP_ANY {
            words.push(format!("watch_group:{}", b.watch_group));
        }
        if !b.actions.is_empty() {
            words.push(format_action_list(&b.actions));
        }
        s.push_str(",bucket=");
        s.push_str(&words.join(","));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Action;

    fn out(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    #[test]
    fn select_group_with_weights() {
        let g = parse_group("group_id=1,type=select,bucket=weight:10,output:1,bucket=output:2")
            .unwrap();
        assert_eq!(
            g,
            Group {
                id: 1,
                kind: GroupType::Select,
                buckets: vec![
                    Bucket {
                        weight: 10,
                        watch_port: ports::ANY,
                        watch_group: GROUP_ANY,
                        actions: vec![out(1)],
                        actions_as_sent: None,
                    },
                    Bucket {
                        weight: 1,
                        watch_port: ports::ANY,
                        watch_group: GROUP_ANY,
                        actions: vec![out(2)],
                        actions_as_sent: None,
                    },
                ],
            }
        );
        assert_eq!(
            format_group(&g),
            "group_id=1,type=select,bucket=weight:10,output:1,bucket=weight:1,output:2"
        );
        assert_eq!(parse_group(&format_group(&g)).unwrap(), g);
    }

    #[test]
    fn fast_failover_and_all() {
        let g = parse_group(
            "group_id=2,type=fast_failover,bucket=watch_port:1,output:1,\
             bucket=watch_group:7,actions=group:7",
        )
        .unwrap();
        assert_eq!(g.kind, GroupType::FastFailover);
        assert_eq!(g.buckets[0].watch_port, 1);
        assert_eq!(g.buckets[1].watch_group, 7);
        assert_eq!(g.buckets[1].actions, vec![Action::Group(7)]);
        assert_eq!(parse_group(&format_group(&g)).unwrap(), g);
        let g = parse_group("group_id=3 type=all bucket=output:1,mod_vlan_vid:5 bucket=output:2")
            .unwrap();
        assert_eq!(g.buckets.len(), 2);
        assert_eq!(g.buckets[0].actions.len(), 2);
        assert_eq!(parse_group(&format_group(&g)).unwrap(), g);
        let g = parse_group("group_id=4,type=indirect,bucket=output:3").unwrap();
        assert_eq!(parse_group(&format_group(&g)).unwrap(), g);
    }

    #[test]
    fn group_errors() {
        let e = |t: &str| parse_group(t).unwrap_err().to_string();
        assert_eq!(
            e("type=all,bucket=output:1"),
            "group \"type=all,bucket=output:1\": missing group_id=; add group_id=N first"
        );
        assert!(e("group_id=1,bucket=output:1").contains("missing type="));
        assert!(e("group_id=1,type=any").contains("unknown group type \"any\""));
        assert!(e("group_id=1,type=all,output:1").contains("unknown group field \"output:1\""));
        assert!(
            e("group_id=1,type=all,bucket=weight:2,output:1").contains("only select groups use")
        );
        assert!(e("group_id=1,type=ff,bucket=output:1").contains("watches nothing"));
        assert!(e("group_id=1,type=all,bucket=watch_port:1,output:1")
            .contains("only fast-failover groups use"));
        assert!(
            e("group_id=1,type=indirect,bucket=output:1,bucket=output:2")
                .contains("exactly one bucket, not 2")
        );
        assert!(e("group_id=1,type=all,bucket=goto_table:1").contains("in a group bucket"));
        assert!(e("group_id=1,group_id=2,type=all").contains("duplicate group_id"));
        assert!(e("group_id=0xffffff01,type=all").contains("out of range"));
        assert!(e("group_id=1,type=select,bucket=weight:1,weight:2").contains("duplicate weight"));
    }
}
