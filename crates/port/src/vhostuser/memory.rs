//! A guest's memory as the switch sees it: the regions of a vhost-user memory table, each
//! mapped once (with `vm-memory`), and the translations the rings need — a guest physical
//! address (descriptors) or a front end's virtual address (ring addresses) to a host
//! pointer, only when the whole range lies inside one region.
//!
//! Nothing a guest hands over is trusted: a range that leaves its region, wraps around or
//! names no region translates to `None`, and the caller refuses the descriptor.

use std::fs::File;

use vm_memory::{FileOffset, MmapRegion};

/// Most regions a memory table may hold (QEMU sends at most 8 with SET_MEM_TABLE; the
/// memory-slot protocol raises that to 509, which the switch does not offer).
pub const MAX_REGIONS: usize = 8;

/// One region of a memory table, as the front end describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionDesc {
    /// Guest physical address of its first byte.
    pub gpa: u64,
    /// Length in bytes.
    pub size: u64,
    /// The front end's virtual address of its first byte.
    pub user_addr: u64,
    /// Where the region starts in the file descriptor sent with it.
    pub mmap_offset: u64,
}

/// One mapped region.
struct Region {
    gpa: u64,
    size: u64,
    user_addr: u64,
    /// Host address of the region's first byte.
    host: *mut u8,
    /// Keeps the mapping; unmapped on drop.
    _map: Option<MmapRegion>,
}

/// Memory a [`GuestMemory`] owns instead of a mapping (a test's pretend guest).
type Owned = Box<[u64]>;

/// A guest's mapped memory; see the [module docs](self).
pub struct GuestMemory {
    regions: Vec<Region>,
    /// The buffer behind a pretend guest's one region ([`GuestMemory::owned`]).
    _owned: Option<Owned>,
    /// Every region is backed by huge pages (2 MiB or more).
    huge: bool,
}

// SAFETY: the raw pointers name shared mappings that live as long as `self` (the `MmapRegion`s
// are kept beside them); every access through them is bounds-checked by `translate`, and the
// memory is the guest's, written concurrently by it anyway (the rings' protocol orders that).
unsafe impl Send for GuestMemory {}
// SAFETY: as above; `GuestMemory` has no interior mutability of its own.
unsafe impl Sync for GuestMemory {}

impl std::fmt::Debug for GuestMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for r in &self.regions {
            l.entry(&format_args!(
                "gpa {:#x}+{:#x} ua {:#x}",
                r.gpa, r.size, r.user_addr
            ));
        }
        l.finish()
    }
}

impl GuestMemory {
    /// Maps the regions of a memory table, one file each. Refuses a table with no region,
    /// too many, a region of size 0, one whose ends overflow, or one that overlaps another
    /// (in guest physical or front-end addresses).
    pub fn map(regions: &[RegionDesc], files: Vec<File>) -> Result<GuestMemory, String> {
        check_table(regions)?;
        if files.len() != regions.len() {
            return Err(format!(
                "{} regions came with {} file descriptors",
                regions.len(),
                files.len()
            ));
        }
        let mut out = Vec::with_capacity(regions.len());
        let mut huge = true;
        for (r, file) in regions.iter().zip(files) {
            let len = r
                .mmap_offset
                .checked_add(r.size)
                .ok_or("a region's mmap offset and size overflow")?;
            // A mapping past the file's end would fault (SIGBUS) when touched.
            let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len > file_len {
                return Err(format!(
                    "a region ends at byte {len} of a file of {file_len} bytes"
                ));
            }
            let block = block_size(&file);
            huge &= block >= 2 << 20;
            let len = align_up(len, block);
            let len =
                usize::try_from(len).map_err(|_| "a region is larger than the address space")?;
            let map = MmapRegion::build(
                Some(FileOffset::new(file, 0)),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
            )
            .map_err(|e| format!("cannot map a region of {len} bytes: {e}"))?;
            // SAFETY: mmap_offset + size <= len, the mapping's length.
            let host = unsafe { map.as_ptr().add(r.mmap_offset as usize) };
            out.push(Region {
                gpa: r.gpa,
                size: r.size,
                user_addr: r.user_addr,
                host,
                _map: Some(map),
            });
        }
        Ok(GuestMemory {
            regions: out,
            _owned: None,
            huge,
        })
    }

