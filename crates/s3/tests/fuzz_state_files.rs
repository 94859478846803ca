//! Fuzz target for the gateway's state files as read at start and on reload: the users file,
//! the root credentials, the temporary-credentials key and a bucket's settings record. They
//! live where only the gateway writes (`state_dir`), but a damaged disk, an editor or an
//! operator's mistake can put anything there: each read must end in a value or a one-line
//! error, never a panic or an allocation past the state-file bound. Property-based
//! (proptest), as the project's other fuzz targets.
//!
//! `cargo test --release -p isthmus-s3 --test fuzz_state_files` runs 256 cases (CI);
//! `PROPTEST_CASES=100000 scripts/fuzz` runs it longer.

use std::os::unix::fs::PermissionsExt;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_s3::admin::users_file;
use isthmus_store::state_dir::{StateDir, StateTrust};
use isthmus_store::{RequestContext, Store};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

/// Content that is mostly shaped like the file (so parsing goes deep), or anything at all.
fn content(shapes: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        (prop::sample::select(shapes), prop::collection::vec((0usize..400, any::<u8>()), 0..6)).prop_map(
            |(shape, edits)| {
                let mut bytes = shape.as_bytes().to_vec();
                for (at, byte) in edits {
                    if !bytes.is_empty() {
                        let at = at % bytes.len();
                        bytes[at] = byte;
                    }
                }
                bytes
            }
        ),
    ]
}

const USERS: &[&str] = &[
    "[[users]]\naccess_key = \"AKIDALICE0123456789\"\nsecret_key = \"alice-secret-0123456789\"\nunix_user = \"alice\"\nbuckets = [\"shared-*\"]\n",
    "disabled = [\"AKBOB\"]\n[[users]]\naccess_key = \"x\"\nsecret_key = \"y\"\nuid = 4294967295\ngid = -1\n",
    "users = 3",
];
const CREDENTIALS: &[&str] =
    &["access_key = \"AAAAAAAAAAAAAAAAAAAA\"\nsecret_key = \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n"];
const KEYS: &[&str] = &["00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "zz"];
const RECORDS: &[&str] = &[
    "{\"directory\":1,\"config\":{\"owner\":\"bob\",\"acl\":{\"canned\":\"public-read\",\"grants\":[]},\"policy\":null,\"public_access_block\":null,\"tags\":{},\"versioning\":\"Enabled\"}}",
    "{\"directory\":18446744073709551615,\"config\":{}}",
];

fn state(dir: &std::path::Path) -> StateDir {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    StateDir::open_path(dir, StateTrust::Gateway).unwrap()
}

fn write_private(state: &StateDir, name: &str, bytes: &[u8]) {
    state.replace(name, bytes, 0o600).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn state_files_give_a_value_or_an_error(
        users in content(USERS),
        credentials in content(CREDENTIALS),
        key in content(KEYS),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path());
        write_private(&state, users_file::USERS_FILE, &users);
        if let Err(err) = users_file::load(&state) {
            prop_assert!(!err.contains('\n'), "one line: {err}");
        }
        write_private(&state, isthmus_session::users::CREDENTIALS_FILE, &credentials);
        let _ = isthmus_session::users::load_or_create_root(&state);
        write_private(&state, isthmus_grid::SessionKeys::FILE, &key);
        let _ = isthmus_grid::SessionKeys::load_or_create(&state);
    }

    #[test]
    fn a_damaged_bucket_record_is_an_error_or_settings(record in content(RECORDS)) {
        let dir = tempfile::tempdir().unwrap();
        let store = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
        let cx = RequestContext::process();
        store.create_bucket(&cx, "fuzz", &Default::default()).unwrap();
        let records = store.state_dir().subdir("buckets", true).unwrap().unwrap();
        records.replace("fuzz.json", &record, 0o644).unwrap();
        // A second store: nothing cached.
        let again = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
        match again.bucket_config(&cx, "fuzz") {
            // Never bound to this directory's inode: none of it applies.
            Ok(config) => prop_assert!(config.owner.is_none() && config.acl == Default::default() && config.versioning.is_none()),
            Err(err) => prop_assert!(!err.s3_code().is_empty()),
        }
    }
}
