#!/usr/bin/env python3
"""Writes the UDP traffic of `hayate bench` as a pcap, for replaying into other switches.

    udp-pcap.py OUT.pcap                    one frame: the traffic of `hayate bench p2p-1flow`
    udp-pcap.py OUT.pcap --count 1000000    IPv4 sources 10.0.0.0, 10.0.0.1, ... : `flows-1M`
    udp-pcap.py OUT.pcap --count N --same   N copies of the one frame (a replay as large as
                                            N flows' without their lookups)
    udp-pcap.py OUT.pcap --vxlan            the one frame in VXLAN (tunnel id 42) from
                                            192.0.2.2 to 192.0.2.1: `vxlan-decap`
    udp-pcap.py --self-test                 checks the bytes against golden frames

Frames are Ethernet/IPv4/UDP, 02:00:00:00:00:01 -> 02:00:00:00:00:02, 10.0.0.1 -> 10.0.0.2
(with --count the source counts up from --src, default 10.0.0.0, unless --same), UDP
1024 -> 1024, TTL 64, IPv4 identification 0, no flags, zero payload, laid out as Hayate's
packet builder lays them out. --frame-len counts the FCS as RFC 2544 does: a 64-byte frame is
a 60-byte buffer. The IPv4 checksum is always correct. The UDP checksum is correct for one
flow (one frame, or --same) and 0 (none, valid for IPv4) for many flows, as `hayate bench`
leaves it when it varies the source. With --vxlan the frame (--frame-len is the inner
frame's) follows outer Ethernet 02:00:00:00:01:02 -> 02:00:00:00:01:01, IPv4 192.0.2.2 ->
192.0.2.1 (TTL 64, identification 0), UDP 49152 -> 4789 with checksum 0 and a VXLAN header
with tunnel id 42: the bytes `hayate bench vxlan-decap` sends (its runner's vxlan_frame).
Only the standard library is used.
"""
import argparse
import ipaddress
import struct
import sys

PCAP_HEADER = struct.pack('<IHHiIII', 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)  # LINKTYPE_ETHERNET
MAC_SRC = bytes.fromhex('020000000001')
MAC_DST = bytes.fromhex('020000000002')


def fold(s):
    """Ones'-complement fold of a 32-bit-or-wider sum to 16 bits."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def csum(data):
    """Internet checksum (RFC 1071) of `data` (even length)."""
    return ~fold(sum(struct.unpack('!%dH' % (len(data) // 2), data))) & 0xFFFF


def frame(src, dst, sport, dport, buf_len, udp_csum=True, pay=None, macs=(MAC_SRC, MAC_DST)):
    """One Ethernet/IPv4/UDP frame of `buf_len` bytes (FCS excluded) carrying `pay`
    (default: zeros)."""
    pay = bytes(buf_len - 42) if pay is None else pay
    udp_len = 8 + len(pay)
    src_b, dst_b = src.to_bytes(4, 'big'), dst.to_bytes(4, 'big')
    ip = bytearray(struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0,
                               src_b, dst_b))
    ip[10:12] = struct.pack('!H', csum(bytes(ip)))
    udp = bytearray(struct.pack('!HHHH', sport, dport, udp_len, 0) + pay)
    if udp_csum:
        pseudo = src_b + dst_b + struct.pack('!BBH', 0, 17, udp_len)
        c = csum(pseudo + bytes(udp) + (b'\0' if len(udp) % 2 else b''))
        udp[6:8] = struct.pack('!H', c or 0xFFFF)
    return macs[1] + macs[0] + b'\x08\x00' + bytes(ip) + bytes(udp)


def vxlan(inner, vni=42):
    """`inner` in VXLAN (tunnel id `vni`) from 192.0.2.2 to 192.0.2.1, outer UDP checksum 0."""
    ip = lambda t: int(ipaddress.IPv4Address(t))
    pay = bytes([0x08, 0, 0, 0]) + vni.to_bytes(3, 'big') + b'\0' + inner
    macs = (bytes.fromhex('020000000102'), bytes.fromhex('020000000101'))
    return frame(ip('192.0.2.2'), ip('192.0.2.1'), 49152, 4789, 42 + len(pay),
                 udp_csum=False, pay=pay, macs=macs)


def write_frames(path, frames):
    """Writes `frames` as they are."""
    with open(path, 'wb') as f:
        f.write(PCAP_HEADER)
        for fr in frames:
            f.write(struct.pack('<IIII', 0, 0, len(fr), len(fr)) + fr)


def write(path, count, src, dst, frame_len, same=False):
    """Writes `count` frames whose IPv4 source counts up from `src` (or, with `same`,
    `count` copies of the frame from `src`)."""
    buf_len = frame_len - 4
    if count == 1 or same:
        frames = [frame(src, dst, 1024, 1024, buf_len, udp_csum=True)] * count
    else:
        # Only the source address and the IPv4 checksum change: patch a template.
        tmpl = bytearray(frame(src, dst, 1024, 1024, buf_len, udp_csum=False))
        hdr = bytearray(tmpl[14:34])
        hdr[10:12] = b'\0\0'
        hdr[12:16] = b'\0\0\0\0'
        base = sum(struct.unpack('!10H', bytes(hdr)))
        frames = None
    rec = struct.pack('<IIII', 0, 0, buf_len, buf_len)
    with open(path, 'wb') as f:
        f.write(PCAP_HEADER)
        if frames is not None:
            for fr in frames:
                f.write(rec + fr)
            return
        out = bytearray()
        for i in range(count):
            a = (src + i) & 0xFFFFFFFF
            tmpl[26:30] = a.to_bytes(4, 'big')
            tmpl[24:26] = (~fold(base + (a >> 16) + (a & 0xFFFF)) & 0xFFFF).to_bytes(2, 'big')
            out += rec
            out += tmpl
            if len(out) > (1 << 22):
                f.write(out)
                out.clear()
        f.write(out)


def read(path):
    """The frames of a pcap written by write() (for the self-test)."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:24] != PCAP_HEADER:
        raise ValueError(f'{path}: not a little-endian Ethernet pcap')
    out, off = [], 24
    while off < len(data):
        _, _, incl, _ = struct.unpack_from('<IIII', data, off)
        out.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return out


