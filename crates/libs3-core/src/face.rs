//! A face of the library: the `S3Status` numbering one libs3 version gives its callers, and
//! the few answers that differ between versions. The shared code names statuses (libs3's names,
//! without the `S3Status` prefix); a face turns a name into its number when the caller is told.
//! Also the failure a call ends with, and the status each engine error becomes.

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int};

use isthmus_store::StoreError;

use crate::abi::S3Status;

/// One libs3 ABI version as its callers see it.
pub struct Face {
    /// The status names in enumeration order: a status is its index.
    pub names: &'static [&'static CStr],
    /// The status of a call this library does not serve (ACLs, logging, lifecycle, signed
    /// URLs): libs3 4.x has `NotSupported`, 2.0 only `ErrorNotImplemented`.
    pub unsupported: &'static str,
    /// HEAD reports errors by their HTTP status (`HttpErrorNotFound`, ...), as libs3 does over
    /// HTTP where a HEAD answer has no body to name the error.
    pub head_by_http_status: bool,
    /// The statuses `S3_status_is_retryable` answers 1 for.
    pub retryable: &'static [&'static str],
}

impl Face {
    /// The number of a status name; `InternalError` when this face has no such name.
    pub fn number(&self, name: &str) -> S3Status {
        self.names.iter().position(|n| n.to_bytes() == name.as_bytes()).map_or(1, |i| i as S3Status)
    }

    pub fn knows(&self, name: &str) -> bool {
        self.names.iter().any(|n| n.to_bytes() == name.as_bytes())
    }

    /// The name of a status number as `S3_get_status_name` returns it ("Unknown" out of range).
    pub fn name(&self, status: S3Status) -> *const c_char {
        usize::try_from(status).ok().and_then(|i| self.names.get(i)).map_or(c"Unknown".as_ptr(), |n| n.as_ptr())
    }

    pub fn is_retryable(&self, status: S3Status) -> c_int {
        let name = usize::try_from(status).ok().and_then(|i| self.names.get(i));
        c_int::from(name.is_some_and(|n| self.retryable.iter().any(|r| r.as_bytes() == n.to_bytes())))
    }

    /// The name of the status a failure reports.
    pub fn name_of(&self, code: &Code) -> String {
        let status = self.status_of(code);
        let name = usize::try_from(status).ok().and_then(|i| self.names.get(i));
        name.map_or_else(|| status.to_string(), |n| n.to_string_lossy().into_owned())
    }

    /// The number a failure reports to this face's caller.
    pub fn status_of(&self, code: &Code) -> S3Status {
        match code {
            Code::Caller(status) => *status,
            Code::Named(name, _) if self.knows(name) => self.number(name),
            Code::Named(_, fallback) if self.knows(fallback) => self.number(fallback),
            Code::Named(..) => self.number("ErrorInternalError"),
        }
    }
}

/// What a failed call reports.
#[derive(Debug)]
pub enum Code {
    /// A status by name, and the name to use where the face lacks it.
    Named(Cow<'static, str>, &'static str),
    /// A status a caller's callback returned: handed back unchanged.
    Caller(S3Status),
}

/// A failure: the status and a message for the error details.
#[derive(Debug)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    /// A failure with a status every face has.
    pub fn new(name: &'static str, message: impl Into<String>) -> Self {
        Failure { code: Code::Named(Cow::Borrowed(name), name), message: message.into() }
    }

    /// The status a caller's callback stopped the request with.
    pub fn caller(status: S3Status, message: impl Into<String>) -> Self {
        Failure { code: Code::Caller(status), message: message.into() }
    }

    /// A HEAD's failure as libs3 reports it over HTTP: by HTTP status, a HEAD answer having no
    /// body that names the error.
    pub fn of_head(self, face: &Face, http_status: u16) -> Self {
        let by_status = match http_status {
            400 => "HttpErrorBadRequest",
            403 => "HttpErrorForbidden",
            404 => "HttpErrorNotFound",
            409 => "HttpErrorConflict",
            _ => return self,
        };
        match face.head_by_http_status {
            true => Failure { code: Code::Named(Cow::Borrowed(by_status), by_status), ..self },
            false => self,
        }
    }
}

/// The libs3 status of an engine error: the engine's S3 code (`StoreError::s3_code`, the one
/// mapping every door shares) under libs3's name for it; codes a face has no name for become
/// ErrorInternalError (server-side failures) or ErrorInvalidArgument (the request's fault).
impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        let name = match err.s3_code() {
            "KeyTooLongError" => "ErrorKeyTooLong".to_string(),
            // libs3 reports a failed If-None-Match as a failed precondition.
            "NotModified" => "ErrorPreconditionFailed".to_string(),
            code => format!("Error{code}"),
        };
        let fallback = if err.http_status() >= 500 { "ErrorInternalError" } else { "ErrorInvalidArgument" };
        Failure { code: Code::Named(Cow::Owned(name), fallback), message: err.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NAMES: [&CStr; 5] =
        [c"OK", c"InternalError", c"ErrorInternalError", c"ErrorNoSuchKey", c"HttpErrorNotFound"];
    static FACE: Face = Face {
        names: &NAMES,
        unsupported: "ErrorInternalError",
        head_by_http_status: true,
        retryable: &["ErrorInternalError"],
    };

    #[test]
    fn engine_errors_become_the_faces_numbers_or_a_fallback() {
        let missing = Failure::from(StoreError::NoSuchKey);
        assert_eq!(FACE.status_of(&missing.code), 3);
        assert_eq!(FACE.status_of(&missing.of_head(&FACE, 404).code), 4);
        // A code this face has no name for falls back by HTTP status.
        let unknown = Failure::from(StoreError::Io(std::io::Error::other("disk")));
        assert_eq!(FACE.status_of(&unknown.code), 2);
        assert_eq!(FACE.status_of(&Code::Caller(77)), 77, "a callback's status is handed back");
        assert_eq!(FACE.is_retryable(2), 1);
        assert_eq!(FACE.is_retryable(3), 0);
        assert_eq!(FACE.is_retryable(-1), 0);
        // SAFETY: `name` returns a static C string.
        assert_eq!(unsafe { CStr::from_ptr(FACE.name(99)) }, c"Unknown");
    }
}
