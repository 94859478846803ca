//! Which Unix identity each S3 user's requests run as (`identity = "posix"`): the mapping from
//! the configuration (`unix_user`, or `uid`/`gid`/`groups`, and a `umask`), resolved through NSS
//! at start and again on SIGHUP and periodically (so group changes and LDAP/SSSD updates apply
//! without a restart), the refusal of uid 0 unless `allow_root`, and the lookup each request
//! makes. With `identity = "gateway"` nothing is mapped and requests run as the gateway.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use isthmus_store::identity::{UnixIdentity, init_request_thread};
use isthmus_store::{Principal, RequestContext};
use serde::{Deserialize, Serialize};

use crate::Refusal;

/// How a user maps to a Unix identity in the configuration file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct IdentitySpec {
    /// A Unix user name: uid, primary gid and supplementary groups come from NSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_user: Option<String>,
    /// An explicit uid (with `gid`), for identities NSS does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// Supplementary groups: with `uid`, the whole list (the gid is always included); with
    /// `unix_user`, added to those NSS reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<u32>,
    /// The umask of files and directories the user's requests create (e.g. `0o027`);
    /// default 0o022.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// The umask of users who name none, as a login shell's usual default.
pub const DEFAULT_UMASK: u32 = 0o022;

impl IdentitySpec {
    /// Whether the configuration maps this user at all.
    pub fn is_set(&self) -> bool {
        self.unix_user.is_some() || self.uid.is_some()
    }

    /// The identity this spec names now, or why it names none.
    pub fn resolve(&self) -> Result<UnixIdentity, String> {
        let mut identity = match (&self.unix_user, self.uid) {
            (Some(_), Some(_)) => return Err("set unix_user or uid, not both".into()),
            (Some(name), None) => UnixIdentity::of_user(name).map_err(|e| e.to_string())?,
            (None, Some(uid)) => {
                let gid = self.gid.ok_or("uid needs a gid too")?;
                UnixIdentity { uid, gid, groups: vec![gid], umask: None }
            }
            (None, None) => return Err("no Unix identity: set unix_user = \"NAME\", or uid and gid".into()),
        };
        if self.unix_user.is_some() && self.gid.is_some() {
            return Err("gid comes from NSS with unix_user; set uid and gid instead".into());
        }
        for &group in &self.groups {
            if !identity.groups.contains(&group) {
                identity.groups.push(group);
            }
        }
        let umask = self.umask.unwrap_or(DEFAULT_UMASK);
        if umask > 0o777 {
            return Err(format!("umask {umask:#o} is not a umask (0o000 to 0o777)"));
        }
        identity.umask = Some(umask);
        Ok(identity)
    }
}

/// One configured user's mapping.
struct Mapping {
    /// How the user is named in messages (its display name, else its access key).
    label: String,
    spec: IdentitySpec,
}

/// The identities requests run as.
pub struct Identities {
    /// False: `identity = "gateway"`, every request runs as the gateway.
    posix: bool,
    allow_root: bool,
    /// By access key, in configuration order (users added by administration after them).
    mappings: RwLock<Vec<(String, Mapping)>>,
    /// By access key: the identities as last resolved. A user whose identity no longer
    /// resolves (gone from NSS, or now uid 0 without `allow_root`) is missing: refused.
    resolved: RwLock<HashMap<String, Arc<UnixIdentity>>>,
    /// Uid to access key, for local socket peers: the first user in configuration order.
    by_uid: RwLock<HashMap<u32, String>>,
    /// Counts the times identities were installed (see `generation`).
    generation: std::sync::atomic::AtomicU64,
    /// Unsigned requests (allowed by a public ACL or policy) run as `nobody`, if NSS has it.
    anonymous: RwLock<Option<Arc<UnixIdentity>>>,
}

/// The user unsigned requests run as with `identity = "posix"`.
pub const ANONYMOUS_UNIX_USER: &str = "nobody";

impl Identities {
    /// `identity = "gateway"`: nothing is switched, nothing is mapped.
    pub fn gateway() -> Self {
        Self {
            posix: false,
            allow_root: false,
            mappings: RwLock::new(Vec::new()),
            resolved: RwLock::new(HashMap::new()),
            by_uid: RwLock::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            anonymous: RwLock::new(None),
        }
    }

