//! `OFPT_MULTIPART_REQUEST` / `OFPT_MULTIPART_REPLY`: the statistics and description bodies.

pub mod config;
pub mod flow;
pub mod split;
pub mod stats;
pub mod table_features;

use pipeline::model::Group;

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::port::PortDesc;
use crate::wire::{Put, Reader};

pub use config::{GroupFeatures, MeterConfig, MeterFeatures};
pub use flow::{AggregateStats, FlowStats, FlowStatsRequest};
pub use split::{encode_reply, split_body, MAX_REPLY_BODY};
pub use stats::{Counter, Desc, GroupStats, MeterStats, PortStats, QueueStats, TableStats};
pub use table_features::{PropValue, TableFeatureProp, TableFeatures};

/// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`: more messages of this multipart follow.
pub const MORE: u16 = 1;

/// `OFPQ_ALL`: every queue (queue statistics requests).
pub const QUEUE_ALL: u32 = 0xffff_ffff;

/// `ofp_multipart_type` values.
pub mod multipart_type {
    /// `OFPMP_DESC`.
    pub const DESC: u16 = 0;
    /// `OFPMP_FLOW`.
    pub const FLOW: u16 = 1;
    /// `OFPMP_AGGREGATE`.
    pub const AGGREGATE: u16 = 2;
    /// `OFPMP_TABLE`.
    pub const TABLE: u16 = 3;
    /// `OFPMP_PORT_STATS`.
    pub const PORT_STATS: u16 = 4;
    /// `OFPMP_QUEUE`.
    pub const QUEUE: u16 = 5;
    /// `OFPMP_GROUP`.
    pub const GROUP: u16 = 6;
    /// `OFPMP_GROUP_DESC`.
    pub const GROUP_DESC: u16 = 7;
    /// `OFPMP_GROUP_FEATURES`.
    pub const GROUP_FEATURES: u16 = 8;
    /// `OFPMP_METER`.
    pub const METER: u16 = 9;
    /// `OFPMP_METER_CONFIG`.
    pub const METER_CONFIG: u16 = 10;
    /// `OFPMP_METER_FEATURES`.
    pub const METER_FEATURES: u16 = 11;
    /// `OFPMP_TABLE_FEATURES`.
    pub const TABLE_FEATURES: u16 = 12;
    /// `OFPMP_PORT_DESC`.
    pub const PORT_DESC: u16 = 13;
    /// `OFPMP_EXPERIMENTER`.
    pub const EXPERIMENTER: u16 = 0xffff;
}

use multipart_type as mt;

/// The body of a multipart request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartRequestBody {
    /// Switch description.
    Desc,
    /// Individual flow statistics.
    Flow(FlowStatsRequest),
    /// Aggregate flow statistics.
    Aggregate(FlowStatsRequest),
    /// Table statistics.
    Table,
    /// Port statistics of one port (or ANY).
    PortStats {
        /// Port (`ports::ANY`: all).
        port_no: u32,
    },
    /// Queue statistics.
    Queue {
        /// Port (ANY: all).
        port_no: u32,
        /// Queue (`OFPQ_ALL` 0xffffffff: all).
        queue_id: u32,
    },
    /// Group statistics.
    Group {
        /// Group (`GROUP_ALL`: all).
        group_id: u32,
    },
    /// Group descriptions.
    GroupDesc,
    /// Group features.
    GroupFeatures,
    /// Meter statistics.
    Meter {
        /// Meter (`METER_ALL`: all).
        meter_id: u32,
    },
    /// Meter configurations.
    MeterConfig {
        /// Meter (`METER_ALL`: all).
        meter_id: u32,
    },
    /// Meter features.
    MeterFeatures,
    /// Table features: empty to query, non-empty to set.
    TableFeatures(Vec<TableFeatures>),
    /// Port descriptions.
    PortDesc,
}

/// `OFPT_MULTIPART_REQUEST`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartRequest {
    /// Flags ([`MORE`]).
    pub flags: u16,
    /// Body.
    pub body: MultipartRequestBody,
}

