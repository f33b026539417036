//! `Error`: a failure of the store -- its kind, one per code of the result-code table of
//! `include/mooncake_store.h` (`MOONCAKE_STORE_ERROR_TABLE`), and why, as the library says
//! it (`mooncake_store_errmsg`).
use std::ffi::CStr;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::ffi;

/// Defines `ErrorKind` with one variant per negative code of the table, plus `Unknown`, and
/// an `Error` constant of each kind.
macro_rules! error_table {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $c_name:literal; )*) => {
        /// The kind of a failure: one variant per negative code of
        /// `MOONCAKE_STORE_ERROR_TABLE` (the code 0, `OK`, is `Ok(..)`), with the same numeric
        /// values as Mooncake. [`ErrorKind::code`] gives the number back.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )*
            /// A code outside the table (from a newer library or daemon).
            Unknown(i32),
        }

        impl ErrorKind {
            /// Every kind of the table, in the header's order (`Unknown` excluded).
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$variant),*];

            /// The numeric code, as the C functions return it.
            pub const fn code(self) -> i32 {
                match self {
                    $(ErrorKind::$variant => $code,)*
                    ErrorKind::Unknown(code) => code,
                }
            }

            /// The header's name of the code without the `MOONCAKE_STORE_` prefix, e.g.
            /// `"OBJECT_NOT_FOUND"`; `"UNKNOWN"` for [`ErrorKind::Unknown`].
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $c_name,)*
                    ErrorKind::Unknown(_) => "UNKNOWN",
                }
            }

            /// The kind of a non-zero code (`Unknown` when it is not in the table); `None`
            /// for 0 (`OK`).
            pub const fn from_code(code: i32) -> Option<ErrorKind> {
                match code {
                    0 => None,
                    $($code => Some(ErrorKind::$variant),)*
                    other => Some(ErrorKind::Unknown(other)),
                }
            }
        }

        /// The bare error of each kind (no message), named as its kind: compare a result
        /// with `Err(Error::ObjectNotFound)`, or match on [`Error::kind`].
        #[allow(non_upper_case_globals)]
        impl Error {
            $( $(#[$doc])* pub const $variant: Error = Error::bare(ErrorKind::$variant); )*
        }
    };
}

/// A failure reported by the store: its kind ([`Error::kind`], [`Error::code`]) and, when
/// the library said more, why ([`Error::message`]): what `mooncake_store_errmsg` returned
/// for the failed call -- the problem and the fix ("mooncaked is not running at
/// /run/mooncake/mooncaked.sock (connect: No such file or directory): start it ...", "key
/// longer than 4096 bytes (5000)"), or the daemon's own reason -- or the binding's reason when
/// it refused the call itself (a key with a NUL byte).
///
/// `Display` is the code's description (`mooncake_store_strerror`), then `": "` and the
/// message when there is one. Two errors are equal when their kinds are: the message
/// explains a failure, it does not make it another one.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: Option<Box<str>>,
}

impl Error {
    const fn bare(kind: ErrorKind) -> Error {
        Error {
            kind,
            message: None,
        }
    }

    /// The kind of the failure.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The numeric code, as the C functions return it.
    pub const fn code(&self) -> i32 {
        self.kind.code()
    }

    /// The header's name of the code, e.g. `"OBJECT_NOT_FOUND"` (see [`ErrorKind::name`]).
    pub const fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Why the call failed, as the library (or the binding) said it; `None` when nothing
    /// said more than the code (a miss, say).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The bare error of a non-zero code (kind `Unknown` when it is not in the table);
    /// `None` for 0 (`OK`).
    pub const fn from_code(code: i32) -> Option<Error> {
        match ErrorKind::from_code(code) {
            Some(kind) => Some(Error::bare(kind)),
            None => None,
        }
    }

    /// This error with why it happened ("" keeps none).
    pub(crate) fn with_message(mut self, message: &str) -> Error {
        self.message = (!message.is_empty()).then(|| message.into());
        self
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error::bare(kind)
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.kind == other.kind
    }
}

impl Eq for Error {}