    /// The users' identities, given as (access key, label, spec) in configuration order:
    /// each must resolve now to an identity that is not uid 0 (unless `allow_root`); the
    /// first that does not is the error, naming the user and the fix. With `posix`, requests
    /// run with them (the process must be able to switch: checked here); without, they only
    /// tell who a local socket's peer is.
    pub fn new(posix: bool, users: Vec<(String, String, IdentitySpec)>, allow_root: bool) -> Result<Self, String> {
        let mappings: Vec<(String, Mapping)> =
            users.into_iter().map(|(key, label, spec)| (key, Mapping { label, spec })).collect();
        let identities = Self { posix, allow_root, ..Self::gateway() };
        let mut resolved = HashMap::new();
        for (key, mapping) in &mappings {
            let identity = identities.resolve_one(mapping).map_err(|e| format!("user {:?}: {e}", mapping.label))?;
            resolved.insert(key.clone(), Arc::new(identity));
        }
        if posix && let Some(any) = resolved.values().next() {
            check_switching(any)?;
        }
        identities.install(&mappings, resolved);
        *identities.mappings.write().expect("not poisoned") = mappings;
        if posix {
            *identities.anonymous.write().expect("not poisoned") = resolve_anonymous();
        }
        Ok(identities)
    }

    /// The user a local socket's peer with `uid` is (the first in configuration order whose
    /// identity has that uid), and the identity its calls run as (with `posix`).
    pub fn by_uid(&self, uid: u32) -> Option<(String, Option<Arc<UnixIdentity>>)> {
        let key = self.by_uid.read().expect("not poisoned").get(&uid)?.clone();
        let identity = self.resolved.read().expect("not poisoned").get(&key)?.clone();
        Some((key, self.posix.then_some(identity)))
    }

    /// Adds, changes or (with `None`) removes one user's mapping, in effect at once; a spec
    /// that does not resolve (or names uid 0 without `allow_root`) changes nothing and is the
    /// error.
    pub fn set_mapping(&self, key: &str, label: &str, spec: Option<IdentitySpec>) -> Result<(), String> {
        let mut mappings = self.mappings.write().expect("not poisoned");
        let mut resolved = self.resolved.read().expect("not poisoned").clone();
        mappings.retain(|(k, _)| k != key);
        resolved.remove(key);
        if let Some(spec) = spec {
            let mapping = Mapping { label: label.to_string(), spec };
            let identity = self.resolve_one(&mapping).map_err(|e| format!("user {label:?}: {e}"))?;
            resolved.insert(key.to_string(), Arc::new(identity));
            mappings.push((key.to_string(), mapping));
        }
        self.install(&mappings, resolved);
        Ok(())
    }

    /// Whether `spec` resolves now to an identity this gateway accepts (the error names `label`).
    pub fn check_spec(&self, label: &str, spec: &IdentitySpec) -> Result<(), String> {
        let mapping = Mapping { label: label.to_string(), spec: spec.clone() };
        self.resolve_one(&mapping).map(drop).map_err(|e| format!("user {label:?}: {e}"))
    }

    /// Whether `key` has a mapping now.
    pub fn is_mapped(&self, key: &str) -> bool {
        self.resolved.read().expect("not poisoned").contains_key(key)
    }