/// The body of a multipart reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartReplyBody {
    /// Switch description.
    Desc(Desc),
    /// Flow statistics.
    Flow(Vec<FlowStats>),
    /// Aggregate statistics.
    Aggregate(AggregateStats),
    /// Table statistics.
    Table(Vec<TableStats>),
    /// Port statistics.
    PortStats(Vec<PortStats>),
    /// Queue statistics.
    Queue(Vec<QueueStats>),
    /// Group statistics.
    Group(Vec<GroupStats>),
    /// Group descriptions (the model's groups).
    GroupDesc(Vec<Group>),
    /// Group features.
    GroupFeatures(GroupFeatures),
    /// Meter statistics.
    Meter(Vec<MeterStats>),
    /// Meter configurations.
    MeterConfig(Vec<MeterConfig>),
    /// Meter features.
    MeterFeatures(MeterFeatures),
    /// Table features.
    TableFeatures(Vec<TableFeatures>),
    /// Port descriptions.
    PortDesc(Vec<PortDesc>),
}

/// `OFPT_MULTIPART_REPLY`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartReply {
    /// Flags ([`MORE`]).
    pub flags: u16,
    /// Body.
    pub body: MultipartReplyBody,
}

fn check_type(t: u16) -> Result<(), DecodeError> {
    match t {
        mt::EXPERIMENTER => Err(DecodeError::new(
            ErrorCode::BRC_BAD_EXPERIMENTER,
            "experimenter multipart messages are not supported by this switch",
        )),
        t if t > mt::PORT_DESC => Err(DecodeError::new(
            ErrorCode::BRC_BAD_MULTIPART,
            format!("multipart type {t} is unknown"),
        )),
        _ => Ok(()),
    }
}

fn list<T>(
    r: &mut Reader<'_>,
    f: impl Fn(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(f(r)?);
    }
    Ok(v)
}

fn port_and_pad(r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    let v = r.u32()?;
    r.skip(4)?;
    Ok(v)
}

impl MultipartRequest {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let t = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        check_type(t)?;
        use MultipartRequestBody as B;
        let body = match t {
            mt::DESC => B::Desc,
            mt::FLOW => B::Flow(FlowStatsRequest::read(r)?),
            mt::AGGREGATE => B::Aggregate(FlowStatsRequest::read(r)?),
            mt::TABLE => B::Table,
            mt::PORT_STATS => B::PortStats {
                port_no: port_and_pad(r)?,
            },
            mt::QUEUE => B::Queue {
                port_no: r.u32()?,
                queue_id: r.u32()?,
            },
            mt::GROUP => B::Group {
                group_id: port_and_pad(r)?,
            },
            mt::GROUP_DESC => B::GroupDesc,
            mt::GROUP_FEATURES => B::GroupFeatures,
            mt::METER => B::Meter {
                meter_id: port_and_pad(r)?,
            },
            mt::METER_CONFIG => B::MeterConfig {
                meter_id: port_and_pad(r)?,
            },
            mt::METER_FEATURES => B::MeterFeatures,
            mt::TABLE_FEATURES => B::TableFeatures(list(r, TableFeatures::read)?),
            _ => B::PortDesc,
        };
        Ok(MultipartRequest { flags, body })
    }

    /// The multipart type of the body.
    pub fn multipart_type(&self) -> u16 {
        use MultipartRequestBody as B;
        match self.body {
            B::Desc => mt::DESC,
            B::Flow(_) => mt::FLOW,
            B::Aggregate(_) => mt::AGGREGATE,
            B::Table => mt::TABLE,
            B::PortStats { .. } => mt::PORT_STATS,
            B::Queue { .. } => mt::QUEUE,
            B::Group { .. } => mt::GROUP,
            B::GroupDesc => mt::GROUP_DESC,
            B::GroupFeatures => mt::GROUP_FEATURES,
            B::Meter { .. } => mt::METER,
            B::MeterConfig { .. } => mt::METER_CONFIG,
            B::MeterFeatures => mt::METER_FEATURES,
            B::TableFeatures(_) => mt::TABLE_FEATURES,
            B::PortDesc => mt::PORT_DESC,
        }
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        use MultipartRequestBody as B;
        buf.put_u16(self.multipart_type());
        buf.put_u16(self.flags);
        buf.put_zeros(4);
        match &self.body {
            B::Flow(f) | B::Aggregate(f) => f.write(buf)?,
            B::PortStats { port_no: v }
            | B::Group { group_id: v }
            | B::Meter { meter_id: v }
            | B::MeterConfig { meter_id: v } => {
                buf.put_u32(*v);
                buf.put_zeros(4);
            }
            B::Queue { port_no, queue_id } => {
                buf.put_u32(*port_no);
                buf.put_u32(*queue_id);
            }
            B::TableFeatures(list) => {
                for t in list {
                    t.write(buf)?;
                }
            }
            B::Desc
            | B::Table
            | B::GroupDesc
            | B::GroupFeatures
            | B::MeterFeatures
            | B::PortDesc => {}
        }
        Ok(())
    }
}

