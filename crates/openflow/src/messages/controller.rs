//! Messages about the controller connection itself: role request/reply, asynchronous
//! message configuration and experimenter messages.

use crate::error::{DecodeError, ErrorCode};
use crate::wire::{Put, Reader};

/// A controller's role (`ofp_controller_role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerRole {
    /// Do not change the role (query).
    NoChange,
    /// Full access, one of possibly several equals.
    Equal,
    /// Full access, the only master.
    Master,
    /// Read-only.
    Slave,
}

impl ControllerRole {
    /// The wire value.
    pub fn to_wire(self) -> u32 {
        match self {
            ControllerRole::NoChange => 0,
            ControllerRole::Equal => 1,
            ControllerRole::Master => 2,
            ControllerRole::Slave => 3,
        }
    }

    /// From the wire value.
    pub fn from_wire(v: u32) -> Option<Self> {
        Some(match v {
            0 => ControllerRole::NoChange,
            1 => ControllerRole::Equal,
            2 => ControllerRole::Master,
            3 => ControllerRole::Slave,
            _ => return None,
        })
    }
}

/// `OFPT_ROLE_REQUEST` / `OFPT_ROLE_REPLY` (`ofp_role_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoleRequest {
    /// The role asked for (or granted, in a reply).
    pub role: ControllerRole,
    /// Master election generation id.
    pub generation_id: u64,
}

impl RoleRequest {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let v = r.u32()?;
        let role = ControllerRole::from_wire(v).ok_or_else(|| {
            DecodeError::new(
                ErrorCode::RRFC_BAD_ROLE,
                format!("role {v} is not one of nochange (0), equal (1), master (2), slave (3)"),
            )
        })?;
        r.skip(4)?;
        Ok(RoleRequest {
            role,
            generation_id: r.u64()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.role.to_wire());
        buf.put_zeros(4);
        buf.put_u64(self.generation_id);
    }
}

/// `OFPT_GET_ASYNC_REPLY` / `OFPT_SET_ASYNC` (`ofp_async_config`): which asynchronous
/// messages a controller receives, as reason bitmaps; index 0 applies in master/equal role,
/// index 1 in slave role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    /// Bit `r` set: send packet-ins of reason `r`.
    pub packet_in_mask: [u32; 2],
    /// Bit `r` set: send port-status of reason `r`.
    pub port_status_mask: [u32; 2],
    /// Bit `r` set: send flow-removed of reason `r`.
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    /// The defaults of OpenFlow 1.3: master/equal gets every packet-in except invalid-TTL,
    /// every port status and every flow-removed; slave gets port status only.
    pub const DEFAULT: AsyncConfig = AsyncConfig {
        packet_in_mask: [0b011, 0],
        port_status_mask: [0b111, 0b111],
        flow_removed_mask: [0b1111, 0],
    };

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut w = [0u32; 6];
        for x in &mut w {
            *x = r.u32()?;
        }
        Ok(AsyncConfig {
            packet_in_mask: [w[0], w[1]],
            port_status_mask: [w[2], w[3]],
            flow_removed_mask: [w[4], w[5]],
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        for v in self
            .packet_in_mask
            .iter()
            .chain(&self.port_status_mask)
            .chain(&self.flow_removed_mask)
        {
            buf.put_u32(*v);
        }
    }
}

/// `OFPT_EXPERIMENTER`. The switch supports no experimenter; answer with
/// [`ErrorCode::BRC_BAD_EXPERIMENTER`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Experimenter {
    /// Experimenter id.
    pub experimenter: u32,
    /// Experimenter-defined type.
    pub exp_type: u32,
    /// Experimenter-defined data.
    pub data: Vec<u8>,
}

impl Experimenter {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Experimenter {
            experimenter: r.u32()?,
            exp_type: r.u32()?,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.experimenter);
        buf.put_u32(self.exp_type);
        buf.extend_from_slice(&self.data);
    }
}