    /// One region of `buf.len() * 8` bytes that the memory owns, at guest physical address
    /// `gpa` and front-end address `user_addr` (a test's or a fuzzer's pretend guest).
    pub fn owned(gpa: u64, user_addr: u64, mut buf: Box<[u64]>) -> Result<GuestMemory, String> {
        let desc = RegionDesc {
            gpa,
            size: buf.len() as u64 * 8,
            user_addr,
            mmap_offset: 0,
        };
        check_table(&[desc])?;
        let host = buf.as_mut_ptr().cast::<u8>();
        Ok(GuestMemory {
            regions: vec![Region {
                gpa,
                size: desc.size,
                user_addr,
                host,
                _map: None,
            }],
            // Moving the box does not move its heap buffer: `host` stays valid.
            _owned: Some(buf),
            huge: false,
        })
    }

    /// A memory of regions the caller owns (tests and fuzzing: the "guest" is a buffer of
    /// the test's).
    ///
    /// # Safety
    /// Each `(desc, host)` pair must name `desc.size` bytes at `host` that stay valid and
    /// writable for as long as the returned value lives.
    pub unsafe fn from_raw(regions: &[(RegionDesc, *mut u8)]) -> Result<GuestMemory, String> {
        let descs: Vec<RegionDesc> = regions.iter().map(|r| r.0).collect();
        check_table(&descs)?;
        Ok(GuestMemory {
            regions: regions
                .iter()
                .map(|(d, host)| Region {
                    gpa: d.gpa,
                    size: d.size,
                    user_addr: d.user_addr,
                    host: *host,
                    _map: None,
                })
                .collect(),
            _owned: None,
            huge: false,
        })
    }

    /// The host address of guest physical range `[gpa, gpa + len)`, when one region holds
    /// all of it.
    #[inline]
    pub fn translate(&self, gpa: u64, len: u64) -> Option<*mut u8> {
        for r in &self.regions {
            let off = gpa.wrapping_sub(r.gpa);
            // off < size and len <= size - off: inside, without overflow.
            if off < r.size && len <= r.size - off {
                // SAFETY: off < size, inside the region's mapping.
                return Some(unsafe { r.host.add(off as usize) });
            }
        }
        None
    }

    /// The host address of the front end's virtual range `[addr, addr + len)` (ring
    /// addresses are given so), when one region holds all of it.
    pub fn translate_user(&self, addr: u64, len: u64) -> Option<*mut u8> {
        for r in &self.regions {
            let off = addr.wrapping_sub(r.user_addr);
            if off < r.size && len <= r.size - off {
                // SAFETY: off < size, inside the region's mapping.
                return Some(unsafe { r.host.add(off as usize) });
            }
        }
        None
    }

    /// Number of regions.
    pub fn regions(&self) -> usize {
        self.regions.len()
    }

    /// Whether every region is backed by huge pages. Then touching a buffer ahead of its
    /// copy (a prefetch) pays: one TLB entry covers many buffers. With 4 KiB pages nearly
    /// every buffer of a batch is on its own page, and prefetching a batch's buffers was
    /// measured slower than not (PVP with DPDK's virtio-user: 7.5–8.0 vs 8.4 Mpps; with huge
    /// pages 8.8–9.0 vs 8.1–8.6).
    pub fn huge_pages(&self) -> bool {
        self.huge
    }
}

fn check_table(regions: &[RegionDesc]) -> Result<(), String> {
    if regions.is_empty() {
        return Err("the memory table has no region".into());
    }
    if regions.len() > MAX_REGIONS {
        return Err(format!(
            "the memory table has {} regions; at most {MAX_REGIONS} are taken",
            regions.len()
        ));
    }
    for (i, r) in regions.iter().enumerate() {
        if r.size == 0 {
            return Err(format!("region {i} has size 0"));
        }
        let gpa_end = r.gpa.checked_add(r.size);
        let ua_end = r.user_addr.checked_add(r.size);
        let (Some(gpa_end), Some(ua_end)) = (gpa_end, ua_end) else {
            return Err(format!("region {i}'s addresses overflow"));
        };
        for (j, o) in regions.iter().enumerate().take(i) {
            let overlap = |a: u64, a_end: u64, b: u64, b_end: u64| a < b_end && b < a_end;
            if overlap(r.gpa, gpa_end, o.gpa, o.gpa.wrapping_add(o.size))
                || overlap(
                    r.user_addr,
                    ua_end,
                    o.user_addr,
                    o.user_addr.wrapping_add(o.size),
                )
            {
                return Err(format!("regions {j} and {i} overlap"));
            }
        }
    }
    Ok(())
}

