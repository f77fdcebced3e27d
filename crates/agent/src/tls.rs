//! TLS for `ssl:` and `pssl:` targets: mutual authentication against one CA.
//!
//! Both directions use the same three PEM files: the CA certificate that signed the
//! controllers' certificates (and the switch's), the switch's certificate chain and its
//! private key. A server (`pssl:`) requires a client certificate signed by the CA; a client
//! (`ssl:`) checks the controller's certificate against the CA and the target's host name or
//! IP address (the certificate must name it in subjectAltName), and presents its own.
//! The crypto provider is *ring*, chosen explicitly so no process-wide default is needed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The PEM files of the switch's TLS identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificate(s) that peers' certificates must chain to.
    pub ca_cert: PathBuf,
    /// The switch's certificate chain, leaf first.
    pub cert: PathBuf,
    /// The switch's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// A TLS set-up that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("TLS file {path}: {problem}; {fix}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: &'static str,
    },
    /// rustls refused the combination.
    #[error("TLS set-up: {0}; check that the certificate matches the key and is signed by a CA rustls accepts")]
    Rustls(#[from] rustls::Error),
    /// The CA certificate cannot verify clients.
    #[error("TLS CA certificate {path}: {problem}; give a valid CA certificate in PEM")]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// Client and server configurations built from one [`TlsFiles`].
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// For `ssl:` targets.
    pub client: Arc<ClientConfig>,
    /// For `pssl:` targets.
    pub server: Arc<ServerConfig>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_err = |problem: String| TlsError::File {
        path: path.to_path_buf(),
        problem,
        fix: what,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(format!("cannot read it ({e})")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(format!("bad PEM ({e})")))?;
    if certs.is_empty() {
        return Err(file_err("no CERTIFICATE block in it".into()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        problem: format!("no usable private key ({e})"),
        fix: "give the PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
    })
}

impl TlsConfig {
    /// Loads the three PEM files and builds both configurations.
    pub fn load(files: &TlsFiles) -> Result<TlsConfig, TlsError> {
        let ca = read_certs(&files.ca_cert, "give the CA certificate in PEM")?;
        let chain = read_certs(&files.cert, "give the switch's certificate chain in PEM")?;
        let key = read_key(&files.key)?;
        let mut roots = RootCertStore::empty();
        for cert in ca {
            roots.add(cert).map_err(|e| TlsError::Verifier {
                path: files.ca_cert.clone(),
                problem: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| TlsError::Verifier {
                path: files.ca_cert.clone(),
                problem: e.to_string(),
            })?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())?;
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        Ok(TlsConfig {
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = std::env::temp_dir().join(format!("hy-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let files = TlsFiles {
            ca_cert: dir.join("absent.pem"),
            cert: empty.clone(),
            key: empty.clone(),
        };
        let e = TlsConfig::load(&files).unwrap_err().to_string();
        assert!(e.contains("absent.pem") && e.contains("cannot read"), "{e}");
        let files = TlsFiles {
            ca_cert: empty.clone(),
            ..files
        };
        let e = TlsConfig::load(&files).unwrap_err().to_string();
        assert!(
            e.contains("empty.pem") && e.contains("no CERTIFICATE"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