impl Hash for Error {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

impl PartialEq<ErrorKind> for Error {
    fn eq(&self, kind: &ErrorKind) -> bool {
        self.kind == *kind
    }
}

error_table! {
    /// -1: internal error (NULL argument or unexpected exception).
    InternalError = -1, "INTERNAL_ERROR";
    /// -10: buffer overflow.
    BufferOverflow = -10, "BUFFER_OVERFLOW";
    /// -101: segment not found.
    SegmentNotFound = -101, "SEGMENT_NOT_FOUND";
    /// -102: segment already exists.
    SegmentAlreadyExists = -102, "SEGMENT_ALREADY_EXISTS";
    /// -103: client (daemon) not known to the master.
    ClientNotFound = -103, "CLIENT_NOT_FOUND";
    /// -200: no space for even one replica.
    NoAvailableHandle = -200, "NO_AVAILABLE_HANDLE";
    /// -400: invalid key.
    InvalidKey = -400, "INVALID_KEY";
    /// -600: invalid parameters.
    InvalidParams = -600, "INVALID_PARAMS";
    /// -601: request from a client that does not own the operation.
    IllegalClient = -601, "ILLEGAL_CLIENT";
    /// -703: object is still being written.
    ReplicaIsNotReady = -703, "REPLICA_IS_NOT_READY";
    /// -704: object not found.
    ObjectNotFound = -704, "OBJECT_NOT_FOUND";
    /// -705: object already exists.
    ObjectAlreadyExists = -705, "OBJECT_ALREADY_EXISTS";
    /// -706: object has an active read lease.
    ObjectHasLease = -706, "OBJECT_HAS_LEASE";
    /// -707: lease expired before the read finished.
    LeaseExpired = -707, "LEASE_EXPIRED";
    /// -800: transfer failed.
    TransferFail = -800, "TRANSFER_FAIL";
    /// -801: checksum mismatch.
    ChecksumMismatch = -801, "CHECKSUM_MISMATCH";
    /// -900: master or daemon unreachable.
    RpcFail = -900, "RPC_FAIL";
    /// -901: master or daemon too slow to answer.
    RpcTimeout = -901, "RPC_TIMEOUT";
    /// -1010: unavailable in the current status.
    UnavailableInCurrentStatus = -1010, "UNAVAILABLE_IN_CURRENT_STATUS";
    /// -1011: unavailable in the current mode.
    UnavailableInCurrentMode = -1011, "UNAVAILABLE_IN_CURRENT_MODE";
    /// -1012: not supported.
    NotSupported = -1012, "NOT_SUPPORTED";
    /// -1100: file not found.
    FileNotFound = -1100, "FILE_NOT_FOUND";
    /// -1101: file open failed.
    FileOpenFail = -1101, "FILE_OPEN_FAIL";
    /// -1102: file read failed.
    FileReadFail = -1102, "FILE_READ_FAIL";
    /// -1103: file write failed.
    FileWriteFail = -1103, "FILE_WRITE_FAIL";
    /// -1104: invalid file buffer.
    FileInvalidBuffer = -1104, "FILE_INVALID_BUFFER";
    /// -1105: file lock failed.
    FileLockFail = -1105, "FILE_LOCK_FAIL";
    /// -1106: invalid file handle.
    FileInvalidHandle = -1106, "FILE_INVALID_HANDLE";
    /// -1200: bucket not found.
    BucketNotFound = -1200, "BUCKET_NOT_FOUND";
    /// -1201: bucket already exists.
    BucketAlreadyExists = -1201, "BUCKET_ALREADY_EXISTS";
    /// -1202: keys exceed the bucket limit.
    KeysExceedBucketLimit = -1202, "KEYS_EXCEED_BUCKET_LIMIT";
    /// -1203: too many keys.
    KeysUltraLimit = -1203, "KEYS_ULTRA_LIMIT";
    /// -1300: a daemon resource limit would be exceeded.
    ResourceLimitExceeded = -1300, "RESOURCE_LIMIT_EXCEEDED";
    /// -1305: too many connections from one peer.
    TooManyConnections = -1305, "TOO_MANY_CONNECTIONS";
    /// -1400: peer not admitted: no or a wrong proof of the cluster key.
    Unauthenticated = -1400, "UNAUTHENTICATED";
    /// -1401: caller not allowed here (its uid or gid, or its tenant).
    PermissionDenied = -1401, "PERMISSION_DENIED";
    /// -1402: the tenant's memory quota would be exceeded.
    QuotaExceeded = -1402, "QUOTA_EXCEEDED";
    /// -1500: serialization unsupported.
    SerializeUnsupported = -1500, "SERIALIZE_UNSUPPORTED";
    /// -1501: serialization failed.
    SerializeFail = -1501, "SERIALIZE_FAIL";
    /// -1502: deserialization failed.
    DeserializeFail = -1502, "DESERIALIZE_FAIL";
    /// -1503: persisting failed.
    PersistentFail = -1503, "PERSISTENT_FAIL";
    /// -1600: this master is not the leader (a standby, or deposed): ask the leader.
    NotLeader = -1600, "NOT_LEADER";
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: mooncake_store_strerror returns a static NUL-terminated string for any code.
        let text = unsafe { CStr::from_ptr(ffi::mooncake_store_strerror(self.code())) };
        f.write_str(&text.to_string_lossy())?;
        if let ErrorKind::Unknown(code) = self {
            write!(f, " ({code})")?;
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::new(std::io::ErrorKind::Other, e)
    }
}

/// `Ok(())` for 0, the bare error for anything else (a call on a store says why with
/// `Store::check`).
pub(crate) fn check(rc: i32) -> Result<()> {
    match Error::from_code(rc) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// A non-negative count or size, or the bare error of a negative code.
pub(crate) fn check_i64(rc: i64) -> Result<u64> {
    u64::try_from(rc).map_err(|_| {
        let code = i32::try_from(rc).unwrap_or(i32::MIN);
        Error::from(ErrorKind::from_code(code).unwrap_or(ErrorKind::Unknown(code)))
    })
}

#[cfg(test)]
mod tests {
    use super::{Error, ErrorKind};
    use crate::ffi::header;

    /// The rows of MOONCAKE_STORE_ERROR_TABLE: (NAME, value, text).
    fn table() -> Vec<(String, i32, String)> {
        let mut rows = Vec::new();
        let start = header::TEXT
            .find("#define MOONCAKE_STORE_ERROR_TABLE(X)")
            .unwrap();
        for line in header::TEXT[start..].lines().skip(1) {
            let row = match line.trim().strip_prefix("X(") {
                Some(row) => row,
                None => break,
            };
            let row = &row[..row.rfind(')').unwrap()];
            let mut parts = row.splitn(3, ',');
            let name = parts.next().unwrap().trim().to_string();
            let value = parts.next().unwrap().trim().parse().unwrap();
            let text = parts.next().unwrap().trim().trim_matches('"').to_string();
            rows.push((name, value, text));
        }
        rows
    }

    fn camel(c_name: &str) -> String {
        c_name
            .split('_')
            .map(|w| w[..1].to_string() + &w[1..].to_ascii_lowercase())
            .collect()
    }

    #[test]
    fn every_code_of_the_table_is_a_variant_with_its_value() {
        let rows = table();
        assert!(rows.len() > 30, "parsed only {rows:?}");
        assert_eq!(rows[0], ("OK".to_string(), 0, "success".to_string()));
        let header: Vec<(String, i32)> =
            rows[1..].iter().map(|(n, v, _)| (n.clone(), *v)).collect();
        let rust: Vec<(String, i32)> = ErrorKind::ALL
            .iter()
            .map(|e| (e.name().to_string(), e.code()))
            .collect();
        assert_eq!(rust, header);
        for e in ErrorKind::ALL {
            assert_eq!(
                format!("{e:?}"),
                camel(e.name()),
                "variant name of {}",
                e.name()
            );
        }
    }

    #[test]
    fn display_is_strerror_and_matches_the_header_text() {
        for (name, value, text) in &table()[1..] {
            let e = Error::from_code(*value).unwrap();
            assert_eq!(e.name(), name);
            assert_eq!(e.to_string(), *text, "{name}");
        }
        assert_eq!(Error::ObjectNotFound.to_string(), "object not found");
        assert_eq!(
            Error::from_code(-12345).unwrap().to_string(),
            "unknown error code (-12345)"
        );
    }

    #[test]
    fn codes_round_trip() {
        assert_eq!(Error::from_code(0), None);
        for e in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(e.code()), Some(*e));
            assert_eq!(Error::from_code(e.code()).unwrap().kind(), *e);
        }
        assert_eq!(ErrorKind::from_code(-2), Some(ErrorKind::Unknown(-2)));
        assert_eq!(Error::from_code(-2).unwrap().code(), -2);
        assert_eq!(super::check(0), Ok(()));
        assert_eq!(super::check(-704), Err(Error::ObjectNotFound));
        assert_eq!(super::check_i64(42), Ok(42));
        assert_eq!(super::check_i64(-600), Err(Error::InvalidParams));
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::RpcFail);
        assert_eq!(boxed.to_string(), "master or daemon unreachable");
    }

    #[test]
    fn display_carries_the_message_and_equality_ignores_it() {
        let e = Error::InvalidParams.with_message("key is empty");
        assert_eq!(e.to_string(), "invalid parameters: key is empty");
        assert_eq!(e.message(), Some("key is empty"));
        assert_eq!(e, Error::InvalidParams);
        assert_eq!(e, ErrorKind::InvalidParams);
        assert_eq!(e.kind(), ErrorKind::InvalidParams);
        assert_eq!(Error::InvalidParams.message(), None);
        assert_eq!(Error::InvalidParams.with_message("").message(), None);
        let io: std::io::Error = e.into();
        assert_eq!(io.to_string(), "invalid parameters: key is empty");
    }
}
