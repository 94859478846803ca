//! The key that seals what only the gateway may vouch for (object ACLs kept in records the
//! object's writer can also write): HMAC-SHA256 with a secret kept in the state directory.

use std::fmt;
use std::sync::Arc;

use crate::state_dir::{StateDir, StateError, StateResult};

/// The key that seals records only the gateway may vouch for (object ACLs kept where the
/// object's writer can also write): HMAC-SHA256 with a 32-byte secret kept in the state
/// directory (`record.key`, mode 0600). Whoever cannot read the key cannot make a seal.
#[derive(Clone)]
pub struct SealKey(Arc<[u8; 32]>);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// Where the seal key lives in the state directory.
pub const SEAL_KEY_FILE: &str = "record.key";

impl SealKey {
    /// The state directory's key, made now if it has none. `None` when this process may not
    /// read it (an in-process door running as a user other than the gateway's): such a process
    /// writes no seals, so nothing it records is believed by the gateway.
    pub fn load_or_create(state: &StateDir) -> StateResult<Option<SealKey>> {
        match state.load_or_create_key(SEAL_KEY_FILE) {
            Ok(key) => Ok(Some(SealKey(Arc::new(key)))),
            Err(StateError::Io { source, .. }) if source.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// A key for tests and tools that need no persistence.
    pub fn ephemeral() -> SealKey {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the system has a random source");
        SealKey(Arc::new(key))
    }

    /// The seal of `parts` for `purpose` (16 bytes of HMAC-SHA256, hex).
    pub fn seal(&self, purpose: &str, parts: &[impl AsRef<[u8]>]) -> String {
        use hmac::{KeyInit, Mac};
        let mut mac = <hmac::Hmac<sha2::Sha256>>::new_from_slice(&self.0[..]).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        for part in parts {
            let part = part.as_ref();
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    /// Whether `seal` is the seal of `parts` for `purpose` (compared in constant time).
    pub fn verify(&self, purpose: &str, parts: &[impl AsRef<[u8]>], seal: &str) -> bool {
        let expected = self.seal(purpose, parts);
        expected.len() == seal.len() && expected.bytes().zip(seal.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_dir::StateTrust;
    use std::os::unix::fs::PermissionsExt;

    fn root() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = StateDir::open_path(dir.path(), StateTrust::Gateway).unwrap();
        (dir, state)
    }

    #[test]
    fn seals_verify_only_what_was_sealed() {
        let key = SealKey::ephemeral();
        let parts: [&[u8]; 2] = [b"1234", b"public-read"];
        let seal = key.seal("acl", &parts);
        assert!(key.verify("acl", &parts, &seal));
        assert!(!key.verify("acl", &[b"1235".as_slice(), b"public-read"], &seal));
        assert!(!key.verify("acl", &[b"123".as_slice(), b"4public-read"], &seal), "parts are framed");
        assert!(!SealKey::ephemeral().verify("acl", &parts, &seal));
    }

    #[test]
    fn the_seal_key_persists() {
        let (_dir, state) = root();
        let first = SealKey::load_or_create(&state).unwrap().unwrap();
        let again = SealKey::load_or_create(&state).unwrap().unwrap();
        assert_eq!(first.seal("x", &[b"y"]), again.seal("x", &[b"y"]));
    }
}
