//! Template bytes and checksums: golden frames, every protocol/field/size combination
//! checked against full checksums, frames without probes, IMIX, errors.
use super::*;
use packet::checksum;
use packet::extract::Layers;

/// Whether `f`'s IPv4 header and L4 checksums verify (using the packet crate's parser).
fn checksums_ok(f: &[u8], proto: Proto) -> bool {
    let mut key = packet::FlowKey::default();
    let layers: Layers = packet::extract(f, 0, &mut key);
    let l3 = usize::from(layers.l3_off);
    let l4 = usize::from(layers.l4_off);
    match proto {
        Proto::Udp6 => {
            let src = u128::from_be_bytes(f[l3 + 8..l3 + 24].try_into().unwrap());
            let dst = u128::from_be_bytes(f[l3 + 24..l3 + 40].try_into().unwrap());
            let ps = checksum::pseudo_v6(src, dst, 17, (f.len() - l4) as u32);
            checksum::verify(&f[l4..], ps)
        }
        _ => {
            let src = u32::from_be_bytes(f[l3 + 12..l3 + 16].try_into().unwrap());
            let dst = u32::from_be_bytes(f[l3 + 16..l3 + 20].try_into().unwrap());
            let ip_ok = checksum::verify(&f[l3..l4], 0);
            let ps = match proto {
                Proto::Icmp4 => 0,
                Proto::Tcp4 => checksum::pseudo_v4(src, dst, 6, (f.len() - l4) as u16),
                _ => checksum::pseudo_v4(src, dst, 17, (f.len() - l4) as u16),
            };
            ip_ok && checksum::verify(&f[l4..], ps)
        }
    }
}

fn write(fr: &Frame, flow: u32, probe: &Probe) -> Vec<u8> {
    let mut buf = vec![0xa5u8; fr.len().div_ceil(64) * 64];
    fr.write(&mut buf, flow, probe);
    buf.truncate(fr.len());
    buf
}

#[test]
fn udp4_64_golden() {
    let t = Traffic::default().compile().unwrap();
    let f = write(
        &t.frames[0],
        0,
        &Probe {
            stream: 1,
            flow: 0,
            seq: 2,
            time: 3,
        },
    );
    #[rustfmt::skip]
    let want: [u8; 60] = [
        0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
        0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xbd,
        10, 0, 0, 1, 10, 0, 0, 2,
        0x04, 0x00, 0x04, 0x00, 0x00, 0x1a, 0x52, 0xcb,
        0x48, 0x79, 0x47, 0x6e, 0x01, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3,
    ];
    assert_eq!(f, want);
    assert!(checksums_ok(&f, Proto::Udp4));
}

#[test]
fn every_proto_size_and_field_keeps_checksums_right() {
    let protos = [Proto::Udp4, Proto::Tcp4, Proto::Icmp4, Proto::Udp6];
    let fields = [
        VaryField::SrcIp,
        VaryField::DstIp,
        VaryField::SrcPort,
        VaryField::DstPort,
    ];
    for proto in protos {
        for vary in fields {
            if proto == Proto::Icmp4 && matches!(vary, VaryField::SrcPort | VaryField::DstPort) {
                continue;
            }
            for vlan in [None, Some(7)] {
                for size in [0, 1, 2, 3, 300, 301, 1518] {
                    let tr = Traffic {
                        proto,
                        vary,
                        vlan,
                        flows: 1000,
                        sizes: Sizes::Fixed(
                            size.max(
                                Traffic {
                                    proto,
                                    vlan,
                                    ..Traffic::default()
                                }
                                .probe_size()
                                    + size,
                            ),
                        ),
                        ..Traffic::default()
                    };
                    let t = tr.compile().unwrap();
                    for flow in [0, 1, 999] {
                        let probe = Probe {
                            stream: 9,
                            flow,
                            seq: 0xfffe_0001 + flow,
                            time: 0x0123_4567_89ab,
                        };
                        let f = write(&t.frames[0], flow, &probe);
                        assert!(
                            checksums_ok(&f, proto),
                            "{proto:?} {vary:?} {vlan:?} size {} flow {flow}",
                            f.len()
                        );
                        assert_eq!(Probe::read(&f), Some(probe));
                    }
                }
            }
        }
    }
}

