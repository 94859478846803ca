//! Gives the library the SONAME of Debian's libs3 (`libs3.so.2`), and puts a `libs3.so.2` link
//! to the built `libs3.so` next to it, so programs linked against Debian's libs3 load this one
//! when its directory comes first on the library path.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libs3.so.2");
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out: three levels up is target/<profile>.
    if let Some(profile_dir) = std::env::var_os("OUT_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|p| p.ancestors().nth(3).map(|p| p.to_path_buf()))
    {
        let link = profile_dir.join("libs3.so.2");
        if std::fs::symlink_metadata(&link).is_err() {
            let _ = std::os::unix::fs::symlink("libs3.so", &link);
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
