//! Mutual TLS over loopback with throwaway certificates made by rcgen.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;
use crate::{Agent, AgentConfig, Target, TlsConfig, TlsFiles};

/// A temporary directory of PEM files, removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

fn ca(name: &str) -> (Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).unwrap(), key)
}

impl Pki {
    fn new() -> Pki {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hy-pki-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        let (good, good_key) = ca("Hayate test CA");
        let (rogue, rogue_key) = ca("Rogue CA");
        std::fs::write(pki.path("ca.pem"), good.pem()).unwrap();
        std::fs::write(pki.path("rogue-ca.pem"), rogue.pem()).unwrap();
        for (name, issuer, issuer_key) in [
            ("switch", &good, &good_key),
            ("ctl", &good, &good_key),
            ("rogue", &rogue, &rogue_key),
        ] {
            let key = KeyPair::generate().unwrap();
            let mut p =
                CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
            p.distinguished_name.push(DnType::CommonName, name);
            p.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            let cert = p.signed_by(&key, issuer, issuer_key).unwrap();
            std::fs::write(pki.path(&format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(pki.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
        }
        pki
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The TLS set-up of `who`, trusting the CA in `ca`.
    fn config(&self, who: &str, ca: &str) -> TlsConfig {
        TlsConfig::load(&TlsFiles {
            ca_cert: self.path(ca),
            cert: self.path(&format!("{who}.pem")),
            key: self.path(&format!("{who}.key")),
        })
        .unwrap()
    }
}

fn agent_config(target: &str, tls: TlsConfig) -> AgentConfig {
    AgentConfig {
        targets: vec![Target::parse(target).unwrap()],
        tls: Some(tls),
        ..AgentConfig::default()
    }
}

#[tokio::test]
async fn passive_tls_accepts_the_ca_and_refuses_a_stranger() {
    let pki = Pki::new();
    let b = bridge();
    let agent = Agent::start(
        agent_config("pssl:0:127.0.0.1", pki.config("switch", "ca.pem")),
        b.clone(),
    )
    .await
    .unwrap();
    let Target::Passive { port, .. } = agent.listening()[0] else {
        panic!("not passive")
    };

    // A controller with a certificate from the same CA.
    let ctl = TlsConnector::from(pki.config("ctl", "ca.pem").client);
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = ctl
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let mut c = FakeController::handshake(tls).await;
    c.send(&message(FEATURES_REQUEST, 2, &[])).await;
    c.expect(FEATURES_REPLY).await;
    assert_eq!(agent.connections().len(), 1);
    let connects = b.connects.lock().unwrap().len();

    // A controller whose certificate the switch's CA did not sign: no session. With TLS 1.3
    // the client may finish its side before the switch's alert arrives, so the refusal shows
    // either in the handshake or as the connection closing before any HELLO.
    let rogue = TlsConnector::from(pki.config("rogue", "ca.pem").client);
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    if let Ok(tls) = rogue.connect("localhost".try_into().unwrap(), tcp).await {
        let mut r = FakeController::new(tls);
        let got = tokio::time::timeout(WAIT, r.recv())
            .await
            .expect("no verdict from the switch");
        assert_eq!(got, None, "a stranger got a message");
    }
    assert_eq!(agent.connections().len(), 1);
    assert_eq!(
        b.connects.lock().unwrap().len(),
        connects,
        "the stranger never counted"
    );
}

/// Accepts one TLS connection as a controller that requires the switch's certificate.
async fn controller_server(
    l: &TcpListener,
    tls: &TlsConfig,
) -> std::io::Result<FakeController<tokio_rustls::server::TlsStream<TcpStream>>> {
    let (tcp, _) = tokio::time::timeout(WAIT, l.accept())
        .await
        .expect("no connection")
        .unwrap();
    let tls = TlsAcceptor::from(tls.server.clone()).accept(tcp).await?;
    Ok(FakeController::handshake(tls).await)
}

/// A switch's agent with the target `ssl:` to a listener of its own, the controller's side.
async fn active_tls_agent(pki: &Pki) -> (TcpListener, Agent) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let target = format!("ssl:127.0.0.1:{port}");
    let agent = Agent::start(
        agent_config(&target, pki.config("switch", "ca.pem")),
        bridge(),
    )
    .await
    .unwrap();
    (l, agent)
}

#[tokio::test]
async fn active_tls_connects_with_mutual_authentication() {
    let pki = Pki::new();
    let (l, agent) = active_tls_agent(&pki).await;
    let mut c = controller_server(&l, &pki.config("ctl", "ca.pem"))
        .await
        .unwrap();
    c.send(&message(mt::ECHO_REQUEST, 5, b"tls")).await;
    assert_eq!(
        c.expect(mt::ECHO_REPLY).await,
        message(mt::ECHO_REPLY, 5, b"tls")
    );
    assert_eq!(agent.connections().len(), 1);
}

#[tokio::test]
async fn active_tls_refuses_a_controller_from_another_ca() {
    let pki = Pki::new();
    let (l, agent) = active_tls_agent(&pki).await;
    // The rogue controller trusts the switch's CA, but its own certificate is the rogue CA's.
    let refused = controller_server(&l, &pki.config("rogue", "ca.pem")).await;
    assert!(
        refused.is_err(),
        "the switch must not accept the rogue controller's certificate"
    );
    assert!(agent.connections().is_empty());
}
