//! Unix identities for file-system calls: a user's uid, primary gid and supplementary groups,
//! resolved through NSS (so LDAP, SSSD and AD users work as local ones), and the per-thread
//! switch that makes the kernel check a request's file-system calls as that user.
//!
//! The switch uses the raw `setfsuid`, `setfsgid` and `setgroups` system calls, which change
//! the calling thread only. (The libc wrappers of `setgroups` and `setuid` change every thread
//! of the process, which a gateway serving many users at once must never do.) Only the
//! file-system ids change, so the thread keeps its privilege to switch back; the guard restores
//! the previous identity when dropped, also while unwinding from a panic.
//!
//! The gateway's own state (the `.isthmus` areas, credentials, locks) is deliberately handled
//! with the gateway's identity even inside a switched request: `as_gateway` switches back for
//! the duration of such a step. A user's umask is per thread too, on threads that detached
//! their file-system context (`init_request_thread`, `unshare(CLONE_FS)`); threads share
//! their umask with the whole process otherwise.

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::rc::Rc;

/// A Unix identity the kernel checks file-system calls against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixIdentity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary gid included, as `getgrouplist` reports it).
    pub groups: Vec<u32>,
    /// The umask files and directories are created with (`None`: the thread's own).
    pub umask: Option<u32>,
}

/// Why an identity cannot be resolved or taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("no Unix user named {0:?} (looked up through NSS: /etc/passwd, LDAP, SSSD...)")]
    UnknownUser(String),
    #[error("cannot look up Unix user {name:?}: {error}")]
    Lookup { name: String, error: String },
    #[error(
        "cannot act as uid {uid}: this process may not switch file-system identities (it needs CAP_SETUID and CAP_SETGID; start the gateway as root or give it those capabilities)"
    )]
    NotPermitted { uid: u32 },
    #[error("a umask can only be applied on a thread with its own file-system context")]
    SharedUmask,
}

impl UnixIdentity {
    /// The identity of the Unix user `name`: uid and primary gid from the password database,
    /// supplementary groups from the group database, both through NSS, as `id NAME` shows.
    pub fn of_user(name: &str) -> Result<Self, IdentityError> {
        let c_name = CString::new(name).map_err(|_| IdentityError::UnknownUser(name.to_string()))?;
        let mut buf = vec![0u8; 4096];
        let (uid, gid) = loop {
            // SAFETY: `passwd` is plain old data that getpwnam_r fills in; `buf` outlives the
            // call and its length is passed; `found` is written by the call.
            let mut passwd: libc::passwd = unsafe { std::mem::zeroed() };
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            // SAFETY: every pointer is valid for the duration of the call (see above).
            let rc = unsafe {
                libc::getpwnam_r(c_name.as_ptr(), &mut passwd, buf.as_mut_ptr().cast(), buf.len(), &mut found)
            };
            match rc {
                0 if found.is_null() => return Err(IdentityError::UnknownUser(name.to_string())),
                0 => break (passwd.pw_uid, passwd.pw_gid),
                libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
                err => {
                    let error = std::io::Error::from_raw_os_error(err).to_string();
                    return Err(IdentityError::Lookup { name: name.to_string(), error });
                }
            }
        };
        let groups = group_list(&c_name, gid);
        Ok(Self { uid, gid, groups, umask: None })
    }

    /// Makes this thread's file-system calls run as this identity until the guard is dropped.
    /// Switching is not nested: a thread already switched is refused (`NotPermitted`).
    pub fn assume(&self) -> Result<IdentityGuard, IdentityError> {
        if SWITCHED.with(|s| s.borrow().is_some()) {
            return Err(IdentityError::NotPermitted { uid: self.uid });
        }
        if self.umask.is_some() && !OWN_FS_CONTEXT.get() {
            return Err(IdentityError::SharedUmask);
        }
        let own = own_identity();
        let target = self.thread_identity();
        match target.apply() {
            Ok(()) => {}
            // Refused before anything changed (a process without the privilege).
            Err(Applied::Nothing) => return Err(IdentityError::NotPermitted { uid: self.uid }),
            Err(Applied::Partly) => {
                drop(IdentityGuard { previous: own });
                return Err(IdentityError::NotPermitted { uid: self.uid });
            }
        }
        SWITCHED.with(|s| *s.borrow_mut() = Some(Switched { gateway: own.clone(), user: target }));
        Ok(IdentityGuard { previous: own })
    }

