//! The session floor: who is asking and how their calls run. It owns the users, their keys,
//! the token and temporary-credential mapping and the users' Unix identities, and turns what a
//! door knows (a checked signature's access key, a token, a socket peer's uid, "this process")
//! into one `RequestContext` (`principals`); it assembles the store stack every door calls
//! once (`stack`: authorization over the identity wrapper over the pools), and it owns the
//! runner that places calls inline or on the blocking pool (`runner`). No door and no service
//! switches a thread's identity or spawns blocking engine work itself: they come here.

pub mod announcing;
pub mod as_requester;
pub mod door;
mod error;
pub mod identities;
pub mod principals;
mod recent_writes;
pub mod runner;
pub mod stack;
pub mod tokens;
pub mod users;
mod young_dirs;

pub use error::Refusal;
pub use identities::{Identities, IdentitySpec};
pub use principals::{Asking, Principals};
pub use runner::{IoPolicy, Placement, Runner};
pub use tokens::GridAuth;
pub use users::{User, UserDirectory};
pub use young_dirs::WatcherProgress;
