//! The node's libp2p identity, kept in a file.

use std::fs;
use std::io::Write;
use std::path::Path;

use libp2p::identity::Keypair;

use super::NetError;

/// Loads the ed25519 libp2p keypair at `path` (libp2p's protobuf key encoding), or,
/// if the file does not exist, generates one and writes it there (parent directories
/// created; on Unix the file is created with permissions 0600). The peer id derives
/// from this key, so keep the file to keep the node's identity.
///
/// # Errors
/// [`NetError::Key`] if the file cannot be read, parsed, created or written.
pub fn load_or_create_keypair(path: &Path) -> Result<Keypair, NetError> {
    let key_err = |reason: String| NetError::Key {
        path: path.display().to_string(),
        reason,
    };
    match fs::read(path) {
        Ok(bytes) => {
            warn_if_readable_by_others(path);
            Keypair::from_protobuf_encoding(&bytes)
                .map_err(|e| key_err(format!("not a libp2p protobuf-encoded keypair: {e}")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let keypair = Keypair::generate_ed25519();
            let bytes = keypair
                .to_protobuf_encoding()
                .map_err(|e| key_err(format!("cannot encode the new key: {e}")))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs::create_dir_all(dir)
                    .map_err(|e| key_err(format!("cannot create its directory: {e}")))?;
            }
            let mut file =
                create_private(path).map_err(|e| key_err(format!("cannot create: {e}")))?;
            file.write_all(&bytes)
                .and_then(|()| file.sync_all())
                .map_err(|e| key_err(format!("cannot write: {e}")))?;
            tracing::info!(path = %path.display(), peer_id = %keypair.public().to_peer_id(), "created a new node key");
            Ok(keypair)
        }
        Err(e) => Err(key_err(format!("cannot read: {e}"))),
    }
}

/// Creates a new file readable and writable by its owner only (0600 on Unix); fails
/// if it already exists.
fn create_private(path: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "node key file is accessible by other users; chmod 600 it");
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_: &Path) {}
