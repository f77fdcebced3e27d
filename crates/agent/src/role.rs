//! Controller roles of one bridge (OpenFlow 1.3 §6.3.6), without I/O.
//!
//! Every connection starts EQUAL. A MASTER request demotes the current master, if another
//! connection, to SLAVE. MASTER and SLAVE requests carry a generation id that must not go
//! backwards (compared as a wrapping 64-bit distance): the largest one seen is kept and a
//! request below it is refused as stale and changes nothing. NOCHANGE asks for the current
//! role. The session layer feeds decoded role requests in and writes the replies and errors.

use std::collections::HashMap;

use openflow::{ControllerRole, ErrorCode};

use crate::ConnId;

/// The role of one controller connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Full access, receives every asynchronous message (the initial role).
    Equal,
    /// Full access; at most one connection per bridge is master.
    Master,
    /// Read-only: state-changing messages are refused with OFPBRC_IS_SLAVE; receives only
    /// port-status messages by default.
    Slave,
}

/// `ofp_controller_role` values on the wire.
pub mod wire_role {
    /// OFPCR_ROLE_NOCHANGE.
    pub const NOCHANGE: u32 = 0;
    /// OFPCR_ROLE_EQUAL.
    pub const EQUAL: u32 = 1;
    /// OFPCR_ROLE_MASTER.
    pub const MASTER: u32 = 2;
    /// OFPCR_ROLE_SLAVE.
    pub const SLAVE: u32 = 3;
}

impl Role {
    /// The `ofp_controller_role` value of this role.
    pub fn to_wire(self) -> u32 {
        match self {
            Role::Equal => wire_role::EQUAL,
            Role::Master => wire_role::MASTER,
            Role::Slave => wire_role::SLAVE,
        }
    }

    /// Whether a controller in this role may change the switch's state.
    pub fn may_change_state(self) -> bool {
        self != Role::Slave
    }
}

impl From<Role> for ControllerRole {
    fn from(r: Role) -> ControllerRole {
        match r {
            Role::Equal => ControllerRole::Equal,
            Role::Master => ControllerRole::Master,
            Role::Slave => ControllerRole::Slave,
        }
    }
}

/// Why a role request was refused (maps to OFPET_ROLE_REQUEST_FAILED codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// OFPRRFC_STALE: the generation id is older than the newest one seen.
    #[error("stale generation id {got} (newest seen {newest}); the controller must use a generation id at least {newest}")]
    Stale {
        /// The generation id in the request.
        got: u64,
        /// The newest generation id seen on this bridge.
        newest: u64,
    },
    /// OFPRRFC_BAD_ROLE: the role value is not one of 0..=3.
    #[error("role {0} is not NOCHANGE (0), EQUAL (1), MASTER (2) or SLAVE (3)")]
    BadRole(u32),
    /// The connection is not registered (closed meanwhile).
    #[error("connection {0:?} is not registered with the bridge")]
    UnknownConn(ConnId),
}

impl RoleError {
    /// The OFPET_ROLE_REQUEST_FAILED error for this refusal.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RoleError::Stale { .. } => ErrorCode::RRFC_STALE,
            RoleError::BadRole(_) => ErrorCode::RRFC_BAD_ROLE,
            RoleError::UnknownConn(_) => ErrorCode::RRFC_UNSUP,
        }
    }
}

/// The answer to an accepted role request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleReply {
    /// The connection's role after the request.
    pub role: Role,
    /// The generation id to put in the ROLE_REPLY: the newest seen, or `u64::MAX` while none
    /// has been seen.
    pub generation_id: u64,
    /// The connection that was master and is now slave, if any.
    pub demoted: Option<ConnId>,
}

/// The roles of every controller connection of one bridge.
#[derive(Debug, Default)]
pub struct RoleTable {
    roles: HashMap<ConnId, Role>,
    newest_generation: Option<u64>,
}

impl RoleTable {
    /// An empty table.
    pub fn new() -> RoleTable {
        RoleTable::default()
    }

    /// Registers a new connection as EQUAL.
    pub fn add(&mut self, conn: ConnId) {
        self.roles.insert(conn, Role::Equal);
    }

    /// Forgets a closed connection (a master leaving leaves no master).
    pub fn remove(&mut self, conn: ConnId) {
        self.roles.remove(&conn);
    }

    /// The role of `conn`, `None` when it is not registered.
    pub fn role(&self, conn: ConnId) -> Option<Role> {
        self.roles.get(&conn).copied()
    }

    /// The current master, if any.
    pub fn master(&self) -> Option<ConnId> {
        self.roles
            .iter()
            .find(|(_, r)| **r == Role::Master)
            .map(|(c, _)| *c)
    }

