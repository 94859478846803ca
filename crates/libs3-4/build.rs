//! Gives the library the SONAME of libs3 4.1 (`libs3.so.4`), and puts a `libs3.so.4` link to
//! the built `libs3_4.so` next to it, so programs linked against libs3 4.1 load this one when
//! target/<profile> comes first on the library path. Also a directory `libs3-4/` there with
//! `libs3.so` and `libs3.so.4` links: `-L target/<profile>/libs3-4 -ls3` links a tool against
//! this face (its NEEDED entry is then libs3.so.4).
use std::os::unix::fs::symlink;
use std::path::Path;

fn link(target: &str, at: &Path) {
    if std::fs::symlink_metadata(at).is_err() {
        let _ = symlink(target, at);
    }
}

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libs3.so.4");
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out: three levels up is target/<profile>.
    if let Some(profile_dir) = std::env::var_os("OUT_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|p| p.ancestors().nth(3).map(|p| p.to_path_buf()))
    {
        link("libs3_4.so", &profile_dir.join("libs3.so.4"));
        let dir = profile_dir.join("libs3-4");
        let _ = std::fs::create_dir_all(&dir);
        link("../libs3_4.so", &dir.join("libs3.so"));
        link("../libs3_4.so", &dir.join("libs3.so.4"));
    }
    println!("cargo:rerun-if-changed=build.rs");
}