def self_test():
    """Golden bytes shared with Hayate's packet builder (crates/packet/src/builder.rs)."""
    import os
    import tempfile

    def ip(text):
        return int(ipaddress.IPv4Address(text))

    # The builder's golden frame 10.0.0.1:1234 -> 10.0.0.2:80 (60 bytes), with the UDP
    # checksum of RFC 768 over the pseudo-header: ~(0x0a00+0x0001+0x0a00+0x0002+0x0011+0x001a
    # +0x04d2+0x0050+0x001a) = 0xe695.
    want = bytes.fromhex('020000000002' '020000000001' '0800'
                         '4500002e00000000401166bd' '0a000001' '0a000002'
                         '04d20050001ae695') + bytes(18)
    got = frame(ip('10.0.0.1'), ip('10.0.0.2'), 1234, 80, 60)
    assert got == want, got.hex()
    pseudo = got[26:34] + bytes([0, 17]) + got[38:40]
    assert csum(pseudo + got[34:]) == 0
    with tempfile.TemporaryDirectory() as d:
        one, many = os.path.join(d, 'one.pcap'), os.path.join(d, 'many.pcap')
        write(one, 1, ip('10.0.0.1'), ip('10.0.0.2'), 64)
        fr = read(one)
        assert len(fr) == 1 and len(fr[0]) == 60
        assert fr[0] == frame(ip('10.0.0.1'), ip('10.0.0.2'), 1024, 1024, 60)
        assert fr[0][34:38] == bytes.fromhex('04000400'), fr[0].hex()
        assert csum(fr[0][14:34]) == 0
        write(many, 70000, ip('10.0.0.0'), ip('10.0.0.2'), 64)
        fr = read(many)
        assert len(fr) == 70000
        for i in (0, 1, 255, 256, 65535, 65536, 69999):
            assert fr[i] == frame(ip('10.0.0.0') + i, ip('10.0.0.2'), 1024, 1024, 60,
                                  udp_csum=False), i
            assert csum(fr[i][14:34]) == 0, i
        assert fr[69999][26:30] == bytes([10, 1, 17, 111])
        write(many, 3, ip('10.0.0.0'), ip('10.0.0.2'), 128)
        assert [len(x) for x in read(many)] == [124] * 3
        write(many, 5, ip('10.0.0.1'), ip('10.0.0.2'), 64, same=True)
        assert read(many) == read(one) * 5
        # VXLAN around the golden frame: lengths, checksum, header, the inner bytes intact.
        v = vxlan(want)
        assert len(v) == 50 + 60 and v[:12] == bytes.fromhex('020000000101020000000102')
        assert v[16:18] == (96).to_bytes(2, 'big') and csum(v[14:34]) == 0, v.hex()
        assert v[34:42] == bytes.fromhex('c00012b5004c0000'), v[34:42].hex()
        assert v[42:50] == bytes.fromhex('080000000000' '2a00'), v[42:50].hex()
        assert v[50:] == want
        write_frames(one, [v])
        assert read(one) == [v]
    print('udp-pcap.py: self-test passed')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out', nargs='?', help='pcap file to write')
    ap.add_argument('--count', type=int, default=1, help='frames (distinct IPv4 sources)')
    ap.add_argument('--src', help='first IPv4 source (default 10.0.0.1 for one frame, '
                    '10.0.0.0 for --count > 1)')
    ap.add_argument('--dst', default='10.0.0.2', help='IPv4 destination')
    ap.add_argument('--frame-len', type=int, default=64, help='bytes on the wire, FCS included')
    ap.add_argument('--same', action='store_true',
                    help='--count copies of one frame instead of --count flows')
    ap.add_argument('--vxlan', action='store_true',
                    help='the one frame in VXLAN to 192.0.2.1, tunnel id 42 (vxlan-decap)')
    ap.add_argument('--self-test', action='store_true', help='check golden bytes and exit')
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.out:
        ap.error('name the pcap file to write (or pass --self-test)')
    if not 1 <= a.count <= 1 << 32:
        ap.error(f'--count {a.count} is out of range; use 1..4294967296')
    if not 64 <= a.frame_len <= 1518:
        ap.error(f'--frame-len {a.frame_len} is out of range; use 64..1518')
    try:
        one = a.count == 1 or a.same
        src = int(ipaddress.IPv4Address(a.src or ('10.0.0.1' if one else '10.0.0.0')))
        dst = int(ipaddress.IPv4Address(a.dst))
    except ValueError as e:
        ap.error(f'{e}; give a dotted IPv4 address such as 10.0.0.0')
    try:
        if a.vxlan:
            if a.count != 1:
                ap.error('--vxlan writes one frame; drop --count')
            write_frames(a.out, [vxlan(frame(src, dst, 1024, 1024, a.frame_len - 4))])
            return 0
        write(a.out, a.count, src, dst, a.frame_len, a.same)
    except OSError as e:
        print(f'udp-pcap.py: cannot write {a.out}: {e.strerror}; pick a writable path',
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
