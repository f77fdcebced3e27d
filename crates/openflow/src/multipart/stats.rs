//! Fixed-layout statistics bodies: switch description, table, port, queue, group and meter
//! statistics.

use pipeline::TableStatsView;

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_desc`: the switch's description strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    /// Manufacturer (≤ 255 bytes).
    pub mfr_desc: String,
    /// Hardware (≤ 255 bytes).
    pub hw_desc: String,
    /// Software (≤ 255 bytes).
    pub sw_desc: String,
    /// Serial number (≤ 31 bytes).
    pub serial_num: String,
    /// Datapath (≤ 255 bytes).
    pub dp_desc: String,
}

impl Desc {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Desc {
            mfr_desc: r.string(256)?,
            hw_desc: r.string(256)?,
            sw_desc: r.string(256)?,
            serial_num: r.string(32)?,
            dp_desc: r.string(256)?,
        })
    }

    /// Strings longer than their field are cut (at a character boundary).
    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_string(&self.mfr_desc, 256);
        buf.put_string(&self.hw_desc, 256);
        buf.put_string(&self.sw_desc, 256);
        buf.put_string(&self.serial_num, 32);
        buf.put_string(&self.dp_desc, 256);
    }
}

/// `ofp_table_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Active entries.
    pub active_count: u32,
    /// Packets looked up in the table.
    pub lookup_count: u64,
    /// Packets that hit an entry.
    pub matched_count: u64,
}

impl From<&TableStatsView> for TableStats {
    fn from(v: &TableStatsView) -> Self {
        TableStats {
            table_id: v.table_id,
            active_count: v.active.min(u32::MAX as u64) as u32,
            lookup_count: v.lookups,
            matched_count: v.matched,
        }
    }
}

impl TableStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableStats {
            table_id,
            active_count: r.u32()?,
            lookup_count: r.u64()?,
            matched_count: r.u64()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u8(self.table_id);
        buf.put_zeros(3);
        buf.put_u32(self.active_count);
        buf.put_u64(self.lookup_count);
        buf.put_u64(self.matched_count);
    }
}

/// `ofp_port_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortStats {
    /// Port.
    pub port_no: u32,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received packets dropped.
    pub rx_dropped: u64,
    /// Packets dropped on send.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Frame alignment errors.
    pub rx_frame_err: u64,
    /// Overruns.
    pub rx_over_err: u64,
    /// CRC errors.
    pub rx_crc_err: u64,
    /// Collisions.
    pub collisions: u64,
    /// Seconds the port has been up.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

impl PortStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut c = [0u64; 12];
        for x in &mut c {
            *x = r.u64()?;
        }
        Ok(PortStats {
            port_no,
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            rx_frame_err: c[8],
            rx_over_err: c[9],
            rx_crc_err: c[10],
            collisions: c[11],
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.port_no);
        buf.put_zeros(4);
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ] {
            buf.put_u64(v);
        }
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
    }
}

/// `ofp_queue_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueueStats {
    /// Port.
    pub port_no: u32,
    /// Queue.
    pub queue_id: u32,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped for overrun.
    pub tx_errors: u64,
    /// Seconds the queue has existed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

impl QueueStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(QueueStats {
            port_no: r.u32()?,
            queue_id: r.u32()?,
            tx_bytes: r.u64()?,
            tx_packets: r.u64()?,
            tx_errors: r.u64()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.port_no);
        buf.put_u32(self.queue_id);
        buf.put_u64(self.tx_bytes);
        buf.put_u64(self.tx_packets);
        buf.put_u64(self.tx_errors);
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
    }
}

/// A packet and byte counter pair (a group's bucket, a meter's band).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Counter {
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
}

fn read_counters(r: &mut Reader<'_>) -> Result<Vec<Counter>, DecodeError> {
    if r.remaining() & 15 != 0 {
        return Err(r.error("bucket/band counters are not a whole number of 16-byte entries"));
    }
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Counter {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
        });
    }
    Ok(v)
}

fn write_counters(c: &[Counter], buf: &mut Vec<u8>) {
    for x in c {
        buf.put_u64(x.packet_count);
        buf.put_u64(x.byte_count);
    }
}

pub(crate) fn sized_entry<'a>(
    r: &mut Reader<'a>,
    min: usize,
    what: &'static str,
    len_at: usize,
) -> Result<Reader<'a>, DecodeError> {
    let mut peek = r.clone();
    peek.skip(len_at)?;
    let len = peek.u16()? as usize;
    if len < min {
        return Err(DecodeError::new(
            ErrorCode::BRC_BAD_LEN,
            format!("{what} length {len} is below {min}"),
        ));
    }
    r.sub(len, ErrorCode::BRC_BAD_LEN, what)
}

/// `ofp_group_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupStats {
    /// Group.
    pub group_id: u32,
    /// Flows and groups forwarding to it.
    pub ref_count: u32,
    /// Packets processed.
    pub packet_count: u64,
    /// Bytes processed.
    pub byte_count: u64,
    /// Seconds it has existed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Per-bucket counters.
    pub bucket_stats: Vec<Counter>,
}

impl GroupStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut b = sized_entry(r, 40, "group stats entry", 0)?;
        b.skip(4)?;
        let group_id = b.u32()?;
        let ref_count = b.u32()?;
        b.skip(4)?;
        Ok(GroupStats {
            group_id,
            ref_count,
            packet_count: b.u64()?,
            byte_count: b.u64()?,
            duration_sec: b.u32()?,
            duration_nsec: b.u32()?,
            bucket_stats: read_counters(&mut b)?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u16(0);
        buf.put_zeros(2);
        buf.put_u32(self.group_id);
        buf.put_u32(self.ref_count);
        buf.put_zeros(4);
        buf.put_u64(self.packet_count);
        buf.put_u64(self.byte_count);
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
        write_counters(&self.bucket_stats, buf);
        patch_len(buf, start, start, "group stats entry")
    }
}

/// `ofp_meter_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MeterStats {
    /// Meter.
    pub meter_id: u32,
    /// Flows using it.
    pub flow_count: u32,
    /// Packets in.
    pub packet_in_count: u64,
    /// Bytes in.
    pub byte_in_count: u64,
    /// Seconds it has existed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Per-band counters of packets and bytes over the band's rate.
    pub band_stats: Vec<Counter>,
}

impl MeterStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut b = sized_entry(r, 40, "meter stats entry", 4)?;
        let meter_id = b.u32()?;
        b.skip(8)?;
        Ok(MeterStats {
            meter_id,
            flow_count: b.u32()?,
            packet_in_count: b.u64()?,
            byte_in_count: b.u64()?,
            duration_sec: b.u32()?,
            duration_nsec: b.u32()?,
            band_stats: read_counters(&mut b)?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u32(self.meter_id);
        buf.put_u16(0);
        buf.put_zeros(6);
        buf.put_u32(self.flow_count);
        buf.put_u64(self.packet_in_count);
        buf.put_u64(self.byte_in_count);
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
        write_counters(&self.band_stats, buf);
        patch_len(buf, start + 4, start, "meter stats entry")
    }
}
