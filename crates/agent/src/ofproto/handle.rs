//! One request from a controller → its replies, or the OpenFlow error that names what was
//! wrong (carrying the request's first 64 bytes). Nothing here ends a session.

use std::sync::atomic::Ordering::Relaxed;

use openflow::messages::switch::capabilities as cap;
use openflow::port::port_config;
use openflow::{
    AsyncConfig, ErrorCode, ErrorMsg, FeaturesReply, Message, PortMod, PortReason, PortStatus,
    QueueGetConfigReply, SwitchConfig, NO_BUFFER,
};
use pipeline::model::{MAX_TABLE, N_TABLES};

use super::{assemble, bulk, features, multipart, packet_out, OfBridge, State};
use crate::reply_stream::Producer;
use crate::role::Role;
use crate::ConnId;

/// Appends `msg` under `xid`. A message the codec cannot encode is a bug of ours: log it and
/// tell the controller something went wrong instead of sending nothing.
pub(super) fn reply(out: &mut Vec<u8>, xid: u32, msg: &Message) {
    if let Err(e) = openflow::encode(xid, msg, out) {
        tracing::error!("cannot encode a reply of type {}: {e}", msg.kind());
        let err = Message::Error(ErrorMsg {
            code: ErrorCode::BRC_EPERM,
            experimenter: 0,
            data: format!("the switch could not encode its reply: {e}").into_bytes(),
        });
        let _ = openflow::encode(xid, &err, out);
    }
}

/// Appends the error `code` answering `request`.
pub(super) fn error(out: &mut Vec<u8>, request: &[u8], code: ErrorCode) {
    openflow::encode_error_for(request, code, out);
}

fn code_of((kind, code): (u16, u16)) -> ErrorCode {
    ErrorCode { kind, code }
}

