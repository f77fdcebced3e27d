//! The vhost-user protocol from the device's side: what the front end (QEMU, DPDK's
//! virtio-user) asks, answered on `vhost`'s [`VhostUserBackendReqHandlerMut`] — the crate
//! reads and writes the messages and their file descriptors; this file keeps the device's
//! state and turns it into [`LiveRing`]s for the poll threads.
//!
//! A ring runs when it has a size, addresses, a kick (SET_VRING_KICK starts it;
//! GET_VRING_BASE stops it), is enabled (with protocol features it starts disabled until
//! SET_VRING_ENABLE) and a memory table is mapped. Any change to those, to its call eventfd,
//! to the features or to the memory table stops it (waiting out the batch that uses it) and
//! starts it again from where it stopped.
//!
//! Offered, and the same on every connection: virtio 1.0, mergeable receive buffers, event
//! idx, indirect descriptors, checksum offload and TSO (IPv4, IPv6, ECN) both ways,
//! multi-queue with the port's queue pairs, and the protocol features MQ and REPLY_ACK.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVirtioFeatures,
    VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{Backend, Error, GpuBackend, Result, VhostUserBackendReqHandlerMut};
use vhost::VhostUserMemoryRegionBase;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN,
    VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_HOST_ECN,
    VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF,
    VIRTIO_NET_F_STATUS,
};
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

use super::live::{LiveRing, NetFeatures};
use super::memory::{GuestMemory, RegionDesc};
use super::ring::{RingAddrs, SplitRing};
use super::Shared;

/// The virtio features the port offers (the list is in this file's opening docs).
pub fn offered_features() -> u64 {
    let bits = [
        VIRTIO_NET_F_CSUM,
        VIRTIO_NET_F_GUEST_CSUM,
        VIRTIO_NET_F_GUEST_TSO4,
        VIRTIO_NET_F_GUEST_TSO6,
        VIRTIO_NET_F_GUEST_ECN,
        VIRTIO_NET_F_HOST_TSO4,
        VIRTIO_NET_F_HOST_TSO6,
        VIRTIO_NET_F_HOST_ECN,
        VIRTIO_NET_F_MRG_RXBUF,
        VIRTIO_NET_F_CTRL_VQ,
        VIRTIO_NET_F_MQ,
        VIRTIO_NET_F_STATUS,
        VIRTIO_RING_F_INDIRECT_DESC,
        VIRTIO_RING_F_EVENT_IDX,
        VIRTIO_F_VERSION_1,
    ];
    bits.iter().fold(0u64, |f, b| f | 1 << b) | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
}

fn has(features: u64, bit: u32) -> bool {
    features & (1 << bit) != 0
}

/// What the front end told the port about one vring.
#[derive(Debug, Default)]
struct VringCfg {
    addrs: RingAddrs,
    addrs_set: bool,
    base: u16,
    /// Started by SET_VRING_KICK, stopped by GET_VRING_BASE.
    started: bool,
    enabled: bool,
    call: Option<OwnedFd>,
    kick: Option<OwnedFd>,
    /// Published to the slot (so a change must stop it first).
    published: bool,
}

/// The device state of one connection; see the [module docs](self).
pub struct DeviceState {
    shared: Arc<Shared>,
    features: u64,
    /// SET_FEATURES came on this connection.
    features_set: bool,
    protocol: u64,
    mem: Option<Arc<GuestMemory>>,
    vrings: Vec<VringCfg>,
}

fn refuse<T>(why: &'static str) -> Result<T> {
    Err(Error::InvalidOperation(why))
}

impl DeviceState {
    /// A fresh device for the port's shared state.
    pub fn new(shared: Arc<Shared>) -> DeviceState {
        let n = shared.vrings.len();
        DeviceState {
            shared,
            features: 0,
            features_set: false,
            protocol: 0,
            mem: None,
            vrings: (0..n).map(|_| VringCfg::default()).collect(),
        }
    }

