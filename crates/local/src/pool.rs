//! The client's connections to a gateway's local socket: one connection after its handshake
//! (the version the gateway chose), and a pool of idle ones that the calls take and give back.

use std::io::{self, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use isthmus_store::{StoreError, StoreResult};

use crate::protocol::{CHUNK, MAGIC, Request, VERSION_MAX, VERSION_MIN, WireError, read_frame, read_u16, write_frame};
use crate::transport::{Inbox, spin_from_env};

/// One connection, after its handshake.
pub(crate) struct Connection {
    pub(crate) reader: Inbox,
    pub(crate) writer: BufWriter<UnixStream>,
    /// The protocol version the gateway chose.
    pub(crate) version: u16,
}

pub(crate) fn lost(err: io::Error) -> StoreError {
    StoreError::Remote {
        code: "InternalError",
        status: 500,
        message: format!("the local gateway connection failed: {err}"),
    }
}

impl Connection {
    /// Connects and shakes hands; returns the connection and the S3 user the gateway took
    /// this process for.
    pub(crate) fn open(path: &Path) -> StoreResult<(Self, String)> {
        let stream = UnixStream::connect(path).map_err(|e| StoreError::Remote {
            code: "InternalError",
            status: 500,
            message: format!("cannot connect to the local gateway at {}: {e}", path.display()),
        })?;
        // Room for a few chunks of a body in flight (best effort, capped by the kernel).
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, 4 * CHUNK);
        let mut conn = Self {
            reader: Inbox::new(stream.try_clone().map_err(lost)?, CHUNK + 64, spin_from_env()),
            writer: BufWriter::with_capacity(CHUNK + 64, stream),
            version: VERSION_MIN,
        };
        let user = conn.handshake().map_err(lost)??;
        Ok((conn, user))
    }

    fn handshake(&mut self) -> io::Result<StoreResult<String>> {
        self.writer.write_all(MAGIC)?;
        self.writer.write_all(&VERSION_MIN.to_le_bytes())?;
        self.writer.write_all(&VERSION_MAX.to_le_bytes())?;
        self.writer.flush()?;
        let mut magic = [0u8; 8];
        self.reader.read_exact(&mut magic)?;
        if &magic != MAGIC {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the socket is not an Isthmus gateway's"));
        }
        self.version = read_u16(&mut self.reader)?;
        let answer: Result<String, WireError> = read_frame(&mut self.reader)?;
        Ok(answer.map_err(StoreError::from))
    }

    pub(crate) fn send(&mut self, request: &Request) -> io::Result<()> {
        write_frame(&mut self.writer, request)?;
        self.writer.flush()
    }

    pub(crate) fn receive<T: serde::de::DeserializeOwned>(&mut self) -> io::Result<Result<T, WireError>> {
        read_frame(&mut self.reader)
    }
}

/// The connections to one gateway, and the S3 user it serves this process as.
pub(crate) struct Shared {
    path: PathBuf,
    user: String,
    idle: Mutex<Vec<Connection>>,
}

impl Shared {
    /// The pool of the gateway at `path`, with its first connection.
    pub(crate) fn new(path: PathBuf, user: String, first: Connection) -> Self {
        Self { path, user, idle: Mutex::new(vec![first]) }
    }

    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    pub(crate) fn take(&self) -> StoreResult<Connection> {
        if let Some(conn) = self.idle.lock().expect("not poisoned").pop() {
            return Ok(conn);
        }
        Connection::open(&self.path).map(|(conn, _)| conn)
    }

    pub(crate) fn give_back(&self, mut conn: Connection) {
        // A descriptor no reply asked for is not kept open.
        while conn.reader.take_descriptor().is_some() {}
        let mut idle = self.idle.lock().expect("not poisoned");
        if idle.len() < 64 {
            idle.push(conn);
        }
    }
}
