//! `Error`: the result-code table of `include/mooncake_store.h` (`MOONCAKE_STORE_ERROR_TABLE`).
use std::ffi::CStr;
use std::fmt;

use crate::ffi;

/// Defines `Error` with one variant per negative code of the table, plus `Unknown`.
macro_rules! error_table {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $c_name:literal; )*) => {
        /// A failure reported by the store: one variant per negative code of
        /// `MOONCAKE_STORE_ERROR_TABLE` (the code 0, `OK`, is `Ok(..)`), with the same numeric
        /// values as Mooncake. [`Error::code`] gives the number back; `Display` is the text of
        /// `mooncake_store_strerror`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Error {
            $( $(#[$doc])* $variant, )*
            /// A code outside the table (from a newer library or daemon).
            Unknown(i32),
        }

        impl Error {
            /// Every variant of the table, in the header's order (`Unknown` excluded).
            pub const ALL: &'static [Error] = &[$(Error::$variant),*];

            /// The numeric code, as the C functions return it.
            pub const fn code(self) -> i32 {
                match self {
                    $(Error::$variant => $code,)*
                    Error::Unknown(code) => code,
                }
            }

            /// The header's name of the code without the `MOONCAKE_STORE_` prefix, e.g.
            /// `"OBJECT_NOT_FOUND"`; `"UNKNOWN"` for [`Error::Unknown`].
            pub const fn name(self) -> &'static str {
                match self {
                    $(Error::$variant => $c_name,)*
                    Error::Unknown(_) => "UNKNOWN",
                }
            }

            /// The error for a non-zero code (`Unknown` when it is not in the table);
            /// `None` for 0 (`OK`).
            pub const fn from_code(code: i32) -> Option<Error> {
                match code {
                    0 => None,
                    $($code => Some(Error::$variant),)*
                    other => Some(Error::Unknown(other)),
                }
            }
        }
    };
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

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: mooncake_store_strerror returns a static NUL-terminated string for any code.
        let text = unsafe { CStr::from_ptr(ffi::mooncake_store_strerror(self.code())) };
        f.write_str(&text.to_string_lossy())?;
        if let Error::Unknown(code) = self {
            write!(f, " ({code})")?;
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

/// `Ok(())` for 0, the error for anything else.
pub(crate) fn check(rc: i32) -> Result<()> {
    match Error::from_code(rc) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// A non-negative count or size, or the error of a negative code.
pub(crate) fn check_i64(rc: i64) -> Result<u64> {
    u64::try_from(rc).map_err(|_| {
        let code = i32::try_from(rc).unwrap_or(i32::MIN);
        Error::from_code(code).unwrap_or(Error::Unknown(code))
    })
}

#[cfg(test)]
mod tests {
    use super::Error;
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
        let rust: Vec<(String, i32)> = Error::ALL
            .iter()
            .map(|e| (e.name().to_string(), e.code()))
            .collect();
        assert_eq!(rust, header);
        for e in Error::ALL {
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
            Error::Unknown(-12345).to_string(),
            "unknown error code (-12345)"
        );
    }

    #[test]
    fn codes_round_trip() {
        assert_eq!(Error::from_code(0), None);
        for e in Error::ALL {
            assert_eq!(Error::from_code(e.code()), Some(*e));
        }
        assert_eq!(Error::from_code(-2), Some(Error::Unknown(-2)));
        assert_eq!(Error::Unknown(-2).code(), -2);
        assert_eq!(super::check(0), Ok(()));
        assert_eq!(super::check(-704), Err(Error::ObjectNotFound));
        assert_eq!(super::check_i64(42), Ok(42));
        assert_eq!(super::check_i64(-600), Err(Error::InvalidParams));
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::RpcFail);
        assert_eq!(boxed.to_string(), "master or daemon unreachable");
    }
}
