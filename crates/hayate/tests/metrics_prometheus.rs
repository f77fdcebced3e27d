//! `hayate run --metrics ADDR` seen from outside: a real Prometheus server (Debian's
//! `prometheus`, installed by scripts/setup.sh) scrapes a switch whose in-memory ports carry
//! traffic, and its query API must show the target up and the port counters moving. Also,
//! without Prometheus: the HTTP side's refusals, a connected controller's series, and a bad
//! address's error.

mod ofctl_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ofctl_common::{free_port, Hayate};

/// The source port: a bounded burst, so the poll thread goes idle (and sleeps) after it.
const SOURCE: &str = "null:limit=200000";

/// A switch on a `null:` source and a `null:sink`, serving metrics on `addr`.
fn switch(addr: &str) -> Hayate {
    Hayate::start(&["--port", SOURCE, "--port", "null:sink", "--metrics", addr])
}

/// `GET path` on `addr` over HTTP/1.0 (the server closes): (status line, body).
fn get(addr: &str, method: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn metrics_endpoint_answers_the_exposition_and_refuses_the_rest() {
    let addr = format!("127.0.0.1:{}", free_port());
    let h = switch(&addr);
    let (status, body) = get(&addr, "GET", "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "log:\n{}", h.log());
    for line in [
        "# TYPE hayate_port_rx_packets_total counter",
        "# TYPE hayate_port_drops_total counter",
        "# TYPE hayate_pmd_busy_cycles_total counter",
        "# TYPE hayate_table_flows gauge",
        "# TYPE hayate_controller_connections gauge",
    ] {
        assert!(body.lines().any(|l| l == line), "no {line:?} in\n{body}");
    }
    let sink = r#"hayate_port_tx_packets_total{bridge="br0",ofport="2",port="null:sink"}"#;
    assert!(value(&body, sink).is_some(), "{body}");
    // The packet pool: its size as `--pool-frames` gave it, none of it exhausted.
    let frames = r#"hayate_pool_frames{bridge="br0",pool="packet"}"#;
    let dry = r#"hayate_pool_exhaustions_total{bridge="br0",pool="packet"}"#;
    assert!(value(&body, frames).is_some_and(|v| v > 0.0), "{body}");
    assert_eq!(value(&body, dry), Some(0.0), "{body}");
    assert_eq!(get(&addr, "GET", "/").0, "HTTP/1.1 404 Not Found");
    assert_eq!(
        get(&addr, "POST", "/metrics").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
}

/// Every metric the Grafana dashboard in docs/ queries is one the switch serves, so a panel
/// cannot show "no data" for a misspelt or removed name.
#[test]
fn every_dashboard_metric_is_served() {
    let addr = format!("127.0.0.1:{}", free_port());
    let h = switch(&addr);
    // A controller connected, so that its per-connection families have series.
    let _c = controller(h.port);
    let (_, body) = get(&addr, "GET", "/metrics");
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana-dashboard.json"
    ))
    .expect("docs/grafana-dashboard.json");
    let mut names: Vec<&str> = dashboard
        .match_indices("hayate_")
        .map(|(at, _)| {
            let rest = &dashboard[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 20, "{names:?}");
    for n in names {
        let typed = format!("# TYPE {n} ");
        assert!(
            body.lines().any(|l| l.starts_with(&typed)),
            "the dashboard queries {n}, which the switch does not serve\nlog:\n{}",
            h.log()
        );
    }
}

/// A controller on `port` that said HELLO and got its barrier reply.
fn controller(port: u16) -> TcpStream {
    use openflow::{Hello, Message};
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    openflow::encode(1, &Message::Hello(Hello::default()), &mut out).unwrap();
    openflow::encode(2, &Message::BarrierRequest, &mut out).unwrap();
    s.write_all(&out).unwrap();
    loop {
        let mut h = [0u8; 8];
        s.read_exact(&mut h).expect("a message from the switch");
        let mut msg = h.to_vec();
        msg.resize(u16::from_be_bytes([h[2], h[3]]) as usize, 0);
        s.read_exact(&mut msg[8..]).unwrap();
        if let (h, Message::BarrierReply) = openflow::decode(&msg).unwrap() {
            assert_eq!(h.xid, 2);
            return s;
        }
    }
}

/// The value of the series `series` (name and labels, exactly) in an exposition.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_connected_controller_shows_with_its_messages() {
    let addr = format!("127.0.0.1:{}", free_port());
    let h = switch(&addr);
    let connections = r#"hayate_controller_connections{bridge="br0"}"#;
    let c = controller(h.port);
    let body = get(&addr, "GET", "/metrics").1;
    assert_eq!(value(&body, connections), Some(1.0), "{body}");
    let rx = body
        .lines()
        .find(|l| l.starts_with(r#"hayate_controller_rx_messages_total{bridge="br0","#))
        .unwrap_or_else(|| panic!("no controller series in\n{body}"));
    assert!(rx.contains(r#"role="equal""#), "{rx}");
    let n: f64 = rx.rsplit(' ').next().unwrap().parse().unwrap();
    // The BARRIER_REQUEST; the HELLO came before the connection was registered.
    assert_eq!(n, 1.0, "{rx}");
    drop(c);
}

#[test]
fn a_bad_metrics_address_stops_the_switch_with_its_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["run", "--port", "null:sink", "--metrics", "localhost:9464"])
        .args(["--duration", "5"])
        .output()
        .expect("run hayate");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics \"localhost:9464\": not an IP address and port"),
        "{err}"
    );
}

/// A `prometheus` child, killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `target` as job `job` every second, on a free loopback
    /// port with its storage in a temp dir.
    fn start(job: &str, target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: {job}\n    scrape_interval: 1s\n    \
                 scrape_timeout: 1s\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The value of the instant query `q`'s first sample, if it has one.
    fn query(&self, q: &str) -> Option<f64> {
        TcpStream::connect(&self.addr).ok()?;
        let (status, body) = get(
            &self.addr,
            "GET",
            &format!("/api/v1/query?query={}", encode(q)),
        );
        // Go's server answers an HTTP/1.0 request in HTTP/1.0.
        if !status.ends_with(" 200 OK") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

/// Percent-encodes a query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_switch_and_sees_its_port_counters() {
    if Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("SKIP: prometheus is not installed (scripts/setup.sh installs it)");
        return;
    }
    let addr = format!("127.0.0.1:{}", free_port());
    let h = switch(&addr);
    let prom = Prometheus::start("hayate", &addr);
    let up = r#"up{job="hayate"}"#;
    let rx =
        format!(r#"hayate_port_rx_packets_total{{job="hayate",bridge="br0",port="{SOURCE}"}}"#);
    let tx = r#"hayate_port_tx_packets_total{job="hayate",bridge="br0",port="null:sink"}"#;
    // Bounded: Prometheus starts, scrapes every second; a minute is far more than it needs.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut u, mut r, mut t) = (None, None, None);
    while Instant::now() < deadline {
        (u, r, t) = (prom.query(up), prom.query(&rx), prom.query(tx));
        if u == Some(1.0) && r.is_some_and(|v| v > 0.0) && t.is_some_and(|v| v > 0.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        u,
        Some(1.0),
        "{up} never 1\nprometheus log:\n{}\nswitch log:\n{}",
        prom.log(),
        h.log()
    );
    assert!(r.is_some_and(|v| v > 0.0), "{rx} = {r:?}");
    assert!(t.is_some_and(|v| v > 0.0), "{tx} = {t:?}");
}
