//! [`Store`]: the handle of the C ABI, its lifecycle (connect, setup, close, health) and
//! its drop. The data methods are in `ops.rs`, the pool's in `pool.rs`.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_void;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::error::{check, check_i64};
use crate::keys::c_str;
use crate::{ffi, Error, PoolBuf, Result};

/// A connection to the local `mooncaked` daemon plus one shared-memory pool: a
/// `mooncake_store_t` handle.
///
/// Every method takes `&self`: one `Store` is meant to be shared by many threads (it is
/// `Send + Sync`; put it in an `Arc` or use scoped threads), and calls from different threads
/// are in flight at once. Dropping the store closes it and frees the handle
/// (`mooncake_store_destroy`).
///
/// Keys are anything that is `AsRef<[u8]>` (`&str`, `String`, `&[u8]`, `Vec<u8>`, byte
/// arrays): 1 to 4096 bytes, any byte but NUL. A key with an interior NUL byte is refused with
/// [`Error::InvalidParams`] before anything reaches the library, as are empty and over-long
/// keys (by the library).
pub struct Store {
    pub(crate) handle: NonNull<c_void>,
}

// SAFETY: the C ABI is thread-safe on one handle ("Every function is thread-safe on one
// handle; many threads may share a handle and keep many requests in flight at once"), and a
// handle is not tied to the thread that created it.
unsafe impl Send for Store {}
// SAFETY: as above; every method takes &self and the library synchronizes internally.
unsafe impl Sync for Store {}

// Compile-time proof that `Store` and `PoolBuf` can be shared across threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<PoolBuf<'static>>();
};

/// What `health_check` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Connected, and the daemon reaches its master (0).
    Ok,
    /// Not connected, closed, or the daemon is gone (1).
    NotConnected,
    /// The daemon is up but cannot reach its master (2).
    MasterUnreachable,
}

impl Store {
    pub(crate) fn create() -> Result<Store> {
        // SAFETY: no arguments; NULL only when out of memory.
        let handle = unsafe { ffi::mooncake_store_create() };
        NonNull::new(handle)
            .map(|handle| Store { handle })
            .ok_or(Error::InternalError)
    }

    /// A handle whose connects name tenant_id.
    fn create_in(tenant_id: &str) -> Result<Store> {
        let tenant = c_str(tenant_id)?;
        let store = Store::create()?;
        // SAFETY: a live handle and a NUL-terminated id.
        store.check(unsafe { ffi::mooncake_store_set_tenant(store.raw(), tenant.as_ptr()) })?;
        Ok(store)
    }

    pub(crate) fn raw(&self) -> ffi::mooncake_store_t {
        self.handle.as_ptr()
    }

    /// e, a failure of a call just made on this store by this thread, with why: the
    /// library's `mooncake_store_errmsg`, which it keeps per handle and per thread, unless it
    /// says no more than the code ("object not found (-704)").
    pub(crate) fn explain(&self, e: Error) -> Error {
        // SAFETY: a live handle; the text is NUL-terminated and valid until this thread's
        // next call on the handle, and copied at once. strerror's is static.
        let (why, bare) = unsafe {
            (
                CStr::from_ptr(ffi::mooncake_store_errmsg(self.raw())).to_string_lossy(),
                CStr::from_ptr(ffi::mooncake_store_strerror(e.code())).to_string_lossy(),
            )
        };
        if why == format!("{bare} ({})", e.code()) {
            return e;
        }
        e.with_message(&why)
    }

    /// [`check`] of a call on this store, its error explained.
    pub(crate) fn check(&self, rc: i32) -> Result<()> {
        check(rc).map_err(|e| self.explain(e))
    }

    /// [`check_i64`] of a call on this store, its error explained.
    pub(crate) fn check_i64(&self, rc: i64) -> Result<u64> {
        check_i64(rc).map_err(|e| self.explain(e))
    }

    /// Connects to the daemon's Unix socket and creates a pool of `local_buffer_size` bytes
    /// shared with it (`mooncake_store_connect`). `socket` `None` means `$MOONCAKE_SOCKET`,
    /// else `/run/mooncake/mooncaked.sock`.
    ///
    /// A pool of 0 bytes allows queries and removes only: every put and get fails with
    /// [`Error::InvalidParams`]. Any non-zero pool carries values of any size (larger ones
    /// are streamed through it in chunks).
    ///
    /// Errors: [`Error::RpcFail`] when no daemon answers, [`Error::InvalidParams`] on an ABI
    /// version mismatch or a path with a NUL byte.
    pub fn connect(socket: Option<&Path>, local_buffer_size: u64) -> Result<Store> {
        Store::connect_as(socket, local_buffer_size, "")
    }

