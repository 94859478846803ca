//! Administration of a running gateway (`isthmus admin`, as the root user): users added,
//! listed, disabled and enabled, their secrets rotated, their Unix identities mapped, removed;
//! buckets listed with owner, pool and usage; a one-page status. Changes are written to the
//! data root (`users_file`) and applied to the live directory, grants and identities at once;
//! other gateways on the same root pick them up from the file (`reload_if_changed`).
//! `route` answers the HTTP form of these calls.

pub mod route;
pub mod users_file;

use std::sync::{Arc, Mutex};

use isthmus_store::BucketSettings;
use isthmus_store::{RequestContext, Store};
use serde::Deserialize;
use serde_json::{Value, json};

use isthmus_session::users::{DirectoryEntry, User, UserDirectory, UserSource};
use isthmus_session::{Identities, IdentitySpec};
use users_file::{FileVersion, UsersFile};

/// Why an administration call was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error("no user {0:?} (give an access key or a display name; `isthmus admin users list` shows them)")]
    NoSuchUser(String),
    #[error("{0}")]
    Exists(String),
    /// The user is the root user or comes from the configuration file.
    #[error("{0}")]
    NotManaged(String),
    #[error("{0}")]
    Failed(String),
}

impl AdminError {
    /// The S3-style error code and HTTP status the client sees.
    pub fn code_and_status(&self) -> (&'static str, u16) {
        match self {
            Self::Invalid(_) => ("InvalidArgument", 400),
            Self::NoSuchUser(_) => ("NoSuchEntity", 404),
            Self::Exists(_) => ("EntityAlreadyExists", 409),
            Self::NotManaged(_) => ("InvalidRequest", 400),
            Self::Failed(_) => ("InternalError", 500),
        }
    }
}

/// A user to add: only the display name is required; keys are generated unless given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    pub display_name: String,
    #[serde(default)]
    pub access_key: Option<String>,
    #[serde(default)]
    pub buckets: Vec<String>,
    #[serde(flatten)]
    pub identity: IdentitySpec,
}

/// Figures of the gateway process the administration cannot see itself (root, listeners,
/// pools), added to the status page.
pub type StatusExtras = Arc<dyn Fn() -> Value + Send + Sync>;

pub struct Administration {
    users: UserDirectory,
    identities: Arc<Identities>,
    /// The gateway's state directory, where the users file is kept.
    state: isthmus_store::state_dir::StateDir,
    /// The file version last applied.
    applied: Mutex<FileVersion>,
    /// The engine, unauthorized: listings of buckets and usage for the root user's calls.
    store: Arc<dyn Store>,
    extras: StatusExtras,
}

fn failed(err: String) -> AdminError {
    AdminError::Failed(err)
}

/// The characters an access key given by the administrator may use (those S3 SDKs accept in
/// a credential scope without escaping).
fn check_access_key(key: &str) -> Result<(), AdminError> {
    let ok = (3..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AdminError::Invalid(format!("access key {key:?}: use 3 to 128 letters, digits, '.', '_' or '-'")))
    }
}

impl Administration {
    /// Administration of `users` and `identities`, kept in the state directory `state` (see
    /// `users_file`); the file's users are applied now.
    pub fn open(
        users: UserDirectory,
        identities: Arc<Identities>,
        state: isthmus_store::state_dir::StateDir,
        store: Arc<dyn Store>,
        extras: StatusExtras,
    ) -> Result<Arc<Self>, String> {
        let admin =
            Arc::new(Self { users, identities, state, applied: Mutex::new(FileVersion::default()), store, extras });
        let content = users_file::load(&admin.state)?;
        admin.apply(&content, users_file::version_of(&admin.state));
        Ok(admin)
    }

    pub fn users(&self) -> &UserDirectory {
        &self.users
    }