    /// The connection ended: stop every ring, unmap the memory, forget what was negotiated.
    pub fn disconnected(&mut self) {
        for i in 0..self.vrings.len() {
            if self.vrings[i].published {
                self.shared.vrings[i].stop();
            }
            self.shared.vrings[i].set_kick(None);
        }
        let n = self.vrings.len();
        self.vrings = (0..n).map(|_| VringCfg::default()).collect();
        self.mem = None;
        self.features = 0;
        self.features_set = false;
        self.protocol = 0;
        self.update_link();
    }

    /// A SET_VRING_ENABLE seen before the features were set (QEMU sends a pair's enables
    /// first), which the protocol library refuses: the device takes it itself. Returns
    /// whether it did (false once features are set: the request is handled as usual).
    pub fn early_enable(&mut self, index: u32, on: bool) -> bool {
        if self.features_set {
            return false;
        }
        if let Some(v) = self.vrings.get_mut(index as usize) {
            v.enabled = on;
        }
        true
    }

    fn vring(&mut self, index: u32) -> Result<usize> {
        let i = index as usize;
        if i < self.vrings.len() {
            Ok(i)
        } else {
            Err(Error::InvalidParam)
        }
    }

    fn net(&self) -> NetFeatures {
        let f = self.features;
        NetFeatures {
            hdr_len: if has(f, VIRTIO_F_VERSION_1) || has(f, VIRTIO_NET_F_MRG_RXBUF) {
                12
            } else {
                10
            },
            mrg_rxbuf: has(f, VIRTIO_NET_F_MRG_RXBUF),
            guest_tso4: has(f, VIRTIO_NET_F_GUEST_TSO4),
            guest_tso6: has(f, VIRTIO_NET_F_GUEST_TSO6),
            guest_ecn: has(f, VIRTIO_NET_F_GUEST_ECN),
        }
    }

    /// Stops vring `i` if it runs (keeping where it stopped as its base) and starts it
    /// again when everything it needs is there. A ring whose addresses are not inside the
    /// memory table stays stopped, with a warning.
    fn refresh(&mut self, i: usize) {
        let slot = self.shared.vrings[i].clone();
        if self.vrings[i].published {
            self.vrings[i].base = slot.stop();
            self.vrings[i].published = false;
        }
        let net = self.net();
        let event_idx = has(self.features, VIRTIO_RING_F_EVENT_IDX);
        let v = &mut self.vrings[i];
        let Some(mem) = &self.mem else {
            return self.update_link();
        };
        if !(v.started && v.enabled && v.addrs_set && v.addrs.size > 0) {
            return self.update_link();
        }
        match SplitRing::new(mem, &v.addrs, event_idx) {
            Ok(ring) => {
                // Heads are completed in order, so a ring's used index is where it stopped.
                // A front end that reconnects after the switch died (DPDK's virtio-user sets
                // base 0) may give another base: the used index is the truth (as DPDK's own
                // vhost library decides); frames in flight at the crash are lost, none is
                // sent twice.
                let used = ring.used_idx();
                if used != v.base {
                    tracing::info!(
                        "vhost-user port {}: vring {i}: base {} but used index {used}; going on \
                         from the used index",
                        self.shared.name,
                        v.base
                    );
                    v.base = used;
                }
                let call = v.call.as_ref().and_then(|f| f.try_clone().ok());
                slot.start(Arc::new(LiveRing::new(
                    ring,
                    mem.clone(),
                    v.base,
                    call,
                    net,
                )));
                v.published = true;
            }
            Err(e) => tracing::warn!("vhost-user port {}: vring {i}: {e}", self.shared.name),
        }
        self.update_link();
    }

    fn refresh_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.refresh(i);
        }
    }

    fn update_link(&self) {
        let up = self.vrings.iter().any(|v| v.published);
        self.shared.set_link(up);
    }
}

impl VhostUserBackendReqHandlerMut for DeviceState {
    fn set_owner(&mut self) -> Result<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> Result<()> {
        self.disconnected();
        Ok(())
    }

    fn reset_device(&mut self) -> Result<()> {
        self.disconnected();
        Ok(())
    }

    fn get_features(&mut self) -> Result<u64> {
        Ok(offered_features())
    }