/// Answers one message into `out`, or returns the producer of a reply too big to build at
/// once (a dump of a big table), which follows `out`.
pub(super) fn handle(
    b: &OfBridge,
    conn: ConnId,
    role: Role,
    msg: &[u8],
    out: &mut Vec<u8>,
) -> Option<Producer> {
    let (h, m) = match openflow::decode(msg) {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!(conn = conn.0, "undecodable message: {}", e.reason);
            error(out, msg, e.code);
            return None;
        }
    };
    let xid = h.xid;
    use Message as M;
    match m {
        M::FeaturesRequest => reply(
            out,
            xid,
            &M::FeaturesReply(FeaturesReply {
                datapath_id: b.cfg.datapath_id,
                n_buffers: 0,
                // Every table that takes flows, as table stats and features list them.
                n_tables: N_TABLES,
                auxiliary_id: 0,
                capabilities: cap::FLOW_STATS
                    | cap::TABLE_STATS
                    | cap::PORT_STATS
                    | cap::GROUP_STATS,
                reserved: 0,
            }),
        ),
        M::GetConfigRequest => {
            let flags = b.lock().config_flags;
            reply(
                out,
                xid,
                &M::GetConfigReply(SwitchConfig {
                    flags,
                    miss_send_len: b.miss_send_len.load(Relaxed),
                }),
            );
        }
        M::SetConfig(c) => {
            // Fragments are handled one way, OFPC_FRAG_NORMAL (0): as any packet. Dropping or
            // reassembling them (1, 2) is refused rather than accepted and not done.
            if c.flags != 0 {
                error(out, msg, ErrorCode::SCFC_BAD_FLAGS);
                return None;
            }
            b.lock().config_flags = c.flags;
            b.miss_send_len.store(c.miss_send_len, Relaxed);
        }
        M::FlowMod(fm) => {
            if let Err((code, why)) = features::check_layout(&b.lock().table_layout, &fm.flow_mod) {
                tracing::debug!(conn = conn.0, "flow-mod refused: {why}");
                error(out, msg, code);
                return None;
            }
            if let Some((port, queue)) = b.missing_queue(&fm.flow_mod) {
                tracing::debug!(
                    conn = conn.0,
                    "flow-mod refused: port {port} has no queue {queue}"
                );
                error(out, msg, ErrorCode::BAC_BAD_QUEUE);
                return None;
            }
            let mut st = b.lock();
            if st.control.is_bulk(&fm.flow_mod) {
                match st.control.plan_bulk(&fm.flow_mod) {
                    Ok(plan) => {
                        drop(st);
                        return Some(bulk::producer(
                            b.state.clone(),
                            b.pump_wake
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .clone(),
                            plan,
                            fm.flow_mod,
                            fm.buffer_id,
                            msg.to_vec(),
                        ));
                    }
                    Err(e) => {
                        tracing::debug!(conn = conn.0, "flow-mod refused: {e}");
                        error(out, msg, code_of(e.ofp_error()));
                        return None;
                    }
                }
            }
            match st.control.flow_mod(&fm.flow_mod) {
                Ok(()) => {
                    st.dirty = true;
                    if fm.buffer_id != NO_BUFFER {
                        // Applied; the packet it names was never buffered.
                        error(out, msg, ErrorCode::BRC_BUFFER_UNKNOWN);
                    }
                }
                Err(e) => {
                    tracing::debug!(conn = conn.0, "flow-mod refused: {e}");
                    error(out, msg, code_of(e.ofp_error()));
                }
            }
        }
        M::GroupMod(g) => {
            let mut st = b.lock();
            match st.control.group_mod(&g) {
                Ok(()) => st.dirty = true,
                Err(e) => {
                    tracing::debug!(conn = conn.0, "group-mod refused: {e}");
                    error(out, msg, code_of(e.ofp_error()));
                }
            }
        }
        M::MeterMod(m) => {
            let mut st = b.lock();
            match st.control.meter_mod(&m.meter_mod) {
                Ok(()) => st.dirty = true,
                Err(e) => {
                    tracing::debug!(conn = conn.0, "meter-mod refused: {e}");
                    error(out, msg, code_of(e.ofp_error()));
                }
            }
        }
        M::PortMod(pm) => {
            if let Err(code) = port_mod(&mut b.lock(), &pm) {
                error(out, msg, code);
            }
        }
        M::TableMod(tm) => {
            // OpenFlow 1.3 defines no table config bits a switch must act on (table-miss
            // behaviour is a flow entry; OFPTC_DEPRECATED_MASK, 3, is what 1.1 and 1.2 had):
            // accept those and keep nothing; any other bit is no configuration at all.
            if tm.table_id > MAX_TABLE && tm.table_id != pipeline::model::ALL_TABLES {
                error(out, msg, ErrorCode::TMFC_BAD_TABLE);
            } else if tm.config & !3 != 0 {
                error(out, msg, ErrorCode::TMFC_BAD_CONFIG);
            }
        }
        M::PacketOut(po) => {
            if let Err(code) = packet_out::run(b, &po) {
                error(out, msg, code);
            }
        }
        M::BarrierRequest => {
            b.lock().publish();
            reply(out, xid, &M::BarrierReply);
        }
        M::GetAsyncRequest => {
            let cfg = b
                .lock()
                .async_cfg
                .get(&conn)
                .copied()
                .unwrap_or(AsyncConfig::DEFAULT);
            reply(out, xid, &M::GetAsyncReply(cfg));
        }
        M::SetAsync(cfg) => {
            let mut st = b.lock();
            if cfg == AsyncConfig::DEFAULT {
                st.async_cfg.remove(&conn);
            } else {
                st.async_cfg.insert(conn, cfg);
            }
            b.filtered.store(!st.async_cfg.is_empty(), Relaxed);
        }
        M::MultipartRequest(r) => {
            let sets_tables = matches!(
                &r.body,
                openflow::MultipartRequestBody::TableFeatures(set) if !set.is_empty()
            );
            if sets_tables && role == Role::Slave {
                error(out, msg, ErrorCode::BRC_IS_SLAVE);
                return None;
            }
            let step = b.lock().parts.take(conn, xid, r);
            match step {
                assemble::Step::Handle(r) => return multipart::reply_to(b, xid, msg, &r, out),
                assemble::Step::Held => {}
                assemble::Step::Refuse(code) => error(out, msg, code),
            }
        }
        M::QueueGetConfigRequest { port } => match b.queue_config(port) {
            Some(queues) => reply(
                out,
                xid,
                &M::QueueGetConfigReply(QueueGetConfigReply { port, queues }),
            ),
            None => error(out, msg, ErrorCode::QOFC_BAD_PORT),
        },
        M::Experimenter(e) if e.experimenter == super::port_cmd::HAYATE_EXPERIMENTER => {
            use super::port_cmd::exp_type;
            match e.exp_type {
                t if exp_type::is_dump(t) => super::counters::handle(b, conn, xid, &e, out),
                exp_type::SET_POLICING | exp_type::SET_QUEUE => {
                    super::qos::handle(b, conn, xid, &e, out)
                }
                _ => super::live_ports::handle(b, conn, xid, &e, out),
            }
        }
        M::Experimenter(_) => error(out, msg, ErrorCode::BRC_BAD_EXPERIMENTER),
        M::EchoRequest(d) => reply(out, xid, &M::EchoReply(d)),
        M::Error(e) => {
            tracing::info!(
                conn = conn.0,
                "controller sent an error: type {} code {}",
                e.code.kind,
                e.code.code
            );
        }
        M::Hello(_) | M::EchoReply(_) => {}
        M::RoleRequest(_) => {
            // The agent answers role requests itself; one reaching here is a bug upstream.
            tracing::warn!(conn = conn.0, ?role, "role request reached the bridge");
            error(out, msg, ErrorCode::BRC_EPERM);
        }
        // Messages only a switch sends.
        M::FeaturesReply(_)
        | M::GetConfigReply(_)
        | M::PacketIn(_)
        | M::FlowRemoved(_)
        | M::PortStatus(_)
        | M::MultipartReply(_)
        | M::BarrierReply
        | M::QueueGetConfigReply(_)
        | M::RoleReply(_)
        | M::GetAsyncReply(_) => error(out, msg, ErrorCode::BRC_BAD_TYPE),
    }
    None
}

