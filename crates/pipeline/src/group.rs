//! The group table: definitions, validation of group-mods (missing references, loops, bucket
//! rules per group type) and bucket liveness for fast-failover groups.
//!
//! Groups may chain (a bucket applies another group) as long as the chain never loops; the
//! depth of a chain is bounded again at translation time ([`MAX_GROUP_DEPTH`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::GroupModError;
use crate::flow::check_actions;
use crate::model::{
    ports, Action, Bucket, Group, GroupMod, GroupModCommand, GroupType, GROUP_ALL, GROUP_ANY,
    GROUP_MAX,
};

/// Deepest chain of groups translation follows; deeper chains drop the packet.
pub const MAX_GROUP_DEPTH: usize = 16;

/// All groups of a bridge. Cheap to clone (one `Arc` per group).
#[derive(Debug, Clone, Default)]
pub struct GroupTable {
    groups: HashMap<u32, Arc<Group>>,
}

fn referenced(g: &Group) -> impl Iterator<Item = u32> + '_ {
    g.buckets.iter().flat_map(|b| {
        b.actions
            .iter()
            .filter_map(|a| {
                if let Action::Group(id) = a {
                    Some(*id)
                } else {
                    None
                }
            })
            .chain((b.watch_group != GROUP_ANY).then_some(b.watch_group))
    })
}