#[test]
fn jumbo_frames_carry_right_checksums_and_probes() {
    for proto in [Proto::Udp4, Proto::Tcp4, Proto::Icmp4, Proto::Udp6] {
        for size in [1925, 4000, 9000, 9022, MAX_FRAME] {
            let tr = Traffic {
                proto,
                flows: 7,
                sizes: Sizes::Fixed(size),
                ..Traffic::default()
            };
            let frame = tr.pool_frame_size().unwrap();
            let room = frame - packet::HEADROOM;
            // The smallest frame size that holds it: half of it would not.
            assert!(room + FCS >= size, "{size}: {room}");
            assert!(frame / 2 - packet::HEADROOM + FCS < size, "{size}: {frame}");
            let t = tr.compile_for(room).unwrap();
            let probe = Probe {
                stream: 1,
                flow: 6,
                seq: 77,
                time: 12345,
            };
            let f = write(&t.frames[0], 6, &probe);
            assert_eq!(f.len(), size - FCS);
            assert!(checksums_ok(&f, proto), "{proto:?} size {size}");
            assert_eq!(Probe::read(&f), Some(probe));
        }
    }
}

#[test]
fn frames_too_short_for_a_probe_go_without() {
    for (proto, vlan) in [
        (Proto::Tcp4, None),
        (Proto::Udp4, Some(5)),
        (Proto::Udp6, None),
    ] {
        let tr = Traffic {
            proto,
            vlan,
            flows: 3,
            sizes: Sizes::Fixed(
                Traffic {
                    proto,
                    vlan,
                    ..Traffic::default()
                }
                .min_size(),
            ),
            ..Traffic::default()
        };
        let t = tr.compile().unwrap();
        assert!(!t.frames[0].probe, "{proto:?} {vlan:?}");
        let probe = Probe {
            stream: 0,
            flow: 2,
            seq: 9,
            time: 1,
        };
        let f = write(&t.frames[0], 2, &probe);
        assert!(checksums_ok(&f, proto), "{proto:?} {vlan:?}");
        assert_eq!(Probe::read(&f), None);
    }
}

#[test]
fn imix_pattern_is_7_4_1() {
    let t = Traffic {
        sizes: Sizes::Imix,
        ..Traffic::default()
    }
    .compile()
    .unwrap();
    let sizes: Vec<usize> = t
        .pattern
        .iter()
        .map(|&i| t.frames[usize::from(i)].size())
        .collect();
    for (s, w) in IMIX {
        assert_eq!(sizes.iter().filter(|&&x| x == s).count(), w as usize);
    }
    assert!((Sizes::Imix.mean() - 353.83).abs() < 0.01);
}

#[test]
fn bad_traffic_names_the_fix() {
    let err = |t: Traffic| t.compile().unwrap_err();
    assert!(err(Traffic {
        sizes: Sizes::Fixed(9000),
        ..Traffic::default()
    })
    .contains("jumbo"));
    let too_big = Traffic {
        sizes: Sizes::Fixed(MAX_FRAME + 1),
        ..Traffic::default()
    };
    assert!(too_big
        .compile_for(1 << 20)
        .unwrap_err()
        .contains("largest"));
    assert!(too_big
        .pool_frame_size()
        .unwrap_err()
        .contains("give 64 to"));
    assert!(err(Traffic {
        proto: Proto::Udp6,
        sizes: Sizes::Fixed(64),
        vlan: Some(3),
        ..Traffic::default()
    })
    .contains("give 70 to"));
    assert!(err(Traffic {
        flows: 0,
        ..Traffic::default()
    })
    .contains("at least 1"));
    assert!(err(Traffic {
        proto: Proto::Icmp4,
        vary: VaryField::SrcPort,
        ..Traffic::default()
    })
    .contains("no ports"));
    assert!(err(Traffic {
        vary: VaryField::SrcPort,
        flows: 65000,
        ..Traffic::default()
    })
    .contains("16-bit port"));
    assert!(err(Traffic {
        vlan: Some(5000),
        ..Traffic::default()
    })
    .contains("0 to 4094"));
}