    /// Makes `resolved` the identities in effect, with its uid index.
    fn install(&self, mappings: &[(String, Mapping)], resolved: HashMap<String, Arc<UnixIdentity>>) {
        let mut by_uid = HashMap::new();
        for (key, _) in mappings {
            if let Some(identity) = resolved.get(key) {
                by_uid.entry(identity.uid).or_insert_with(|| key.clone());
            }
        }
        *self.resolved.write().expect("not poisoned") = resolved;
        *self.by_uid.write().expect("not poisoned") = by_uid;
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Changes each time the identities are resolved again.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    fn resolve_one(&self, mapping: &Mapping) -> Result<UnixIdentity, String> {
        let identity = mapping.spec.resolve()?;
        if identity.is_root() && !self.allow_root {
            return Err(
                "maps to uid 0 (root), which could read and change every file: map it to another user, or set allow_root = true if that is really meant".into(),
            );
        }
        Ok(identity)
    }

    pub fn is_posix(&self) -> bool {
        self.posix
    }

    /// Resolves every mapping again (on SIGHUP and periodically): group memberships and
    /// NSS changes apply from now on. A user that no longer resolves is refused until it does
    /// again. Returns how many users changed.
    pub fn refresh(&self) -> usize {
        let mappings = self.mappings.read().expect("not poisoned");
        if mappings.is_empty() {
            return 0;
        }
        let mut next = HashMap::new();
        let previous = self.resolved.read().expect("not poisoned").clone();
        for (key, mapping) in mappings.iter() {
            match self.resolve_one(mapping) {
                // Unchanged identities stay the same value (a local connection keeps its switch).
                Ok(identity) => {
                    let same = previous.get(key).filter(|old| ***old == identity).cloned();
                    next.insert(key.clone(), same.unwrap_or_else(|| Arc::new(identity)));
                }
                Err(err) => {
                    tracing::warn!(user = %mapping.label, error = %err, "a user's Unix identity no longer resolves: its requests are refused");
                }
            }
        }
        let changed =
            mappings.iter().filter(|(key, _)| previous.get(key).map(|a| &**a) != next.get(key).map(|a| &**a)).count();
        self.install(&mappings, next);
        if self.posix {
            *self.anonymous.write().expect("not poisoned") = resolve_anonymous();
        }
        changed
    }

    /// The identity the request `cx` runs as: `None` with `identity = "gateway"` and for the
    /// process itself; refused for a user whose identity does not resolve (logged).
    pub fn of(&self, cx: &RequestContext) -> Result<Option<Arc<UnixIdentity>>, Refusal> {
        if !self.posix {
            return Ok(None);
        }
        let found = match &cx.principal {
            Principal::Process => return Ok(None),
            Principal::User { name, .. } => self.resolved.read().expect("not poisoned").get(name).cloned(),
            Principal::Anonymous => self.anonymous.read().expect("not poisoned").clone(),
        };
        match found {
            Some(identity) => Ok(Some(identity)),
            None => {
                tracing::warn!(principal = ?cx.principal, "refused: no Unix identity to run the request as");
                Err(Refusal::NoUnixIdentity)
            }
        }
    }
}

fn resolve_anonymous() -> Option<Arc<UnixIdentity>> {
    let mut identity = UnixIdentity::of_user(ANONYMOUS_UNIX_USER).ok().filter(|i| !i.is_root())?;
    identity.umask = Some(DEFAULT_UMASK);
    Some(Arc::new(identity))
}

/// Whether this process can run file-system calls as `identity` (it needs CAP_SETUID and
/// CAP_SETGID, and threads that can hold their own umask): tried once on a scratch thread.
fn check_switching(identity: &UnixIdentity) -> Result<(), String> {
    let identity = identity.clone();
    std::thread::spawn(move || {
        init_request_thread().map_err(|e| format!("cannot give a thread its own umask (unshare CLONE_FS): {e}"))?;
        identity
            .assume()
            .map(drop)
            .map_err(|e| format!("identity = \"posix\" cannot be used: {e}; or use identity = \"gateway\""))
    })
    .join()
    .map_err(|_| "the identity check failed".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> IdentitySpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn specs_resolve_or_say_what_is_wrong() {
        let root = spec("unix_user = \"root\"\numask = 0o027").resolve().unwrap();
        assert_eq!((root.uid, root.gid, root.umask), (0, 0, Some(0o027)));
        let explicit = spec("uid = 5000\ngid = 6000\ngroups = [7000]").resolve().unwrap();
        assert_eq!(
            (explicit.uid, explicit.gid, explicit.groups, explicit.umask),
            (5000, 6000, vec![6000, 7000], Some(0o022))
        );
        assert!(spec("uid = 5000").resolve().unwrap_err().contains("gid"));
        assert!(spec("").resolve().unwrap_err().contains("unix_user"));
        assert!(spec("unix_user = \"root\"\nuid = 1").resolve().unwrap_err().contains("not both"));
        assert!(spec("uid = 1\ngid = 1\numask = 0o1777").resolve().unwrap_err().contains("umask"));
        let unknown = spec("unix_user = \"no-such-user-isthmus\"").resolve().unwrap_err();
        assert!(unknown.contains("no-such-user-isthmus"), "{unknown}");
    }

    #[test]
    fn root_is_refused_unless_allowed_and_unknown_users_are_named() {
        let users = |spec_text: &str| vec![("AK1".to_string(), "alice".to_string(), spec(spec_text))];
        let err = Identities::new(true, users("uid = 0\ngid = 0"), false).err().unwrap();
        assert!(err.contains("alice") && err.contains("allow_root"), "{err}");
        let err = Identities::new(true, users("unix_user = \"no-such-user-isthmus\""), false).err().unwrap();
        assert!(err.contains("alice") && err.contains("no-such-user-isthmus"), "{err}");
        if rustix::process::geteuid().is_root() {
            let ids = Identities::new(true, users("uid = 0\ngid = 0"), true).unwrap();
            let found = ids.of(&RequestContext::user("AK1", false)).unwrap().unwrap();
            assert_eq!(found.uid, 0);
            assert!(ids.of(&RequestContext::user("stranger", false)).is_err());
            assert!(ids.of(&RequestContext::process()).unwrap().is_none());
        }
        assert!(Identities::gateway().of(&RequestContext::user("AK1", false)).unwrap().is_none());
    }
}