/// PORT_MOD: NO_FWD, NO_PACKET_IN and PORT_DOWN reach the pipeline (NO_RECV is kept and
/// reported only); a PORT_STATUS follows when something changed.
fn port_mod(st: &mut State, pm: &PortMod) -> Result<(), ErrorCode> {
    let Some(i) = st.ports.iter().position(|p| p.port.no == pm.port_no) else {
        return Err(ErrorCode::PMFC_BAD_PORT);
    };
    if st.ports[i].port.hw_addr != pm.hw_addr {
        return Err(ErrorCode::PMFC_BAD_HW_ADDR);
    }
    let known = port_config::PORT_DOWN
        | port_config::NO_RECV
        | port_config::NO_FWD
        | port_config::NO_PACKET_IN;
    if pm.mask & !known != 0 {
        return Err(ErrorCode::PMFC_BAD_CONFIG);
    }
    // Ports advertise nothing (their descriptions say 0) and cannot be told to: 0 means
    // "leave it", anything else is refused rather than accepted and not done.
    if pm.advertise != 0 {
        return Err(ErrorCode::PMFC_BAD_ADVERTISE);
    }
    let p = &mut st.ports[i];
    let new = (p.config & !pm.mask) | (pm.config & pm.mask);
    if new == p.config {
        return Ok(());
    }
    p.config = new;
    let mut infos = st.control.ports().to_vec();
    if let Some(info) = infos.iter_mut().find(|x| x.no == pm.port_no) {
        info.down = new & port_config::PORT_DOWN != 0;
        info.no_fwd = new & port_config::NO_FWD != 0;
        info.no_packet_in = new & port_config::NO_PACKET_IN != 0;
        info.live = !info.down && st.ports[i].link;
    }
    st.control.set_ports(infos);
    st.dirty = true;
    st.publish();
    let desc = features::port_desc(&st.ports[i]);
    st.port_status.push(PortStatus {
        reason: PortReason::Modify,
        desc,
    });
    Ok(())
}
