//! `OFPT_QUEUE_GET_CONFIG_REQUEST` / `_REPLY`: a port's queues and their rate properties.

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::wire::{patch_len, Put, Reader};

/// One queue property (`ofp_queue_prop_*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueProp {
    /// Guaranteed minimum rate, in 1/10 of a percent (> 1000: disabled).
    MinRate(u16),
    /// Maximum rate, in 1/10 of a percent (> 1000: disabled).
    MaxRate(u16),
    /// Experimenter property. Its data is padded with zeros to a multiple of 8 bytes on
    /// encode (OpenFlow structures are 64-bit aligned), so it decodes back with the padding.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Its data.
        data: Vec<u8>,
    },
}

/// `ofp_packet_queue`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketQueue {
    /// Queue id.
    pub queue_id: u32,
    /// The port it belongs to.
    pub port: u32,
    /// Its properties.
    pub properties: Vec<QueueProp>,
}

/// `OFPT_QUEUE_GET_CONFIG_REPLY`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueGetConfigReply {
    /// The port asked about (or ANY).
    pub port: u32,
    /// Its queues.
    pub queues: Vec<PacketQueue>,
}

fn bad_len(what: &str, len: usize) -> DecodeError {
    DecodeError::new(
        ErrorCode::BRC_BAD_LEN,
        format!("{what} length {len} is invalid"),
    )
}

impl QueueGetConfigReply {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port = r.u32()?;
        r.skip(4)?;
        let mut queues = Vec::new();
        while !r.is_empty() {
            let queue_id = r.u32()?;
            let qport = r.u32()?;
            let len = r.u16()? as usize;
            r.skip(6)?;
            if len < 16 {
                return Err(bad_len("packet queue", len));
            }
            let mut pr = r.sub(len - 16, ErrorCode::BRC_BAD_LEN, "queue properties")?;
            let mut properties = Vec::new();
            while !pr.is_empty() {
                let kind = pr.u16()?;
                let plen = pr.u16()? as usize;
                pr.skip(4)?;
                if plen < 8 {
                    return Err(bad_len("queue property", plen));
                }
                let mut body = pr.sub(plen - 8, ErrorCode::BRC_BAD_LEN, "queue property")?;
                properties.push(match kind {
                    1 | 2 if plen == 16 => {
                        let rate = body.u16()?;
                        if kind == 1 {
                            QueueProp::MinRate(rate)
                        } else {
                            QueueProp::MaxRate(rate)
                        }
                    }
                    0xffff if plen >= 16 => {
                        let experimenter = body.u32()?;
                        body.skip(4)?;
                        QueueProp::Experimenter {
                            experimenter,
                            data: body.rest().to_vec(),
                        }
                    }
                    _ => {
                        return Err(DecodeError::new(
                            ErrorCode::BRC_BAD_TYPE,
                            format!("queue property {kind} of length {plen} is unknown"),
                        ))
                    }
                });
            }
            queues.push(PacketQueue {
                queue_id,
                port: qport,
                properties,
            });
        }
        Ok(QueueGetConfigReply { port, queues })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        buf.put_u32(self.port);
        buf.put_zeros(4);
        for q in &self.queues {
            let start = buf.len();
            buf.put_u32(q.queue_id);
            buf.put_u32(q.port);
            buf.put_u16(0);
            buf.put_zeros(6);
            for p in &q.properties {
                let ps = buf.len();
                match p {
                    QueueProp::MinRate(rate) | QueueProp::MaxRate(rate) => {
                        buf.put_u16(if matches!(p, QueueProp::MinRate(_)) {
                            1
                        } else {
                            2
                        });
                        buf.put_u16(16);
                        buf.put_zeros(4);
                        buf.put_u16(*rate);
                        buf.put_zeros(6);
                    }
                    QueueProp::Experimenter { experimenter, data } => {
                        buf.put_u16(0xffff);
                        buf.put_u16(0);
                        buf.put_zeros(4);
                        buf.put_u32(*experimenter);
                        buf.put_zeros(4);
                        buf.extend_from_slice(data);
                        buf.pad_to_8(ps);
                        patch_len(buf, ps + 2, ps, "queue property")?;
                    }
                }
            }
            patch_len(buf, start + 8, start, "packet queue")?;
        }
        Ok(())
    }
}
