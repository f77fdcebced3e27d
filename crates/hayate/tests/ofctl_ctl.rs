//! `hayate ctl` on a running switch over its management socket, its output compared with
//! what `ovs-ofctl` prints for the same switch.

mod ofctl_common;

use ofctl_common::{flows, have_ofctl, Hayate};

fn ctl(h: &Hayate, args: &[&str]) -> String {
    h.ctl("brx", args)
}

#[test]
fn ctl_speaks_ofctl_syntax() {
    let h = Hayate::with_config(
        r#"
[[bridge]]
name = "brx"
fail_mode = "secure"

[[bridge.port]]
name = "a"
spec = "null:sink"

[[bridge.port]]
name = "b"
spec = "null:sink"
"#,
    );
    ctl(&h, &["add-flow", "priority=10,in_port=1,actions=output:2"]);
    let file = h.file("flows.txt");
    std::fs::write(
        &file,
        "# two more\npriority=20,ip,nw_dst=10.0.0.2,actions=output:1\npriority=30,udp,tp_dst=53,actions=drop\n",
    )
    .unwrap();
    ctl(&h, &["add-flows", file.to_str().unwrap()]);
    let mine = flows(&ctl(&h, &["dump-flows"]));
    assert_eq!(mine.len(), 3, "{mine:?}");
    assert!(mine
        .iter()
        .any(|l| l.ends_with("priority=10,in_port=1 actions=output:2")));
    ctl(
        &h,
        &[
            "mod-flows",
            "--strict",
            "priority=10,in_port=1,actions=output:1",
        ],
    );
    ctl(&h, &["del-flows", "--strict", "priority=30,udp,tp_dst=53"]);
    let mine = flows(&ctl(&h, &["dump-flows"]));
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert!(mine
        .iter()
        .any(|l| l.ends_with("priority=10,in_port=1 actions=output:1")));
    let ports = ctl(&h, &["dump-ports"]);
    assert!(
        ports.starts_with("OFPST_PORT reply (OF1.3): 2 ports"),
        "{ports}"
    );
    let desc = ctl(&h, &["dump-ports-desc"]);
    assert!(
        desc.contains(" 1(a): addr:") && desc.contains(" 2(b): addr:"),
        "{desc}"
    );
    let tables = ctl(&h, &["dump-tables"]);
    assert!(tables.contains("tables 2...254: ditto"), "{tables}");
    ctl(&h, &["add-group", "group_id=5,type=all,bucket=output:1"]);
    let groups = ctl(&h, &["dump-groups"]);
    assert!(groups.contains("group_id=5,type=all"), "{groups}");
    if have_ofctl("ctl_speaks_ofctl_syntax (comparison part)") {
        // The same flows, the same words, as ovs-ofctl prints them.
        let theirs = flows(&h.ofctl("dump-flows", &[]));
        let mine = flows(&ctl(&h, &["dump-flows"]));
        assert_eq!(mine, theirs);
        let theirs_tables = h.ofctl("dump-tables", &[]);
        let mine_tables = ctl(&h, &["dump-tables"]);
        let strip = |s: &str| s.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
        assert_eq!(strip(&mine_tables), strip(&theirs_tables));
    }
    ctl(&h, &["del-flows"]);
    assert!(flows(&ctl(&h, &["dump-flows"])).is_empty());
}