    /// [`Store::connect`] in a tenant (`mooncake_store_set_tenant`): the store's keys are
    /// the tenant's, a key space no other tenant sees, reads, removes or matches (the same
    /// key in two tenants is two objects). `tenant_id` is 1 to 64 characters of
    /// `[A-Za-z0-9_.-]`; `""` names none (the daemon's tenant for this process's uid, if
    /// its `--tenant_uids` lists one, else the default tenant).
    ///
    /// Errors: as [`Store::connect`]; [`Error::InvalidParams`] for a malformed id,
    /// [`Error::PermissionDenied`] when the daemon keeps the tenant for other uids.
    pub fn connect_as(
        socket: Option<&Path>,
        local_buffer_size: u64,
        tenant_id: &str,
    ) -> Result<Store> {
        let socket = socket
            .map(|p| CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::InvalidParams))
            .transpose()?;
        let store = Store::create_in(tenant_id)?;
        let path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        // SAFETY: a live handle and a NUL-terminated path (or NULL).
        store.check(unsafe { ffi::mooncake_store_connect(store.raw(), path, local_buffer_size) })?;
        Ok(store)
    }

    /// The Mooncake-compatible entry (`mooncake_store_setup`): connects to the local daemon
    /// like [`Store::connect`] with `None`. `global_segment_size > 0` asks the daemon to
    /// mount that much extra memory for this store (unmounted, and its objects dropped, when
    /// the store closes); a non-empty `master_server_addr` must match the daemon's master
    /// (else [`Error::InvalidParams`]). `local_hostname` names the store and the memory it
    /// lends, as Mooncake's segment name (`"host:port"`; without a port one is picked and
    /// held until close; `""` names none): [`get_hostname`](Store::get_hostname) answers it,
    /// and copy and move tasks address its memory by it. `metadata_server`, `protocol` and
    /// `device_name` are accepted for compatibility (the daemon's own).
    pub fn setup(
        local_hostname: &str,
        metadata_server: &str,
        global_segment_size: u64,
        local_buffer_size: u64,
        protocol: &str,
        device_name: &str,
        master_server_addr: &str,
    ) -> Result<Store> {
        Store::setup_as(
            local_hostname,
            metadata_server,
            global_segment_size,
            local_buffer_size,
            protocol,
            device_name,
            master_server_addr,
            "",
        )
    }

    /// [`Store::setup`] in a tenant, as [`Store::connect_as`] names one.
    #[allow(clippy::too_many_arguments)]
    pub fn setup_as(
        local_hostname: &str,
        metadata_server: &str,
        global_segment_size: u64,
        local_buffer_size: u64,
        protocol: &str,
        device_name: &str,
        master_server_addr: &str,
        tenant_id: &str,
    ) -> Result<Store> {
        let hostname = c_str(local_hostname)?;
        let metadata = c_str(metadata_server)?;
        let protocol = c_str(protocol)?;
        let device = c_str(device_name)?;
        let master = c_str(master_server_addr)?;
        let store = Store::create_in(tenant_id)?;
        // SAFETY: a live handle and NUL-terminated strings that outlive the call.
        store.check(unsafe {
            ffi::mooncake_store_setup(
                store.raw(),
                hostname.as_ptr(),
                metadata.as_ptr(),
                global_segment_size,
                local_buffer_size,
                protocol.as_ptr(),
                device.as_ptr(),
                master.as_ptr(),
            )
        })?;
        Ok(store)
    }

    /// Disconnects (`mooncake_store_close`): unfinished puts are revoked. Safe to call twice;
    /// later calls fail with [`Error::InvalidParams`]. The pool stays mapped, so live
    /// [`PoolBuf`]s stay valid until the store is dropped.
    pub fn close(&self) -> Result<()> {
        // SAFETY: a live handle.
        self.check(unsafe { ffi::mooncake_store_close(self.raw()) })
    }

    /// Whether the store is connected and its daemon reaches the master.
    pub fn health_check(&self) -> Result<Health> {
        // SAFETY: a live handle.
        match unsafe { ffi::mooncake_store_health_check(self.raw()) } {
            0 => Ok(Health::Ok),
            1 => Ok(Health::NotConnected),
            2 => Ok(Health::MasterUnreachable),
            rc => Err(self.explain(Error::from_code(rc).unwrap_or(Error::InternalError))),
        }
    }

    /// The daemon's transfer endpoint, `"host:port"`.
    pub fn get_hostname(&self) -> Result<String> {
        let mut len = 256;
        loop {
            let mut buf = vec![0u8; len];
            // SAFETY: a live handle and a writable buffer of buf.len() bytes.
            let rc = unsafe {
                ffi::mooncake_store_get_hostname(self.raw(), buf.as_mut_ptr().cast(), buf.len())
            };
            match self.check(rc) {
                Ok(()) => {
                    // The text up to its first NUL (none: the library broke its contract).
                    let nul = buf
                        .iter()
                        .position(|&b| b == 0)
                        .ok_or(Error::InternalError)?;
                    return Ok(String::from_utf8_lossy(&buf[..nul]).into_owned());
                }
                // -600: the buffer was too small (or the store is not connected).
                Err(e) if e == Error::InvalidParams && len < 65536 => len *= 16,
                Err(e) => return Err(e),
            }
        }
    }

    /// The raw `mooncake_store_t` handle, for calling [`ffi`] functions directly. It stays
    /// owned by this `Store`.
    pub fn as_raw(&self) -> ffi::mooncake_store_t {
        self.raw()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle is live and no PoolBuf borrows the store any more; destroy
        // closes it, unmaps the pool and frees the handle.
        unsafe { ffi::mooncake_store_destroy(self.raw()) }
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("handle", &self.handle)
            .finish()
    }
}