    /// Whether this identity is the superuser's.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// What a thread running as this identity has.
    fn thread_identity(&self) -> ThreadIdentity {
        ThreadIdentity {
            fsuid: self.uid,
            fsgid: self.gid,
            groups: self.groups.iter().map(|&g| rustix::process::Gid::from_raw(g)).collect(),
            umask: self.umask,
        }
    }
}

/// Runs one call with `identity` (the gateway's own for `None`), whatever thread it is on:
/// - on a thread that rests between calls (an async worker inside the runner's inline call,
///   a local socket's connection thread: `allow_resting`; or one already resting), as
///   `run_resting`: a next call of the same identity switches nothing;
/// - on a thread already switched to this very identity (the runner ran a service's work as
///   the request's user), as it is;
/// - otherwise switched for the call and back (`assume`), or, for the gateway, `as_gateway`.
///
/// A thread switched to another user is refused (`NotPermitted`): no call runs as a user it
/// was not made for.
pub fn run_call<T>(identity: Option<&std::sync::Arc<UnixIdentity>>, f: impl FnOnce() -> T) -> Result<T, IdentityError> {
    if REST_ALLOWED.get() || RESTING.with(|resting| resting.borrow().is_some()) {
        return run_resting(identity, f);
    }
    let Some(identity) = identity else {
        return Ok(as_gateway(f));
    };
    let already = SWITCHED.with(|s| s.borrow().as_ref().map(|s| s.user == identity.thread_identity()));
    match already {
        Some(true) => Ok(f()),
        Some(false) => Err(IdentityError::NotPermitted { uid: identity.uid }),
        None => {
            let _guard = identity.assume()?;
            Ok(f())
        }
    }
}

/// Runs `f` (a loop serving one peer, or the runner's inline call on an async worker) on a
/// thread that does file-system calls only through `run_call`: calls there rest in their
/// identity afterwards (see `run_resting`). The identity stays after `f`: `end_resting` gives
/// the thread back its own.
pub fn allow_resting<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            REST_ALLOWED.set(self.0);
        }
    }
    let _restore = Restore(REST_ALLOWED.replace(true));
    f()
}

/// Gives a thread that rested in a request's identity its own back.
pub fn end_resting() {
    RESTING.with(|resting| *resting.borrow_mut() = None);
}

/// Runs `f` with the gateway's own identity: on a thread switched to a user's identity, the
/// identity the thread had before for the duration of `f`; elsewhere simply `f`. For the
/// gateway's internal state, which no user's permissions should decide.
pub fn as_gateway<T>(f: impl FnOnce() -> T) -> T {
    let Some(switched) = SWITCHED.with(|s| s.borrow_mut().take()) else {
        return f();
    };
    /// Goes back to the user's identity when `f` returns or unwinds.
    struct BackToUser(Option<Switched>);
    impl Drop for BackToUser {
        fn drop(&mut self) {
            let switched = self.0.take().expect("set until dropped");
            if switched.user.apply().is_err() {
                tracing::error!("could not switch a thread back to a request's identity; stopping");
                std::process::abort();
            }
            SWITCHED.with(|s| *s.borrow_mut() = Some(switched));
        }
    }
    if switched.gateway.apply().is_err() {
        tracing::error!("could not switch a thread back to the gateway's identity; stopping");
        std::process::abort();
    }
    let _back = BackToUser(Some(switched));
    f()
}

/// The uid and gid this thread's file-system calls run as, when switched to a user's identity
/// (for files the gateway creates on the user's behalf and hands over).
pub fn switched_owner() -> Option<(u32, u32)> {
    SWITCHED.with(|s| s.borrow().as_ref().map(|s| (s.user.fsuid, s.user.fsgid)))
}