    /// Applies a role request (`role` is an `ofp_controller_role` value) from `conn`.
    pub fn request(
        &mut self,
        conn: ConnId,
        role: u32,
        generation_id: u64,
    ) -> Result<RoleReply, RoleError> {
        let current = self.role(conn).ok_or(RoleError::UnknownConn(conn))?;
        let wanted = match role {
            wire_role::NOCHANGE => None,
            wire_role::EQUAL => Some(Role::Equal),
            wire_role::MASTER => Some(Role::Master),
            wire_role::SLAVE => Some(Role::Slave),
            other => return Err(RoleError::BadRole(other)),
        };
        let mut demoted = None;
        if let Some(wanted) = wanted {
            if wanted != Role::Equal {
                self.check_generation(generation_id)?;
            }
            if wanted == Role::Master {
                demoted = self.master().filter(|m| *m != conn);
                if let Some(old) = demoted {
                    self.roles.insert(old, Role::Slave);
                }
            }
            self.roles.insert(conn, wanted);
        }
        Ok(RoleReply {
            role: wanted.unwrap_or(current),
            generation_id: self.newest_generation.unwrap_or(u64::MAX),
            demoted,
        })
    }

    /// Accepts `generation_id` unless it is older than the newest seen (wrapping distance).
    fn check_generation(&mut self, generation_id: u64) -> Result<(), RoleError> {
        if let Some(newest) = self.newest_generation {
            // Two's-complement distance, as the spec's `(int64_t)(gen - cached) < 0`.
            if (generation_id.wrapping_sub(newest) as i64) < 0 {
                return Err(RoleError::Stale {
                    got: generation_id,
                    newest,
                });
            }
        }
        self.newest_generation = Some(generation_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::wire_role::*;
    use super::*;

    fn table(n: u64) -> RoleTable {
        let mut t = RoleTable::new();
        for i in 0..n {
            t.add(ConnId(i));
        }
        t
    }

    #[test]
    fn starts_equal_and_nochange_reports() {
        let mut t = table(1);
        let r = t.request(ConnId(0), NOCHANGE, 0).unwrap();
        assert_eq!(
            r,
            RoleReply {
                role: Role::Equal,
                generation_id: u64::MAX,
                demoted: None
            }
        );
    }

    #[test]
    fn master_demotes_the_other_master() {
        let mut t = table(3);
        let r = t.request(ConnId(0), MASTER, 1).unwrap();
        assert_eq!(
            (r.role, r.generation_id, r.demoted),
            (Role::Master, 1, None)
        );
        let r = t.request(ConnId(1), MASTER, 2).unwrap();
        assert_eq!(r.demoted, Some(ConnId(0)));
        assert_eq!(t.role(ConnId(0)), Some(Role::Slave));
        assert_eq!(t.role(ConnId(1)), Some(Role::Master));
        assert_eq!(
            t.role(ConnId(2)),
            Some(Role::Equal),
            "equal controllers are untouched"
        );
        // Asking again for master does not demote oneself.
        assert_eq!(t.request(ConnId(1), MASTER, 2).unwrap().demoted, None);
        assert_eq!(t.master(), Some(ConnId(1)));
    }

    #[test]
    fn stale_generation_is_refused_and_changes_nothing() {
        let mut t = table(2);
        t.request(ConnId(0), MASTER, 10).unwrap();
        let e = t.request(ConnId(1), MASTER, 9).unwrap_err();
        assert_eq!(e, RoleError::Stale { got: 9, newest: 10 });
        assert_eq!(e.error_code(), ErrorCode::RRFC_STALE);
        assert_eq!(t.role(ConnId(0)), Some(Role::Master));
        assert_eq!(t.role(ConnId(1)), Some(Role::Equal));
        // Slave requests are checked too; equal and nochange are not.
        assert!(t.request(ConnId(1), SLAVE, 3).is_err());
        assert_eq!(t.request(ConnId(1), EQUAL, 3).unwrap().role, Role::Equal);
        assert_eq!(t.request(ConnId(1), NOCHANGE, 3).unwrap().generation_id, 10);
        // The same generation is not stale.
        assert!(t.request(ConnId(1), SLAVE, 10).is_ok());
    }

    #[test]
    fn generation_distance_wraps() {
        let mut t = table(1);
        t.request(ConnId(0), MASTER, u64::MAX - 1).unwrap();
        // 1 is 3 ahead of u64::MAX - 1 in wrapping arithmetic.
        assert!(t.request(ConnId(0), MASTER, 1).is_ok());
        assert!(t.request(ConnId(0), SLAVE, u64::MAX).is_err());
    }

    #[test]
    fn bad_role_and_unknown_conn() {
        let mut t = table(1);
        let e = t.request(ConnId(0), 4, 0).unwrap_err();
        assert_eq!(e, RoleError::BadRole(4));
        assert_eq!(e.error_code(), ErrorCode::RRFC_BAD_ROLE);
        assert_eq!(
            t.request(ConnId(7), MASTER, 0),
            Err(RoleError::UnknownConn(ConnId(7)))
        );
    }

    #[test]
    fn master_leaving_leaves_no_master() {
        let mut t = table(2);
        t.request(ConnId(0), MASTER, 1).unwrap();
        t.remove(ConnId(0));
        assert_eq!(t.master(), None);
        assert_eq!(t.role(ConnId(0)), None);
        assert!(!Role::Slave.may_change_state());
        assert!(Role::Master.may_change_state() && Role::Equal.may_change_state());
    }
}