    /// Applies the file again if it changed since it was last applied (another gateway on the
    /// root, or an editor); returns whether it did.
    pub fn reload_if_changed(&self) -> Result<bool, String> {
        let version = users_file::version_of(&self.state);
        if version == *self.applied.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(false);
        }
        let content = users_file::load(&self.state)?;
        self.apply(&content, version);
        Ok(true)
    }

    /// Makes `content` the managed users and disabled set of the directory and the identities.
    fn apply(&self, content: &UsersFile, version: FileVersion) {
        let before = self.managed_keys();
        for key in self.users.apply_managed(&content.users, &content.disabled) {
            tracing::warn!(access_key = %key, file = %self.state.path().join(users_file::USERS_FILE).display(), "a managed user has the access key of a configured user: skipped");
        }
        for key in before.iter().filter(|key| !content.users.iter().any(|u| &u.access_key == *key)) {
            let _ = self.identities.set_mapping(key, key, None);
        }
        let managed = self.managed_keys();
        for user in content.users.iter().filter(|u| managed.contains(&u.access_key)) {
            let spec = user.identity.is_set().then(|| user.identity.clone());
            if let Err(err) = self.identities.set_mapping(&user.access_key, &user.label(), spec) {
                tracing::warn!(error = %err, "a managed user's Unix identity does not resolve: its requests are refused");
            }
        }
        *self.applied.lock().unwrap_or_else(|e| e.into_inner()) = version;
    }

    /// The access keys of the managed users now in the directory.
    fn managed_keys(&self) -> std::collections::HashSet<String> {
        self.users
            .entries()
            .into_iter()
            .filter(|e| e.source == UserSource::Managed)
            .map(|e| e.user.access_key)
            .collect()
    }

    /// Runs `change` on the file's content under its lock, then saves and applies the result.
    fn change<T>(&self, change: impl FnOnce(&mut UsersFile) -> Result<T, AdminError>) -> Result<T, AdminError> {
        let lock = users_file::lock(&self.state).map_err(failed)?;
        let mut content = users_file::load(&self.state).map_err(failed)?;
        // What another gateway wrote is the base of this change.
        self.apply(&content, users_file::version_of(&self.state));
        let answer = change(&mut content)?;
        users_file::save(&self.state, &content, &lock).map_err(failed)?;
        self.apply(&content, users_file::version_of(&self.state));
        Ok(answer)
    }

    fn entry(&self, name: &str) -> Result<DirectoryEntry, AdminError> {
        let key = self.users.find(name).ok_or_else(|| AdminError::NoSuchUser(name.to_string()))?;
        let entries = self.users.entries();
        entries.into_iter().find(|e| e.user.access_key == key).ok_or_else(|| AdminError::NoSuchUser(name.to_string()))
    }

    /// The managed user `name` names, or why it cannot be changed here.
    fn managed(&self, name: &str, what: &str) -> Result<String, AdminError> {
        let entry = self.entry(name)?;
        match entry.source {
            UserSource::Managed => Ok(entry.user.access_key),
            UserSource::Root => Err(AdminError::NotManaged(format!(
                "cannot {what} the root user here: its keys are in the data root's .isthmus/credentials.toml (or the configuration); change them there and restart"
            ))),
            UserSource::Config => Err(AdminError::NotManaged(format!(
                "cannot {what} user {:?}: it is defined in the configuration file; change its [[users]] entry there (disable and enable work on it)",
                entry.user.label()
            ))),
        }
    }

    /// An identity a user is given must resolve now; with `identity = "posix"` every user
    /// needs one.
    fn check_identity(&self, label: &str, spec: &IdentitySpec) -> Result<(), AdminError> {
        if !spec.is_set() {
            return if self.identities.is_posix() {
                Err(AdminError::Invalid(format!(
                    "this gateway runs with identity = \"posix\": user {label:?} needs a Unix identity (unix_user, or uid and gid)"
                )))
            } else {
                Ok(())
            };
        }
        self.identities.check_spec(label, spec).map_err(AdminError::Invalid)
    }

    pub fn add_user(&self, new: NewUser) -> Result<Value, AdminError> {
        let name = new.display_name.trim().to_string();
        if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control()) {
            return Err(AdminError::Invalid("a user needs a display name of 1 to 64 printable characters".into()));
        }
        let mut user = User::generate(&name);
        if let Some(key) = new.access_key {
            check_access_key(&key)?;
            user.access_key = key;
        }
        user.buckets = new.buckets;
        user.identity = new.identity;
        self.check_identity(&name, &user.identity)?;
        let created = user.clone();
        self.change(move |content| {
            let entries = self.users.entries();
            if entries.iter().any(|e| e.user.access_key == user.access_key) {
                return Err(AdminError::Exists(format!("access key {:?} is taken", user.access_key)));
            }
            if entries.iter().any(|e| e.user.display_name == user.display_name) {
                return Err(AdminError::Exists(format!("a user is already named {name:?}")));
            }
            content.users.push(user);
            Ok(())
        })?;
        Ok(json!({
            "access_key": created.access_key,
            "secret_key": created.secret_key,
            "display_name": created.display_name,
        }))
    }

    pub fn set_disabled(&self, name: &str, disabled: bool) -> Result<Value, AdminError> {
        let entry = self.entry(name)?;
        if entry.source == UserSource::Root {
            return Err(AdminError::NotManaged("the root user cannot be disabled".into()));
        }
        let key = entry.user.access_key;
        self.change(|content| {
            content.disabled.retain(|k| k != &key);
            if disabled {
                content.disabled.push(key.clone());
            }
            Ok(())
        })?;
        Ok(json!({ "access_key": key, "disabled": disabled }))
    }

    /// A new secret for the same access key: the access key is the user's id (bucket owner
    /// records name it), so it stays.
    pub fn rotate(&self, name: &str) -> Result<Value, AdminError> {
        let key = self.managed(name, "rotate the keys of")?;
        let secret = User::generate("").secret_key;
        self.change(|content| {
            let user =
                content.users.iter_mut().find(|u| u.access_key == key).ok_or(AdminError::NoSuchUser(key.clone()))?;
            user.secret_key = secret.clone();
            Ok(())
        })?;
        Ok(json!({ "access_key": key, "secret_key": secret }))
    }

    pub fn map(&self, name: &str, spec: IdentitySpec) -> Result<Value, AdminError> {
        let key = self.managed(name, "map")?;
        self.check_identity(name, &spec)?;
        self.change(|content| {
            let user =
                content.users.iter_mut().find(|u| u.access_key == key).ok_or(AdminError::NoSuchUser(key.clone()))?;
            user.identity = spec;
            Ok(())
        })?;
        let entry = self.entry(&key)?;
        Ok(user_json(&entry, &self.identities))
    }

    /// Removes a managed user; the buckets it owns stay (the root user can still use them).
    pub fn remove(&self, name: &str) -> Result<Value, AdminError> {
        let key = self.managed(name, "remove")?;
        self.change(|content| {
            content.users.retain(|u| u.access_key != key);
            content.disabled.retain(|k| k != &key);
            Ok(())
        })?;
        Ok(json!({ "access_key": key, "removed": true }))
    }

    pub fn list_users(&self) -> Value {
        Value::Array(self.users.entries().iter().map(|e| user_json(e, &self.identities)).collect())
    }

    /// Every bucket with its owner, pool, creation time and (with `usage`) objects and bytes,
    /// counted from its listing now. Blocking: listings.
    pub fn list_buckets(&self, usage: bool) -> Result<Value, AdminError> {
        let cx = RequestContext::process();
        let store = &*self.store;
        let mut rows = Vec::new();
        for bucket in store.list_buckets(&cx).map_err(|e| failed(e.to_string()))? {
            let owner =
                store.bucket_owner(&cx, &bucket.name).ok().flatten().unwrap_or_else(|| self.users.root().into());
            let pool =
                store.bucket_facts(&cx, &bucket.name).ok().and_then(|f| f.pool).unwrap_or_else(|| "default".into());
            let created = bucket.created.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let mut row = json!({ "name": bucket.name, "owner": owner, "pool": pool, "created": created });
            if usage {
                let used = isthmus_access::quota::count(store, &bucket.name)
                    .map_err(|e| failed(format!("bucket {}: {e}", bucket.name)))?;
                row["objects"] = json!(used.objects);
                row["bytes"] = json!(used.bytes);
            }
            rows.push(row);
        }
        Ok(Value::Array(rows))
    }

    /// The one-page status. Blocking: lists buckets.
    pub fn status(&self) -> Result<Value, AdminError> {
        let entries = self.users.entries();
        let buckets = self.store.list_buckets(&RequestContext::process()).map_err(|e| failed(e.to_string()))?;
        let mut status = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "identity": if self.identities.is_posix() { "posix" } else { "gateway" },
            "users": {
                "total": entries.len(),
                "disabled": entries.iter().filter(|e| e.disabled).count(),
                "managed": entries.iter().filter(|e| e.source == UserSource::Managed).count(),
            },
            "buckets": buckets.len(),
            "traffic": crate::metrics::METRICS.summary(),
        });
        if let (Value::Object(out), Value::Object(extra)) = (&mut status, (self.extras)()) {
            out.extend(extra);
        }
        Ok(status)
    }
}

/// A user as administration lists it (never its secret).
fn user_json(entry: &DirectoryEntry, identities: &Identities) -> Value {
    let user = &entry.user;
    let mut row = json!({
        "access_key": user.access_key,
        "display_name": user.display_name,
        "source": entry.source,
        "disabled": entry.disabled,
        "buckets": user.buckets,
    });
    if user.identity.is_set() {
        row["unix"] = serde_json::to_value(&user.identity).unwrap_or(Value::Null);
    }
    row["unix_resolved"] = json!(identities.is_mapped(&user.access_key));
    row
}