/// Runs `f` with `identity` (the thread's own for `None`) on a thread that does file-system
/// calls only inside such calls, such as an async worker of the gateway: the thread keeps the
/// identity after `f` (it "rests" in it), so a next call with the same identity switches
/// nothing. Every call states the identity it runs with, the process's own included, so none
/// runs with a stale one. Not for threads that also run other work touching files (a blocking
/// pool runs maintenance): use `assume` there, which restores at once.
pub fn run_resting<T>(
    identity: Option<&std::sync::Arc<UnixIdentity>>,
    f: impl FnOnce() -> T,
) -> Result<T, IdentityError> {
    RESTING.with(|resting| {
        let mut resting = resting.borrow_mut();
        let same = match (&*resting, identity) {
            (Some((held, _)), Some(wanted)) => std::sync::Arc::ptr_eq(held, wanted),
            (None, None) => true,
            _ => false,
        };
        if !same {
            // Restores the thread's own identity before another is taken.
            *resting = None;
            if let Some(identity) = identity {
                *resting = Some((identity.clone(), identity.assume()?));
            }
        }
        Ok(())
    })?;
    Ok(f())
}

/// Whether this thread currently runs as a request's identity.
pub fn is_switched() -> bool {
    SWITCHED.with(|s| s.borrow().is_some())
}

/// Prepares a thread that serves requests (the gateway's runtime threads, a local socket's
/// connection threads): gives it its own file-system context (working directory, root and
/// umask) with `unshare(CLONE_FS)`, so that a request's umask applies to this thread only, and
/// the gateway's identity. A new thread starts with the credentials and umask of the thread
/// that created it, which may have been switched to a user's (an async worker rests in a
/// user's identity, and the blocking pool's threads are created by whichever thread needs one):
/// nothing may run with those.
pub fn init_request_thread() -> std::io::Result<()> {
    let gateway = gateway_identity();
    if !OWN_FS_CONTEXT.get() {
        // SAFETY: only CLONE_FS is unshared (working directory, root, umask); the descriptor
        // table stays shared, so every thread still sees every file descriptor.
        unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FS) }?;
        OWN_FS_CONTEXT.set(true);
        OWN.with(|own| own.borrow_mut().take());
    }
    if is_switched() {
        return Ok(());
    }
    if let Some(mask) = gateway.umask {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
    }
    let now = ThreadIdentity::current();
    if (now.fsuid, now.fsgid, &now.groups) != (gateway.fsuid, gateway.fsgid, &gateway.groups) {
        let ids = ThreadIdentity { umask: None, ..gateway.clone() };
        ids.apply().map_err(|_| std::io::Error::other("cannot give a new thread the gateway's identity"))?;
    }
    Ok(())
}

/// Starts a thread for work the gateway does for itself (opening its logs again, reloading
/// its certificate, counting usage): the thread takes the gateway's identity and umask before
/// `work` runs, and checks it has them (the ids, groups and umask read back from the kernel),
/// whatever the thread that spawned it was running as. A thread that cannot get them does not
/// run `work`: it logs why and ends.
pub fn spawn_gateway_thread<F>(name: &str, work: F) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    std::thread::Builder::new().name(name.to_string()).spawn(move || match become_gateway() {
        Ok(()) => work(),
        Err(err) => tracing::error!(error = %err, "a gateway thread could not take the gateway's identity; its work is not done"),
    })
}

/// Gives this (new, unswitched) thread the gateway's identity and umask, and checks it holds.
fn become_gateway() -> std::io::Result<()> {
    init_request_thread()?;
    if !holds_gateway_identity() {
        return Err(std::io::Error::other("the thread's ids, groups or umask are not the gateway's"));
    }
    Ok(())
}

/// Whether this thread's file-system ids, groups and umask are the gateway's own, read back
/// from the kernel now (not from what the thread believes it switched to).
pub fn holds_gateway_identity() -> bool {
    let gateway = gateway_identity();
    let now = ThreadIdentity::current();
    let umask_ok = !OWN_FS_CONTEXT.get() || gateway.umask.is_none_or(|mask| mask == current_umask());
    !is_switched() && (now.fsuid, now.fsgid, &now.groups) == (gateway.fsuid, gateway.fsgid, &gateway.groups) && umask_ok
}