/// The file's block size: the huge page size on hugetlbfs, whose mappings must be
/// multiples of it; a page elsewhere.
fn block_size(file: &File) -> u64 {
    use std::os::unix::fs::MetadataExt;
    file.metadata()
        .map(|m| m.blksize().max(4096))
        .unwrap_or(4096)
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(gpa: u64, size: u64, ua: u64) -> RegionDesc {
        RegionDesc {
            gpa,
            size,
            user_addr: ua,
            mmap_offset: 0,
        }
    }

    #[test]
    fn ranges_translate_only_inside_one_region() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        // SAFETY: both buffers outlive `m`.
        let m = unsafe {
            GuestMemory::from_raw(&[
                (desc(0, 4096, 0x10000), a.as_mut_ptr()),
                (desc(4096, 4096, 0x20000), b.as_mut_ptr()),
            ])
        }
        .unwrap();
        assert_eq!(m.translate(0, 4096), Some(a.as_mut_ptr()));
        assert_eq!(
            m.translate(4096 + 10, 10),
            Some(b.as_mut_ptr().wrapping_add(10))
        );
        // Crossing the boundary of two regions, past the end, wrapping around: refused.
        assert_eq!(m.translate(4000, 200), None);
        assert_eq!(m.translate(8192, 1), None);
        assert_eq!(m.translate(u64::MAX - 3, 8), None);
        assert_eq!(m.translate(10, u64::MAX), None);
        assert_eq!(
            m.translate_user(0x20000 + 4095, 1),
            Some(b.as_mut_ptr().wrapping_add(4095))
        );
        assert_eq!(m.translate_user(0x20000 + 4095, 2), None);
    }

    #[test]
    fn bad_tables_are_refused_with_the_reason() {
        let p = std::ptr::null_mut();
        // SAFETY: the tables are refused before any pointer is kept.
        let err = |t: &[(RegionDesc, *mut u8)]| unsafe { GuestMemory::from_raw(t) }.unwrap_err();
        assert!(err(&[]).contains("no region"));
        assert!(err(&[(desc(0, 0, 0), p)]).contains("size 0"));
        assert!(err(&[(desc(u64::MAX, 2, 0), p)]).contains("overflow"));
        assert!(err(&[(desc(0, 100, 0), p), (desc(50, 100, 1000), p)]).contains("overlap"));
        assert!(err(&[(desc(0, 100, 0), p), (desc(500, 100, 50), p)]).contains("overlap"));
        let many: Vec<_> = (0..9).map(|i| (desc(i * 10, 10, i * 10), p)).collect();
        assert!(err(&many).contains("at most 8"));
    }

    #[test]
    fn a_memfd_region_maps_at_its_offset() {
        use std::io::Write;
        // SAFETY: a plain memfd_create call with a valid name.
        let fd = unsafe { libc::memfd_create(c"hayate-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd was just created and is owned here.
        let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.write_all(&vec![7u8; 8192]).unwrap();
        f.write_all(b"guest-and-padding").unwrap();
        let m = GuestMemory::map(
            &[RegionDesc {
                gpa: 0x1000,
                size: 16,
                user_addr: 0x7000,
                mmap_offset: 8192,
            }],
            vec![f],
        )
        .unwrap();
        let p = m.translate(0x1000, 5).unwrap();
        // SAFETY: 5 bytes inside the mapped region.
        assert_eq!(unsafe { std::slice::from_raw_parts(p, 5) }, b"guest");
        assert!(m.translate(0x1000, 17).is_none());
    }

    #[test]
    fn a_region_past_its_file_s_end_is_refused() {
        // SAFETY: a plain memfd_create call with a valid name.
        let fd = unsafe { libc::memfd_create(c"hayate-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd was just created and is owned here.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(4096).unwrap();
        let e = GuestMemory::map(
            &[RegionDesc {
                gpa: 0,
                size: 8192,
                user_addr: 0,
                mmap_offset: 0,
            }],
            vec![f],
        )
        .unwrap_err();
        assert!(e.contains("a file of 4096 bytes"), "{e}");
    }
}
