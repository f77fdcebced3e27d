//! The [`Message`] enum and the two entry points, [`decode`] and [`encode`].

use pipeline::model::GroupMod;

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::header::{msg_type as t, Header, HEADER_LEN, OFP_VERSION};
use crate::messages::controller::{AsyncConfig, Experimenter, RoleRequest};
use crate::messages::error_msg::ErrorMsg;
use crate::messages::hello::Hello;
use crate::messages::mods::{read_group_mod, write_group_mod, FlowModMsg, MeterModMsg};
use crate::messages::packet::{FlowRemoved, PacketIn, PacketOut, PortStatus};
use crate::messages::queue::QueueGetConfigReply;
use crate::messages::switch::{FeaturesReply, PortMod, SwitchConfig, TableMod};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::wire::{patch_len, Put, Reader};

/// One OpenFlow 1.3 message (its body; the header's xid travels beside it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// `OFPT_HELLO`.
    Hello(Hello),
    /// `OFPT_ERROR`.
    Error(ErrorMsg),
    /// `OFPT_ECHO_REQUEST` with its arbitrary data.
    EchoRequest(Vec<u8>),
    /// `OFPT_ECHO_REPLY` with the request's data.
    EchoReply(Vec<u8>),
    /// `OFPT_EXPERIMENTER`.
    Experimenter(Experimenter),
    /// `OFPT_FEATURES_REQUEST`.
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY`.
    FeaturesReply(FeaturesReply),
    /// `OFPT_GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `OFPT_PACKET_IN`.
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED`.
    FlowRemoved(FlowRemoved),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
    /// `OFPT_PACKET_OUT`.
    PacketOut(PacketOut),
    /// `OFPT_FLOW_MOD`.
    FlowMod(FlowModMsg),
    /// `OFPT_GROUP_MOD`.
    GroupMod(GroupMod),
    /// `OFPT_PORT_MOD`.
    PortMod(PortMod),
    /// `OFPT_TABLE_MOD`.
    TableMod(TableMod),
    /// `OFPT_MULTIPART_REQUEST`.
    MultipartRequest(MultipartRequest),
    /// `OFPT_MULTIPART_REPLY`.
    MultipartReply(MultipartReply),
    /// `OFPT_BARRIER_REQUEST`.
    BarrierRequest,
    /// `OFPT_BARRIER_REPLY`.
    BarrierReply,
    /// `OFPT_QUEUE_GET_CONFIG_REQUEST` for a port (or ANY).
    QueueGetConfigRequest {
        /// The port.
        port: u32,
    },
    /// `OFPT_QUEUE_GET_CONFIG_REPLY`.
    QueueGetConfigReply(QueueGetConfigReply),
    /// `OFPT_ROLE_REQUEST`.
    RoleRequest(RoleRequest),
    /// `OFPT_ROLE_REPLY`.
    RoleReply(RoleRequest),
    /// `OFPT_GET_ASYNC_REQUEST`.
    GetAsyncRequest,
    /// `OFPT_GET_ASYNC_REPLY`.
    GetAsyncReply(AsyncConfig),
    /// `OFPT_SET_ASYNC`.
    SetAsync(AsyncConfig),
    /// `OFPT_METER_MOD`.
    MeterMod(MeterModMsg),
}

impl Message {
    /// The `ofp_type` of the message.
    pub fn kind(&self) -> u8 {
        use Message as M;
        match self {
            M::Hello(_) => t::HELLO,
            M::Error(_) => t::ERROR,
            M::EchoRequest(_) => t::ECHO_REQUEST,
            M::EchoReply(_) => t::ECHO_REPLY,
            M::Experimenter(_) => t::EXPERIMENTER,
            M::FeaturesRequest => t::FEATURES_REQUEST,
            M::FeaturesReply(_) => t::FEATURES_REPLY,
            M::GetConfigRequest => t::GET_CONFIG_REQUEST,
            M::GetConfigReply(_) => t::GET_CONFIG_REPLY,
            M::SetConfig(_) => t::SET_CONFIG,
            M::PacketIn(_) => t::PACKET_IN,
            M::FlowRemoved(_) => t::FLOW_REMOVED,
            M::PortStatus(_) => t::PORT_STATUS,
            M::PacketOut(_) => t::PACKET_OUT,
            M::FlowMod(_) => t::FLOW_MOD,
            M::GroupMod(_) => t::GROUP_MOD,
            M::PortMod(_) => t::PORT_MOD,
            M::TableMod(_) => t::TABLE_MOD,
            M::MultipartRequest(_) => t::MULTIPART_REQUEST,
            M::MultipartReply(_) => t::MULTIPART_REPLY,
            M::BarrierRequest => t::BARRIER_REQUEST,
            M::BarrierReply => t::BARRIER_REPLY,
            M::QueueGetConfigRequest { .. } => t::QUEUE_GET_CONFIG_REQUEST,
            M::QueueGetConfigReply(_) => t::QUEUE_GET_CONFIG_REPLY,
            M::RoleRequest(_) => t::ROLE_REQUEST,
            M::RoleReply(_) => t::ROLE_REPLY,
            M::GetAsyncRequest => t::GET_ASYNC_REQUEST,
            M::GetAsyncReply(_) => t::GET_ASYNC_REPLY,
            M::SetAsync(_) => t::SET_ASYNC,
            M::MeterMod(_) => t::METER_MOD,
        }
    }
}

/// Decodes one whole message (`bytes` is exactly one frame, see [`crate::frame_len`]).
///
/// A hello of any version decodes (negotiation needs it); every other message must be
/// version 0x04. On failure the [`DecodeError`] names the `OFPT_ERROR` type and code to
/// answer with; [`Header::parse`] gives the xid to answer under.
pub fn decode(bytes: &[u8]) -> Result<(Header, Message), DecodeError> {
    let header = Header::parse(bytes)?;
    if header.length as usize != bytes.len() {
        return Err(DecodeError::new(
            ErrorCode::BRC_BAD_LEN,
            format!(
                "the header says {} bytes but the message has {}",
                header.length,
                bytes.len()
            ),
        ));
    }
    if header.kind != t::HELLO && header.version != OFP_VERSION {
        return Err(DecodeError::new(
            ErrorCode::BRC_BAD_VERSION,
            format!(
                "message version {:#04x} is not OpenFlow 1.3 (0x04), the version negotiated",
                header.version
            ),
        ));
    }
    let mut r = Reader::new(&bytes[HEADER_LEN..], ErrorCode::BRC_BAD_LEN, "message");
    use Message as M;
    let msg = match header.kind {
        t::HELLO => M::Hello(Hello::read(header.version, &mut r)?),
        t::ERROR => M::Error(ErrorMsg::read(&mut r)?),
        t::ECHO_REQUEST => M::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => M::EchoReply(r.rest().to_vec()),
        t::EXPERIMENTER => M::Experimenter(Experimenter::read(&mut r)?),
        t::FEATURES_REQUEST => M::FeaturesRequest,
        t::FEATURES_REPLY => M::FeaturesReply(FeaturesReply::read(&mut r)?),
        t::GET_CONFIG_REQUEST => M::GetConfigRequest,
        t::GET_CONFIG_REPLY => M::GetConfigReply(SwitchConfig::read(&mut r)?),
        t::SET_CONFIG => M::SetConfig(SwitchConfig::read(&mut r)?),
        t::PACKET_IN => M::PacketIn(PacketIn::read(&mut r)?),
        t::FLOW_REMOVED => M::FlowRemoved(FlowRemoved::read(&mut r)?),
        t::PORT_STATUS => M::PortStatus(PortStatus::read(&mut r)?),
        t::PACKET_OUT => M::PacketOut(PacketOut::read(&mut r)?),
        t::FLOW_MOD => M::FlowMod(FlowModMsg::read(&mut r)?),
        t::GROUP_MOD => M::GroupMod(read_group_mod(&mut r)?),
        t::PORT_MOD => M::PortMod(PortMod::read(&mut r)?),
        t::TABLE_MOD => M::TableMod(TableMod::read(&mut r)?),
        t::MULTIPART_REQUEST => M::MultipartRequest(MultipartRequest::read(&mut r)?),
        t::MULTIPART_REPLY => M::MultipartReply(MultipartReply::read(&mut r)?),
        t::BARRIER_REQUEST => M::BarrierRequest,
        t::BARRIER_REPLY => M::BarrierReply,
        t::QUEUE_GET_CONFIG_REQUEST => {
            let port = r.u32()?;
            r.skip(4)?;
            M::QueueGetConfigRequest { port }
        }
        t::QUEUE_GET_CONFIG_REPLY => M::QueueGetConfigReply(QueueGetConfigReply::read(&mut r)?),
        t::ROLE_REQUEST => M::RoleRequest(RoleRequest::read(&mut r)?),
        t::ROLE_REPLY => M::RoleReply(RoleRequest::read(&mut r)?),
        t::GET_ASYNC_REQUEST => M::GetAsyncRequest,
        t::GET_ASYNC_REPLY => M::GetAsyncReply(AsyncConfig::read(&mut r)?),
        t::SET_ASYNC => M::SetAsync(AsyncConfig::read(&mut r)?),
        t::METER_MOD => M::MeterMod(MeterModMsg::read(&mut r)?),
        k => {
            return Err(DecodeError::new(
                ErrorCode::BRC_BAD_TYPE,
                format!("message type {k} is not an OpenFlow 1.3 message"),
            ))
        }
    };
    if !r.is_empty() {
        return Err(DecodeError::new(
            ErrorCode::BRC_BAD_LEN,
            format!(
                "message type {} has {} bytes after its body",
                header.kind,
                r.remaining()
            ),
        ));
    }
    Ok((header, msg))
}

/// Appends the ERROR `code` answering `request` (the offending bytes, header first): under
/// its xid (0 when not even a header came), quoting its first
/// [`ERROR_DATA_MAX`](crate::messages::error_msg::ERROR_DATA_MAX) bytes.
pub fn encode_error_for(request: &[u8], code: ErrorCode, buf: &mut Vec<u8>) {
    let xid = Header::parse(request).map_or(0, |h| h.xid);
    let msg = Message::Error(ErrorMsg::for_request(code, request));
    // An error quoting at most 64 bytes is far below any limit: it always encodes.
    let _ = encode(xid, &msg, buf);
}

/// Appends `msg` with transaction id `xid` to `buf`. On error `buf` is left as it was.
pub fn encode(xid: u32, msg: &Message, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = buf.len();
    let r = encode_inner(xid, msg, buf);
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

fn encode_inner(xid: u32, msg: &Message, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = buf.len();
    let version = match msg {
        Message::Hello(h) => h.version,
        _ => OFP_VERSION,
    };
    Header {
        version,
        kind: msg.kind(),
        length: 0,
        xid,
    }
    .write(buf);
    use Message as M;
    match msg {
        M::Hello(h) => h.write(buf),
        M::Error(e) => e.write(buf),
        M::EchoRequest(d) | M::EchoReply(d) => buf.extend_from_slice(d),
        M::Experimenter(e) => e.write(buf),
        M::FeaturesRequest
        | M::GetConfigRequest
        | M::BarrierRequest
        | M::BarrierReply
        | M::GetAsyncRequest => {}
        M::FeaturesReply(f) => f.write(buf),
        M::GetConfigReply(c) | M::SetConfig(c) => c.write(buf),
        M::PacketIn(p) => p.write(buf)?,
        M::FlowRemoved(f) => f.write(buf)?,
        M::PortStatus(p) => p.write(buf),
        M::PacketOut(p) => p.write(buf)?,
        M::FlowMod(f) => f.write(buf)?,
        M::GroupMod(g) => write_group_mod(g, buf)?,
        M::PortMod(p) => p.write(buf),
        M::TableMod(tm) => tm.write(buf),
        M::MultipartRequest(m) => m.write(buf)?,
        M::MultipartReply(m) => m.write(buf)?,
        M::QueueGetConfigRequest { port } => {
            buf.put_u32(*port);
            buf.put_zeros(4);
        }
        M::QueueGetConfigReply(q) => q.write(buf)?,
        M::RoleRequest(rr) | M::RoleReply(rr) => rr.write(buf),
        M::GetAsyncReply(a) | M::SetAsync(a) => a.write(buf),
        M::MeterMod(m) => m.write(buf),
    }
    patch_len(buf, start + 2, start, "message")
}