/// Records the gateway's own identity (the calling thread's ids, groups and umask): call it at
/// start, before any thread switches. Later calls change nothing.
pub fn capture_gateway_identity() {
    gateway_identity();
}

/// The gateway's own identity, recorded once (see `capture_gateway_identity`; a process that
/// never records it gets the identity of the first thread that asks, before any switch).
fn gateway_identity() -> &'static ThreadIdentity {
    static GATEWAY: std::sync::OnceLock<ThreadIdentity> = std::sync::OnceLock::new();
    GATEWAY.get_or_init(|| ThreadIdentity { umask: Some(current_umask()), ..ThreadIdentity::current() })
}

/// What this thread runs as when it is not switched: the gateway's identity (with its umask
/// on threads that have their own), kept per thread to hand to guards without copying.
fn own_identity() -> Rc<ThreadIdentity> {
    OWN.with(|own| {
        own.borrow_mut()
            .get_or_insert_with(|| {
                let gateway = gateway_identity();
                let umask = if OWN_FS_CONTEXT.get() { gateway.umask } else { None };
                Rc::new(ThreadIdentity { umask, ..gateway.clone() })
            })
            .clone()
    })
}

thread_local! {
    /// The identity a thread rests in between calls (see `run_resting`).
    static RESTING: RefCell<Option<(std::sync::Arc<UnixIdentity>, IdentityGuard)>> = const { RefCell::new(None) };
    /// The identities of a switched thread: what it was (the gateway) and what it is now.
    static SWITCHED: RefCell<Option<Switched>> = const { RefCell::new(None) };
    /// See `own_identity`.
    static OWN: RefCell<Option<Rc<ThreadIdentity>>> = const { RefCell::new(None) };
    /// Set while calls on this thread may rest in their identity (`allow_resting`).
    static REST_ALLOWED: Cell<bool> = const { Cell::new(false) };
    /// Set once `init_request_thread` has run on this thread.
    static OWN_FS_CONTEXT: Cell<bool> = const { Cell::new(false) };
}

struct Switched {
    gateway: Rc<ThreadIdentity>,
    user: ThreadIdentity,
}

/// The umask of this thread (read by setting and putting back).
fn current_umask() -> u32 {
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    rustix::process::umask(old);
    old.bits()
}

/// The supplementary groups of a user, through NSS (`getgrouplist`).
fn group_list(name: &CString, gid: u32) -> Vec<u32> {
    let mut count: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; count as usize];
        let asked = count;
        // SAFETY: `groups` has room for `count` entries, and getgrouplist writes at most that
        // many, setting `count` to how many there are.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(count as usize);
            return groups;
        }
        if count <= asked {
            count = asked * 4;
        }
    }
}

/// Sets this thread's file-system uid and returns the one it has afterwards (the kernel
/// reports the previous one and changes nothing when not permitted; a second call tells).
fn set_fsuid(uid: u32) -> u32 {
    // SAFETY: setfsuid takes an integer and changes only this thread's credentials; it has no
    // memory effects.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) };
    // SAFETY: as above; -1 is never a valid id, so this only reads the current fsuid.
    (unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) }) as u32
}

/// `set_fsuid` for the file-system gid.
fn set_fsgid(gid: u32) -> u32 {
    // SAFETY: see `set_fsuid`.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) };
    // SAFETY: see `set_fsuid`.
    (unsafe { libc::syscall(libc::SYS_setfsgid, u32::MAX) }) as u32
}

/// What a thread's file-system calls run as.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ThreadIdentity {
    fsuid: u32,
    fsgid: u32,
    groups: Vec<rustix::process::Gid>,
    /// Only tracked where a switch sets one.
    umask: Option<u32>,
}