impl GroupTable {
    /// The group with this id.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Arc<Group>> {
        self.groups.get(&id)
    }

    /// Whether group `id` exists.
    pub fn contains(&self, id: u32) -> bool {
        self.groups.contains_key(&id)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every group, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Group>> {
        self.groups.values()
    }

    /// Checks a group-mod against this table without changing it. Returns the ids of the
    /// groups a delete removes.
    pub fn check(&self, m: &GroupMod) -> Result<Vec<u32>, GroupModError> {
        let g = &m.group;
        match m.command {
            GroupModCommand::Delete => {
                let doomed: Vec<u32> = if g.id == GROUP_ALL {
                    self.groups.keys().copied().collect()
                } else if self.groups.contains_key(&g.id) {
                    vec![g.id]
                } else {
                    // Deleting a group that does not exist is not an error in OpenFlow.
                    Vec::new()
                };
                for other in self.groups.values() {
                    if doomed.contains(&other.id) {
                        continue;
                    }
                    if let Some(id) = referenced(other).find(|r| doomed.contains(r)) {
                        return Err(GroupModError::ChainedGroup {
                            group: id,
                            by: other.id,
                        });
                    }
                }
                Ok(doomed)
            }
            GroupModCommand::Add | GroupModCommand::Modify => {
                if g.id > GROUP_MAX {
                    return Err(GroupModError::InvalidGroupId(g.id));
                }
                let exists = self.groups.contains_key(&g.id);
                if m.command == GroupModCommand::Add && exists {
                    return Err(GroupModError::GroupExists(g.id));
                }
                if m.command == GroupModCommand::Modify && !exists {
                    return Err(GroupModError::UnknownGroup(g.id));
                }
                if g.kind == GroupType::Indirect && g.buckets.len() != 1 {
                    return Err(GroupModError::IndirectBuckets(g.id));
                }
                for b in &g.buckets {
                    if g.kind == GroupType::FastFailover
                        && b.watch_port == ports::ANY
                        && b.watch_group == GROUP_ANY
                    {
                        return Err(GroupModError::UnwatchedBucket(g.id));
                    }
                    let known = |id: u32| id == g.id || self.groups.contains_key(&id);
                    check_actions(&b.actions, None, &known)
                        .map_err(|error| GroupModError::BadAction { group: g.id, error })?;
                    if b.watch_group != GROUP_ANY && !known(b.watch_group) {
                        return Err(GroupModError::UnknownGroup(b.watch_group));
                    }
                }
                if self.reaches(g, g.id) {
                    return Err(GroupModError::Loop(g.id));
                }
                Ok(Vec::new())
            }
        }
    }

    /// Whether `from` (not yet in the table) reaches group `target` through its buckets.
    fn reaches(&self, from: &Group, target: u32) -> bool {
        let mut stack: Vec<u32> = referenced(from).collect();
        let mut seen = Vec::new();
        while let Some(id) = stack.pop() {
            if id == target {
                return true;
            }
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Some(g) = self.groups.get(&id) {
                stack.extend(referenced(g));
            }
        }
        false
    }

    /// Applies a group-mod that [`GroupTable::check`] accepted.
    pub fn apply(&mut self, m: &GroupMod, doomed: &[u32]) {
        match m.command {
            GroupModCommand::Delete => {
                for id in doomed {
                    self.groups.remove(id);
                }
            }
            GroupModCommand::Add | GroupModCommand::Modify => {
                self.groups.insert(m.group.id, Arc::new(m.group.clone()));
            }
        }
    }

    /// Whether a fast-failover bucket may be used: its watched port is live, or its watched
    /// group has a live bucket. `port_live` answers for ports.
    pub fn bucket_live(&self, b: &Bucket, port_live: &dyn Fn(u32) -> bool, depth: usize) -> bool {
        if b.watch_port == ports::ANY && b.watch_group == GROUP_ANY {
            return true;
        }
        if b.watch_port != ports::ANY && port_live(b.watch_port) {
            return true;
        }
        b.watch_group != GROUP_ANY
            && depth < MAX_GROUP_DEPTH
            && self.group_live(b.watch_group, port_live, depth + 1)
    }

    /// Whether a group has a live bucket.
    pub fn group_live(&self, id: u32, port_live: &dyn Fn(u32) -> bool, depth: usize) -> bool {
        self.groups.get(&id).is_some_and(|g| {
            g.buckets
                .iter()
                .any(|b| self.bucket_live(b, port_live, depth))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(actions: Vec<Action>) -> Bucket {
        Bucket {
            weight: 1,
            watch_port: ports::ANY,
            watch_group: GROUP_ANY,
            actions,
            actions_as_sent: None,
        }
    }

    fn add(
        t: &mut GroupTable,
        id: u32,
        kind: GroupType,
        buckets: Vec<Bucket>,
    ) -> Result<(), GroupModError> {
        let m = GroupMod {
            command: GroupModCommand::Add,
            group: Group { id, kind, buckets },
        };
        let doomed = t.check(&m)?;
        t.apply(&m, &doomed);
        Ok(())
    }

    #[test]
    fn chains_allowed_loops_and_missing_refused() {
        let mut t = GroupTable::default();
        let out = |p| Action::Output {
            port: p,
            max_len: 0,
        };
        add(&mut t, 1, GroupType::All, vec![bucket(vec![out(1)])]).unwrap();
        add(
            &mut t,
            2,
            GroupType::Indirect,
            vec![bucket(vec![Action::Group(1)])],
        )
        .unwrap();
        assert_eq!(
            add(
                &mut t,
                3,
                GroupType::All,
                vec![bucket(vec![Action::Group(9)])]
            ),
            Err(GroupModError::BadAction {
                group: 3,
                error: crate::FlowModError::UnknownGroup(9)
            })
        );
        assert_eq!(
            add(&mut t, 1, GroupType::All, vec![]),
            Err(GroupModError::GroupExists(1))
        );
        // Modify 1 to point at 2, which points at 1: a loop.
        let m = GroupMod {
            command: GroupModCommand::Modify,
            group: Group {
                id: 1,
                kind: GroupType::All,
                buckets: vec![bucket(vec![Action::Group(2)])],
            },
        };
        assert_eq!(t.check(&m), Err(GroupModError::Loop(1)));
        let self_loop = GroupMod {
            command: GroupModCommand::Add,
            group: Group {
                id: 5,
                kind: GroupType::All,
                buckets: vec![bucket(vec![Action::Group(5)])],
            },
        };
        assert_eq!(t.check(&self_loop), Err(GroupModError::Loop(5)));
        // Deleting 1 while 2 chains to it is refused; deleting all is fine.
        let del = |id| GroupMod {
            command: GroupModCommand::Delete,
            group: Group {
                id,
                kind: GroupType::All,
                buckets: vec![],
            },
        };
        assert_eq!(
            t.check(&del(1)),
            Err(GroupModError::ChainedGroup { group: 1, by: 2 })
        );
        let doomed = t.check(&del(GROUP_ALL)).unwrap();
        t.apply(&del(GROUP_ALL), &doomed);
        assert!(t.is_empty());
    }

    #[test]
    fn type_rules() {
        let mut t = GroupTable::default();
        assert_eq!(
            add(&mut t, 1, GroupType::Indirect, vec![]),
            Err(GroupModError::IndirectBuckets(1))
        );
        assert_eq!(
            add(&mut t, 1, GroupType::FastFailover, vec![bucket(vec![])]),
            Err(GroupModError::UnwatchedBucket(1))
        );
        assert_eq!(
            add(&mut t, GROUP_ALL, GroupType::All, vec![]),
            Err(GroupModError::InvalidGroupId(GROUP_ALL))
        );
    }

    #[test]
    fn liveness_follows_ports_and_groups() {
        let mut t = GroupTable::default();
        let watch = |p| Bucket {
            weight: 1,
            watch_port: p,
            watch_group: GROUP_ANY,
            actions: vec![],
            actions_as_sent: None,
        };
        add(&mut t, 1, GroupType::FastFailover, vec![watch(1), watch(2)]).unwrap();
        let live2 = |p| p == 2;
        let none = |_| false;
        assert!(t.group_live(1, &live2, 0));
        assert!(!t.group_live(1, &none, 0));
        let via = Bucket {
            weight: 1,
            watch_port: ports::ANY,
            watch_group: 1,
            actions: vec![],
            actions_as_sent: None,
        };
        assert!(t.bucket_live(&via, &live2, 0));
        assert!(!t.bucket_live(&via, &none, 0));
    }
}
