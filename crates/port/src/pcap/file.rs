//! Reading a whole capture into memory, and creating the output capture.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

/// Snapshot length written in output captures.
pub(crate) const SNAPLEN: u32 = 65535;

/// The frames of an input capture, back to back in one buffer.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    bytes: Vec<u8>,
    /// `(start, len)` of each frame in `bytes`.
    frames: Vec<(usize, usize)>,
    /// Frames skipped because they do not fit a pool frame.
    pub(crate) too_long: u64,
    /// Whether the file ended in the middle of a frame (the partial frame is skipped).
    pub(crate) truncated: bool,
}

impl Capture {
    /// Number of frames kept.
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Frame `i` (`i < len()`).
    #[inline(always)]
    pub(crate) fn frame(&self, i: usize) -> &[u8] {
        let (start, len) = self.frames[i];
        &self.bytes[start..start + len]
    }
}

/// An I/O error as words, without the "(os error N)" tail.
pub(crate) fn reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// What to do about an I/O error on `path`.
fn fix(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "check the path",
        std::io::ErrorKind::PermissionDenied => "check the file's permissions",
        _ => "check the file",
    }
}

/// Reads the capture at `path`, keeping frames of at most `max` bytes.
pub(crate) fn load(path: &Path, max: usize) -> Result<Capture, String> {
    let shown = path.display();
    let data = std::fs::read(path)
        .map_err(|e| format!("cannot open {shown}: {}; {}", reason(&e), fix(&e)))?;
    if data.len() >= 4 && data[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        return Err(format!(
            "{shown} is a pcapng file; only pcap is read (convert it: editcap -F pcap IN OUT)"
        ));
    }
    let (mut rest, parser) = PcapParser::new(&data[..]).map_err(|e| match e {
        PcapError::IncompleteBuffer => format!("{shown} is too short to be a pcap file"),
        _ => format!("{shown} is not a pcap file ({e}); give a pcap capture"),
    })?;
    let link = parser.header().datalink;
    if link != DataLink::ETHERNET {
        return Err(format!(
            "{shown} has link type {link:?}; only Ethernet captures can be replayed"
        ));
    }
    let mut cap = Capture::default();
    while !rest.is_empty() {
        match parser.next_raw_packet(rest) {
            Ok((rem, raw)) => {
                rest = rem;
                if raw.data.len() > max {
                    cap.too_long += 1;
                    continue;
                }
                cap.frames.push((cap.bytes.len(), raw.data.len()));
                cap.bytes.extend_from_slice(&raw.data);
            }
            Err(PcapError::IncompleteBuffer) => {
                cap.truncated = true;
                break;
            }
            Err(e) => {
                let at = data.len() - rest.len();
                return Err(format!("{shown} is damaged at byte {at}: {e}"));
            }
        }
    }
    Ok(cap)
}

/// The output capture of a pcap port: the file behind a large buffer.
///
/// The file header is written with pcap-file's [`PcapHeader`]; the 16-byte record headers are
/// written here (in the header's native byte order) because pcap-file's writer offers no way
/// to flush its inner writer.
pub(crate) struct Writer {
    out: BufWriter<File>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    /// Creates (or truncates) the capture at `path` and writes its header: microsecond
    /// timestamps, link type Ethernet, snaplen 65535.
    pub(crate) fn create(path: &Path) -> Result<Writer, String> {
        let shown = path.display();
        let file = File::create(path).map_err(|e| {
            format!(
                "cannot create {shown}: {}; check the folder exists and is writable",
                reason(&e)
            )
        })?;
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::native(),
        };
        let mut out = BufWriter::with_capacity(256 * 1024, file);
        // The header goes to the file at once, so the file is a valid (empty) capture from
        // the start.
        header
            .write_to(&mut out)
            .map_err(|e| format!("cannot write to {shown}: {e}"))?;
        out.flush()
            .map_err(|e| format!("cannot write to {shown}: {}", reason(&e)))?;
        Ok(Writer { out })
    }

    /// Appends one frame captured at `ts` (time since the Unix epoch). Frames longer than
    /// the snaplen are cut to it (the record keeps the original length).
    #[inline]
    pub(crate) fn write(&mut self, ts: Duration, frame: &[u8]) -> std::io::Result<()> {
        let incl = frame.len().min(SNAPLEN as usize);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(ts.as_secs() as u32).to_ne_bytes());
        rec[4..8].copy_from_slice(&ts.subsec_micros().to_ne_bytes());
        rec[8..12].copy_from_slice(&(incl as u32).to_ne_bytes());
        rec[12..16].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&frame[..incl])
    }

    /// Pushes buffered frames to the file.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_names_the_file_and_the_reason() {
        let err = load(Path::new("/nonexistent/x.pcap"), 1920).unwrap_err();
        assert_eq!(
            err,
            "cannot open /nonexistent/x.pcap: No such file or directory; check the path"
        );
    }

    #[test]
    fn pcapng_and_garbage_are_refused() {
        let dir = std::env::temp_dir().join(format!("hayate-pcap-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ng = dir.join("x.pcapng");
        std::fs::write(&ng, [0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0]).unwrap();
        assert!(load(&ng, 1920).unwrap_err().contains("pcapng"));
        let junk = dir.join("junk.pcap");
        std::fs::write(&junk, [0x55; 40]).unwrap();
        assert!(load(&junk, 1920).unwrap_err().contains("not a pcap file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