impl ThreadIdentity {
    fn current() -> Self {
        // SAFETY: see `set_fsuid`: -1 only reads.
        let fsuid = (unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) }) as u32;
        // SAFETY: as above.
        let fsgid = (unsafe { libc::syscall(libc::SYS_setfsgid, u32::MAX) }) as u32;
        // getgroups is a plain system call: it reports the calling thread's groups.
        let groups = rustix::process::getgroups().unwrap_or_default();
        Self { fsuid, fsgid, groups, umask: None }
    }

    /// Makes this thread run as `self`. Groups first: once the fsuid is a user's, the thread
    /// still has the capability to switch (capabilities follow the real and effective ids,
    /// not the file-system ones). Each id is read back: the kernel reports a refused change
    /// only that way.
    fn apply(&self) -> Result<(), Applied> {
        rustix::thread::set_thread_groups(&self.groups).map_err(|_| Applied::Nothing)?;
        if let Some(mask) = self.umask {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
        }
        if set_fsgid(self.fsgid) != self.fsgid || set_fsuid(self.fsuid) != self.fsuid {
            return Err(Applied::Partly);
        }
        Ok(())
    }
}

/// How much of a refused `ThreadIdentity::apply` took effect.
#[derive(Debug)]
enum Applied {
    Nothing,
    Partly,
}

/// While alive, this thread's file-system calls run as an assumed identity; dropping it
/// (also during a panic) puts back the identity the thread had before.
#[must_use = "the identity is given back when the guard is dropped"]
pub struct IdentityGuard {
    previous: Rc<ThreadIdentity>,
}

impl Drop for IdentityGuard {
    fn drop(&mut self) {
        // `try_with`: a guard resting in a thread-local is dropped while the thread exits, when
        // `SWITCHED` may already be gone (and `with` would panic inside a destructor: abort).
        let _ = SWITCHED.try_with(|s| s.borrow_mut().take());
        if self.previous.apply().is_err() {
            // A thread that cannot be given its identity back must not serve anyone else.
            tracing::error!("could not restore a thread's identity after a request; stopping");
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    /// Whether the tests that switch identities can run (they need root; CI runs as root).
    fn can_switch() -> bool {
        if !is_root() {
            eprintln!("skipped: switching identities needs root (CI runs as root)");
        }
        is_root()
    }

    /// A directory every user may write, for tests that switch identities (`None` when they
    /// cannot run).
    fn world_writable_dir() -> Option<tempfile::TempDir> {
        if !can_switch() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        Some(dir)
    }

    #[test]
    fn root_resolves_through_nss_and_strangers_do_not() {
        let root = UnixIdentity::of_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(
            UnixIdentity::of_user("no-such-user-isthmus"),
            Err(IdentityError::UnknownUser("no-such-user-isthmus".into()))
        );
    }

    #[test]
    fn a_gateway_thread_spawned_from_a_resting_user_thread_runs_as_the_gateway() {
        // Issue 28, finding 5: work the gateway does for itself (reopening its access log on
        // SIGHUP) ran on an async worker still resting in the last request's identity.
        let Some(dir) = world_writable_dir() else { return };
        capture_gateway_identity();
        let nobody =
            std::sync::Arc::new(UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: Some(0o077) });
        let path = dir.path().to_path_buf();
        let owner = std::thread::spawn(move || {
            init_request_thread().unwrap();
            // Rests in nobody's identity, as an async worker does after an inline request.
            run_resting(Some(&nobody), || ()).unwrap();
            assert!(!holds_gateway_identity());
            let (tx, rx) = std::sync::mpsc::channel();
            let file = path.join("by-gateway");
            spawn_gateway_thread("test-gateway", move || {
                let held = holds_gateway_identity();
                std::fs::write(&file, b"x").unwrap();
                tx.send(held).unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
            assert!(rx.recv().unwrap(), "the gateway thread must hold the gateway's identity");
            std::fs::metadata(path.join("by-gateway")).unwrap().uid()
        })
        .join()
        .unwrap();
        assert_eq!(owner, rustix::process::geteuid().as_raw());
    }

    #[test]
    fn a_switch_changes_this_thread_only_and_is_undone() {
        let Some(dir) = world_writable_dir() else { return };
        let nobody = UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: None };
        let path = dir.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let guard = nobody.assume().unwrap();
            std::fs::write(path.join("by-nobody"), b"x").unwrap();
            tx.send(()).unwrap();
            // Still switched while the main thread writes: it must stay root.
            done_rx.recv().unwrap();
            drop(guard);
            std::fs::write(path.join("after"), b"x").unwrap();
        });
        rx.recv().unwrap();
        std::fs::write(dir.path().join("by-main"), b"x").unwrap();
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        let owner = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().uid();
        assert_eq!(owner("by-nobody"), 65534);
        assert_eq!(owner("by-main"), 0);
        assert_eq!(owner("after"), 0);
    }