impl MultipartReply {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let t = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        check_type(t)?;
        use MultipartReplyBody as B;
        let body = match t {
            mt::DESC => B::Desc(Desc::read(r)?),
            mt::FLOW => B::Flow(list(r, FlowStats::read)?),
            mt::AGGREGATE => B::Aggregate(AggregateStats::read(r)?),
            mt::TABLE => B::Table(list(r, TableStats::read)?),
            mt::PORT_STATS => B::PortStats(list(r, PortStats::read)?),
            mt::QUEUE => B::Queue(list(r, QueueStats::read)?),
            mt::GROUP => B::Group(list(r, GroupStats::read)?),
            mt::GROUP_DESC => B::GroupDesc(list(r, config::read_group_desc)?),
            mt::GROUP_FEATURES => B::GroupFeatures(GroupFeatures::read(r)?),
            mt::METER => B::Meter(list(r, MeterStats::read)?),
            mt::METER_CONFIG => B::MeterConfig(list(r, MeterConfig::read)?),
            mt::METER_FEATURES => B::MeterFeatures(MeterFeatures::read(r)?),
            mt::TABLE_FEATURES => B::TableFeatures(list(r, TableFeatures::read)?),
            _ => B::PortDesc(list(r, PortDesc::read)?),
        };
        Ok(MultipartReply { flags, body })
    }

    /// The multipart type of the body.
    pub fn multipart_type(&self) -> u16 {
        use MultipartReplyBody as B;
        match self.body {
            B::Desc(_) => mt::DESC,
            B::Flow(_) => mt::FLOW,
            B::Aggregate(_) => mt::AGGREGATE,
            B::Table(_) => mt::TABLE,
            B::PortStats(_) => mt::PORT_STATS,
            B::Queue(_) => mt::QUEUE,
            B::Group(_) => mt::GROUP,
            B::GroupDesc(_) => mt::GROUP_DESC,
            B::GroupFeatures(_) => mt::GROUP_FEATURES,
            B::Meter(_) => mt::METER,
            B::MeterConfig(_) => mt::METER_CONFIG,
            B::MeterFeatures(_) => mt::METER_FEATURES,
            B::TableFeatures(_) => mt::TABLE_FEATURES,
            B::PortDesc(_) => mt::PORT_DESC,
        }
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        use MultipartReplyBody as B;
        buf.put_u16(self.multipart_type());
        buf.put_u16(self.flags);
        buf.put_zeros(4);
        match &self.body {
            B::Desc(d) => d.write(buf),
            B::Flow(v) => v.iter().try_for_each(|x| x.write(buf))?,
            B::Aggregate(a) => a.write(buf),
            B::Table(v) => v.iter().for_each(|x| x.write(buf)),
            B::PortStats(v) => v.iter().for_each(|x| x.write(buf)),
            B::Queue(v) => v.iter().for_each(|x| x.write(buf)),
            B::Group(v) => v.iter().try_for_each(|x| x.write(buf))?,
            B::GroupDesc(v) => v
                .iter()
                .try_for_each(|g| config::write_group_desc(g, buf))?,
            B::GroupFeatures(f) => f.write(buf),
            B::Meter(v) => v.iter().try_for_each(|x| x.write(buf))?,
            B::MeterConfig(v) => v.iter().try_for_each(|x| x.write(buf))?,
            B::MeterFeatures(f) => f.write(buf),
            B::TableFeatures(v) => v.iter().try_for_each(|x| x.write(buf))?,
            B::PortDesc(v) => v.iter().for_each(|x| x.write(buf)),
        }
        Ok(())
    }
}
