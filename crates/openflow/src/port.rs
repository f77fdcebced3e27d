//! `ofp_port`: a port's description (in features, port-desc replies and port-status), and
//! the bits of its config, state and feature words.

use crate::error::{DecodeError, ErrorCode};
use crate::wire::{Put, Reader};

/// Length of `ofp_port`.
pub const PORT_DESC_LEN: usize = 64;

/// `ofp_port_config` bits.
pub mod port_config {
    /// Port is administratively down.
    pub const PORT_DOWN: u32 = 1 << 0;
    /// Drop all packets received by port.
    pub const NO_RECV: u32 = 1 << 2;
    /// Drop packets forwarded to port.
    pub const NO_FWD: u32 = 1 << 5;
    /// Do not send packet-in messages for port.
    pub const NO_PACKET_IN: u32 = 1 << 6;
}

/// `ofp_port_state` bits.
pub mod port_state {
    /// No physical link present.
    pub const LINK_DOWN: u32 = 1 << 0;
    /// Port is blocked.
    pub const BLOCKED: u32 = 1 << 1;
    /// Live for fast-failover groups.
    pub const LIVE: u32 = 1 << 2;
}

/// `ofp_port_features` bits.
pub mod port_features {
    /// 10 Mb half-duplex.
    pub const RATE_10MB_HD: u32 = 1 << 0;
    /// 10 Mb full-duplex.
    pub const RATE_10MB_FD: u32 = 1 << 1;
    /// 100 Mb half-duplex.
    pub const RATE_100MB_HD: u32 = 1 << 2;
    /// 100 Mb full-duplex.
    pub const RATE_100MB_FD: u32 = 1 << 3;
    /// 1 Gb half-duplex.
    pub const RATE_1GB_HD: u32 = 1 << 4;
    /// 1 Gb full-duplex.
    pub const RATE_1GB_FD: u32 = 1 << 5;
    /// 10 Gb full-duplex.
    pub const RATE_10GB_FD: u32 = 1 << 6;
    /// 40 Gb full-duplex.
    pub const RATE_40GB_FD: u32 = 1 << 7;
    /// 100 Gb full-duplex.
    pub const RATE_100GB_FD: u32 = 1 << 8;
    /// 1 Tb full-duplex.
    pub const RATE_1TB_FD: u32 = 1 << 9;
    /// Other rate.
    pub const OTHER: u32 = 1 << 10;
    /// Copper medium.
    pub const COPPER: u32 = 1 << 11;
    /// Fiber medium.
    pub const FIBER: u32 = 1 << 12;
    /// Auto-negotiation.
    pub const AUTONEG: u32 = 1 << 13;
    /// Pause.
    pub const PAUSE: u32 = 1 << 14;
    /// Asymmetric pause.
    pub const PAUSE_ASYM: u32 = 1 << 15;
}

/// `ofp_port`: one port's description.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PortDesc {
    /// Port number.
    pub port_no: u32,
    /// MAC address (48 bits in the low bits).
    pub hw_addr: [u8; 6],
    /// Name (at most 15 bytes on the wire).
    pub name: String,
    /// [`port_config`] bits.
    pub config: u32,
    /// [`port_state`] bits.
    pub state: u32,
    /// Current features ([`port_features`]).
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Features advertised by the peer.
    pub peer: u32,
    /// Current bit rate, kbit/s.
    pub curr_speed: u32,
    /// Maximum bit rate, kbit/s.
    pub max_speed: u32,
}

impl PortDesc {
    /// The description of a pipeline port with MAC address `hw_addr`: config bits from its
    /// flags (OpenFlow 1.3 has no bit for `no_flood`), state `LIVE` or `LINK_DOWN`; the
    /// feature words and speeds are left 0 (unknown) for the caller to fill.
    pub fn from_info(info: &pipeline::PortInfo, hw_addr: [u8; 6]) -> PortDesc {
        let bit = |b: bool, v: u32| if b { v } else { 0 };
        PortDesc {
            port_no: info.no,
            hw_addr,
            name: info.name.clone(),
            config: bit(info.down, port_config::PORT_DOWN)
                | bit(info.no_fwd, port_config::NO_FWD)
                | bit(info.no_packet_in, port_config::NO_PACKET_IN),
            state: if info.live {
                port_state::LIVE
            } else {
                port_state::LINK_DOWN
            },
            ..PortDesc::default()
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<PortDesc, DecodeError> {
        let mut b = r.sub(PORT_DESC_LEN, ErrorCode::BRC_BAD_LEN, "ofp_port")?;
        let port_no = b.u32()?;
        b.skip(4)?;
        let hw_addr = b.array()?;
        b.skip(2)?;
        Ok(PortDesc {
            port_no,
            hw_addr,
            name: b.string(16)?,
            config: b.u32()?,
            state: b.u32()?,
            curr: b.u32()?,
            advertised: b.u32()?,
            supported: b.u32()?,
            peer: b.u32()?,
            curr_speed: b.u32()?,
            max_speed: b.u32()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.port_no);
        buf.put_zeros(4);
        buf.extend_from_slice(&self.hw_addr);
        buf.put_zeros(2);
        buf.put_string(&self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            buf.put_u32(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_roundtrip() {
        let p = PortDesc {
            port_no: 1,
            hw_addr: [2, 0, 0, 0, 0, 1],
            name: "veth0".into(),
            config: port_config::NO_PACKET_IN,
            state: port_state::LIVE,
            curr: port_features::RATE_10GB_FD | port_features::COPPER,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
        };
        let mut b = Vec::new();
        p.write(&mut b);
        assert_eq!(b.len(), PORT_DESC_LEN);
        assert_eq!(&b[..16], &[0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(&b[16..22], b"veth0\0");
        let mut r = Reader::new(&b, ErrorCode::BRC_BAD_LEN, "t");
        assert_eq!(PortDesc::read(&mut r).unwrap(), p);
    }

    #[test]
    fn from_pipeline_port() {
        let info = pipeline::PortInfo {
            no: 3,
            name: "tap3".into(),
            no_fwd: true,
            down: true,
            live: false,
            ..Default::default()
        };
        let d = PortDesc::from_info(&info, [2, 0, 0, 0, 0, 3]);
        assert_eq!((d.port_no, d.name.as_str()), (3, "tap3"));
        assert_eq!(d.config, port_config::PORT_DOWN | port_config::NO_FWD);
        assert_eq!(d.state, port_state::LINK_DOWN);
    }
}