    #[test]
    fn the_kernel_judges_as_the_assumed_user_and_a_panic_restores() {
        if !can_switch() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let nobody = UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: None };
        let path = secret.clone();
        std::thread::spawn(move || {
            let result = std::panic::catch_unwind(|| {
                let _guard = nobody.assume().unwrap();
                let denied = std::fs::read(&path).unwrap_err();
                assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
                panic!("a request that fails while switched");
            });
            assert!(result.is_err());
            // Unwinding gave the thread back its own identity.
            assert_eq!(std::fs::read(&path).unwrap(), b"root only");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn gateway_steps_run_as_the_gateway_and_the_umask_is_the_users() {
        let Some(dir) = world_writable_dir() else { return };
        let path = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let nobody = UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: Some(0o027) };
            assert_eq!(nobody.assume().err(), Some(IdentityError::SharedUmask));
            init_request_thread().unwrap();
            let before = current_umask();
            let guard = nobody.assume().unwrap();
            assert!(is_switched());
            assert!(nobody.assume().is_err(), "switches do not nest");
            std::fs::write(path.join("user"), b"x").unwrap();
            as_gateway(|| {
                assert!(!is_switched());
                std::fs::write(path.join("gateway"), b"x").unwrap();
            });
            std::fs::create_dir(path.join("user-dir")).unwrap();
            drop(guard);
            assert!(!is_switched());
            assert_eq!(current_umask(), before);
        })
        .join()
        .unwrap();
        let meta = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap();
        assert_eq!(meta("user").uid(), 65534);
        assert_eq!(meta("user").mode() & 0o777, 0o640);
        assert_eq!(meta("user-dir").mode() & 0o777, 0o750);
        assert_eq!(meta("gateway").uid(), 0);
        // as_gateway off a switched thread is simply the call.
        assert_eq!(as_gateway(|| 7), 7);
    }

    #[test]
    fn a_resting_thread_keeps_an_identity_until_a_call_needs_another() {
        let Some(dir) = world_writable_dir() else { return };
        let path = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let nobody = std::sync::Arc::new(UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: None });
            let other = std::sync::Arc::new(UnixIdentity { uid: 65533, gid: 65533, groups: vec![65533], umask: None });
            run_resting(Some(&nobody), || std::fs::write(path.join("a"), b"x").unwrap()).unwrap();
            assert!(is_switched(), "rests as nobody between calls");
            run_resting(Some(&nobody), || std::fs::write(path.join("b"), b"x").unwrap()).unwrap();
            run_resting(Some(&other), || std::fs::write(path.join("c"), b"x").unwrap()).unwrap();
            run_resting(None, || std::fs::write(path.join("d"), b"x").unwrap()).unwrap();
            assert!(!is_switched(), "a call without identity runs as the thread's own");
        })
        .join()
        .unwrap();
        let owner = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().uid();
        assert_eq!([owner("a"), owner("b"), owner("c"), owner("d")], [65534, 65534, 65533, 0]);
    }

    #[test]
    fn a_thread_created_by_a_switched_thread_starts_as_the_gateway() {
        if !can_switch() {
            return;
        }
        capture_gateway_identity();
        std::thread::spawn(|| {
            let nobody = UnixIdentity { uid: 65534, gid: 65534, groups: vec![65534], umask: None };
            let _guard = nobody.assume().unwrap();
            std::thread::spawn(|| {
                // The kernel gives a new thread its creator's credentials...
                assert_eq!(ThreadIdentity::current().fsuid, 65534);
                // ...which a request thread gives up before it does anything.
                init_request_thread().unwrap();
                let now = ThreadIdentity::current();
                assert_eq!((now.fsuid, now.fsgid), (0, 0));
                assert!(!now.groups.contains(&rustix::process::Gid::from_raw(65534)));
                let own = own_identity();
                assert_eq!(own.fsuid, 0, "a new thread's own identity is the gateway's");
            })
            .join()
            .unwrap();
        })
        .join()
        .unwrap();
    }
}
