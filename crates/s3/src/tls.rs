//! TLS for the gateway's listeners (rustls, TLS 1.2 and 1.3): a PEM certificate chain and
//! key, loaded at start and loaded again without a restart when either file changes (checked
//! every two seconds) or on SIGHUP. A reload that fails (a half-written file, a key that does
//! not match) keeps the certificate in use and says why in the log; new connections get the
//! new certificate, open ones keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How often the certificate files are checked for changes.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// The TLS configuration in use, and where it comes from.
pub struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<ServerConfig>>,
    stamp: RwLock<(Option<SystemTime>, Option<SystemTime>)>,
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// A server configuration from PEM files, or a message naming the file and the fix.
pub fn load(cert: &Path, key: &Path) -> Result<ServerConfig, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("TLS certificate {}: no PEM certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("TLS key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate and key do not go together: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl TlsFiles {
    /// Loads the certificate chain and key (errors name the file).
    pub fn open(cert: &Path, key: &Path) -> Result<Arc<Self>, String> {
        let config = load(cert, key)?;
        Ok(Arc::new(Self {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: RwLock::new(Arc::new(config)),
            stamp: RwLock::new((modified(cert), modified(key))),
        }))
    }

    /// The configuration new connections get.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Loads the files again; on failure the configuration in use stays.
    pub fn reload(&self) -> Result<(), String> {
        let stamp = (modified(&self.cert), modified(&self.key));
        let config = load(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        *self.stamp.write().unwrap_or_else(|e| e.into_inner()) = stamp;
        Ok(())
    }

    fn changed(&self) -> bool {
        let now = (modified(&self.cert), modified(&self.key));
        *self.stamp.read().unwrap_or_else(|e| e.into_inner()) != now
    }

    /// Reloads when the files change or on SIGHUP, for as long as the gateway runs. The files
    /// are looked at and read on a thread of the gateway's own identity (`watch_files`), never
    /// on an async worker, which may rest in a user's identity; this task only forwards
    /// SIGHUP to it.
    pub async fn watch(self: Arc<Self>) {
        let (wake, woken) = std::sync::mpsc::sync_channel::<()>(1);
        let files = self.clone();
        if let Err(err) = isthmus_store::identity::spawn_gateway_thread("tls-reload", move || files.watch_files(&woken))
        {
            tracing::warn!(error = %err, "cannot start the TLS reload thread: the certificate is not reloaded");
            return;
        }
        let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        while hangup.recv().await.is_some() {
            // A reload already asked for covers this signal too.
            let _ = wake.try_send(());
        }
    }

    /// The reload thread: every `CHECK_EVERY`, or when woken (SIGHUP), reloads if the files
    /// changed (always when woken).
    fn watch_files(&self, woken: &std::sync::mpsc::Receiver<()>) {
        loop {
            let signalled = match woken.recv_timeout(CHECK_EVERY) {
                Ok(()) => true,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            };
            if !signalled && !self.changed() {
                continue;
            }
            match self.reload() {
                Ok(()) => tracing::info!(cert = %self.cert.display(), "TLS certificate loaded again"),
                Err(err) => {
                    // Not retried until the files change again (or SIGHUP): a half-written
                    // file gets its final write soon.
                    *self.stamp.write().unwrap_or_else(|e| e.into_inner()) =
                        (modified(&self.cert), modified(&self.key));
                    tracing::warn!(error = %err, "TLS reload failed; the certificate in use stays");
                }
            }
        }
    }
}