    fn set_features(&mut self, features: u64) -> Result<()> {
        if features & !offered_features() != 0 {
            return Err(Error::FeatureMismatch);
        }
        self.features = features;
        self.features_set = true;
        if !has(
            features,
            VhostUserVirtioFeatures::PROTOCOL_FEATURES
                .bits()
                .trailing_zeros(),
        ) {
            // Without protocol features a ring is enabled from the start.
            for v in &mut self.vrings {
                v.enabled = true;
            }
        }
        self.refresh_all();
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        let regions: Vec<RegionDesc> = ctx
            .iter()
            .map(|r| RegionDesc {
                gpa: r.guest_phys_addr,
                size: r.memory_size,
                user_addr: r.user_addr,
                mmap_offset: r.mmap_offset,
            })
            .collect();
        let mem = GuestMemory::map(&regions, files).map_err(|e| {
            tracing::warn!(
                "vhost-user port {}: memory table refused: {e}",
                self.shared.name
            );
            Error::InvalidParam
        })?;
        self.mem = Some(Arc::new(mem));
        self.refresh_all();
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        let i = self.vring(index)?;
        let size = u16::try_from(num).map_err(|_| Error::InvalidParam)?;
        if size == 0 || size > super::ring::MAX_QUEUE_SIZE || !size.is_power_of_two() {
            return Err(Error::InvalidParam);
        }
        self.vrings[i].addrs.size = size;
        self.refresh(i);
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> Result<()> {
        let i = self.vring(index)?;
        let v = &mut self.vrings[i];
        v.addrs.desc = descriptor;
        v.addrs.used = used;
        v.addrs.avail = available;
        v.addrs_set = true;
        self.refresh(i);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        let i = self.vring(index)?;
        if self.vrings[i].published {
            self.vrings[i].base = self.shared.vrings[i].stop();
            self.vrings[i].published = false;
        }
        self.vrings[i].base = base as u16;
        self.refresh(i);
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        let i = self.vring(index)?;
        self.vrings[i].started = false;
        self.refresh(i);
        Ok(VhostUserVringState::new(
            index,
            u32::from(self.vrings[i].base),
        ))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        // The switch polls; the kick eventfd only wakes a poll thread that sleeps on an
        // idle queue (the guest is asked to kick only then).
        let i = self.vring(u32::from(index))?;
        self.vrings[i].kick = self.shared.vrings[i].set_kick(fd.as_ref());
        self.vrings[i].started = true;
        self.refresh(i);
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let i = self.vring(u32::from(index))?;
        self.vrings[i].call = fd.map(OwnedFd::from);
        self.refresh(i);
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        self.vring(u32::from(index)).map(|_| ())
    }

    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        Ok(VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK)
    }

    fn set_protocol_features(&mut self, features: u64) -> Result<()> {
        self.protocol = features;
        Ok(())
    }

    fn get_queue_num(&mut self) -> Result<u64> {
        Ok((self.vrings.len() / 2) as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> Result<()> {
        let i = self.vring(index)?;
        self.vrings[i].enabled = enable;
        self.refresh(i);
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        refuse("no device configuration space")
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        refuse("no device configuration space")
    }

    fn set_gpu_socket(&mut self, _: GpuBackend) -> Result<()> {
        refuse("not a GPU")
    }

    fn get_shared_object(&mut self, _: VhostUserSharedMsg) -> Result<File> {
        refuse("no shared objects")
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        refuse("no inflight tracking")
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> Result<()> {
        refuse("no inflight tracking")
    }

    fn get_max_mem_slots(&mut self) -> Result<u64> {
        refuse("memory slots are not offered")
    }

    fn add_mem_region(
        &mut self,
        _: &VhostUserSingleMemoryRegion,
        _: File,
        _: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        refuse("memory slots are not offered")
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> Result<()> {
        refuse("memory slots are not offered")
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> Result<Option<File>> {
        refuse("no device state transfer")
    }

    fn check_device_state(&mut self) -> Result<()> {
        refuse("no device state transfer")
    }

    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        refuse("no shared memory regions")
    }

    fn set_log_base(&mut self, _: &VhostUserLog, _: File) -> Result<()> {
        refuse("no dirty-page logging (live migration)")
    }

    fn set_backend_req_fd(&mut self, _: Backend) {}
}
