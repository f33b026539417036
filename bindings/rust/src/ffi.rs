//! Hand-written declarations of every function of `include/mooncake_store.h`.
//!
//! The declarations are the only unsafe surface of the crate; the safe API in `lib.rs`
//! wraps them. The unit tests at the bottom parse the header and check that the set of
//! functions and every parameter and return type match it, and that every symbol resolves
//! in the linked library, so a new or changed header function fails `cargo test`.
//!
//! Each item is documented where it is defined, in `include/mooncake_store.h`.
#![allow(non_camel_case_types, missing_docs)]

use std::os::raw::{c_char, c_int, c_void};

/// `mooncake_store_t`: an opaque handle.
pub type mooncake_store_t = *mut c_void;

/// `mooncake_replicate_config_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_replicate_config_t {
    pub replica_num: usize,
    pub with_soft_pin: c_int,
    pub with_hard_pin: c_int,
    pub preferred_segments: *mut *const c_char,
    pub preferred_segments_count: usize,
}

/// `mooncake_put_config_t` (ABI 4): Mooncake's whole ReplicateConfig, sized.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_put_config_t {
    pub struct_size: usize,
    pub replica_num: usize,
    pub nof_replica_num: usize,
    pub dfs_replica_num: usize,
    pub soft_pin_ttl_ms: u64,
    pub soft_pin_action: i32,
    pub has_soft_pin_ttl: i32,
    pub with_hard_pin: i32,
    pub prefer_alloc_in_same_node: i32,
    pub preferred_segments: *mut *const c_char,
    pub preferred_segments_count: usize,
    pub preferred_segment: *const c_char,
    pub preferred_nof_segments: *mut *const c_char,
    pub preferred_nof_segments_count: usize,
    pub host_id: *const c_char,
    pub group_ids: *mut *const c_char,
    pub group_ids_count: usize,
    pub data_type: i32,
}

/// `MOONCAKE_SOFT_PIN_PRESERVE`, `_ENABLE`, `_DISABLE`.
pub const MOONCAKE_SOFT_PIN_PRESERVE: i32 = 0;
pub const MOONCAKE_SOFT_PIN_ENABLE: i32 = 1;
pub const MOONCAKE_SOFT_PIN_DISABLE: i32 = 2;
/// `MOONCAKE_PUT_CONFIG_MAX_SIZE`.
pub const MOONCAKE_PUT_CONFIG_MAX_SIZE: usize = 4096;

/// `MOONCAKE_STORE_LOCATION_SIZE`.
pub const MOONCAKE_STORE_LOCATION_SIZE: usize = 264;

/// `mooncake_replica_desc_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_replica_desc_t {
    pub kind: c_int,
    pub status: c_int,
    pub size: u64,
    pub location: [c_char; MOONCAKE_STORE_LOCATION_SIZE],
}

/// `mooncake_range_t`: one fragment of a ranged read.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mooncake_range_t {
    pub src_offset: u64,
    pub length: u64,
    pub dst_offset: u64,
}

/// `mooncake_ranged_get_t`: one key of `mooncake_store_batch_get_ranges`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_ranged_get_t {
    pub key: *const c_char,
    pub buffer: *mut c_void,
    pub buffer_size: usize,
    pub ranges: *const mooncake_range_t,
    pub range_count: usize,
    pub results_out: *mut i64,
}

/// `MOONCAKE_TENSOR_HEADER_SIZE`, `_MANIFEST_SIZE`, `_MAX_DIMS`, `_MAX_AXES`.
pub const MOONCAKE_TENSOR_HEADER_SIZE: usize = 304;
pub const MOONCAKE_TENSOR_MANIFEST_SIZE: usize = 96;
pub const MOONCAKE_TENSOR_MAX_DIMS: usize = 8;
pub const MOONCAKE_TENSOR_MAX_AXES: usize = 4;
/// `MOONCAKE_TENSOR_FULL`, `_SHARD`.
pub const MOONCAKE_TENSOR_FULL: i32 = 0;
pub const MOONCAKE_TENSOR_SHARD: i32 = 1;

/// `mooncake_tensor_axis_t`: one axis of a tensor shard.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mooncake_tensor_axis_t {
    pub kind: i32,
    pub rank: i32,
    pub size: i32,
    pub split_dim: i32,
    pub expert_id: i32,
    pub stage_id: i32,
}

/// `mooncake_tensor_header_t`: a tensor object's header, decoded.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mooncake_tensor_header_t {
    pub dtype: i32,
    pub ndim: i32,
    pub layout: i32,
    pub global_shape: [i64; MOONCAKE_TENSOR_MAX_DIMS],
    pub local_shape: [i64; MOONCAKE_TENSOR_MAX_DIMS],
    pub axis_count: u32,
    pub axes: [mooncake_tensor_axis_t; MOONCAKE_TENSOR_MAX_AXES],
    pub data_offset: u64,
    pub data_bytes: u64,
}

/// `mooncake_tensor_manifest_t`: how a split tensor was written.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mooncake_tensor_manifest_t {
    pub dtype: i32,
    pub ndim: i32,
    pub split_dim: i32,
    pub shard_count: i32,
    pub global_shape: [i64; MOONCAKE_TENSOR_MAX_DIMS],
}

/// `mooncake_put_fragment_t`: one range of a put session's value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_put_fragment_t {
    pub src: *const c_void,
    pub length: u64,
    pub dst_offset: u64,
}

/// `mooncake_session_write_t`: one key's ranges for `mooncake_store_put_session_write`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_session_write_t {
    pub key: *const c_char,
    pub fragments: *const mooncake_put_fragment_t,
    pub fragment_count: usize,
}

/// `mooncake_task_id_t`: a copy or move task's id, Mooncake's UUID.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct mooncake_task_id_t {
    pub high: u64,
    pub low: u64,
}

/// `MOONCAKE_TASK_MESSAGE_SIZE`.
pub const MOONCAKE_TASK_MESSAGE_SIZE: usize = 512;

/// `mooncake_task_info_t`: what `mooncake_store_query_task` answers.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mooncake_task_info_t {
    pub id: mooncake_task_id_t,
    pub type_: c_int,
    pub status: c_int,
    pub created_at_ms_epoch: i64,
    pub last_updated_at_ms_epoch: i64,
    pub assigned_client: mooncake_task_id_t,
    pub message: [c_char; MOONCAKE_TASK_MESSAGE_SIZE],
}

/// `MOONCAKE_STORE_ABI_VERSION`.
pub const MOONCAKE_STORE_ABI_VERSION: u32 = 5;
/// `MOONCAKE_STORE_MAX_KEY_LEN`.
pub const MOONCAKE_STORE_MAX_KEY_LEN: usize = 4096;
/// `MOONCAKE_STORE_MAX_VALUE_SIZE`.
pub const MOONCAKE_STORE_MAX_VALUE_SIZE: u64 = 4 << 30;

/// Declares the functions and, for the tests, a table of (name, C signature, address).
macro_rules! declare {
    ($( pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*) => {
        #[link(name = "mooncake_store")]
        extern "C" {
            $( pub fn $name($($arg: $ty),*) $(-> $ret)?; )*
        }

        /// Every declared function: name, return type and parameter types as Rust spells
        /// them, and its address in the linked library.
        #[cfg(test)]
        pub(crate) fn declared() -> Vec<(&'static str, &'static str, Vec<&'static str>, *const ())> {
            vec![$(
                (
                    stringify!($name),
                    declare!(@ret $($ret)?),
                    vec![$(stringify!($ty)),*],
                    $name as *const (),
                )
            ),*]
        }
    };
    (@ret) => { "void" };
    (@ret $ret:ty) => { stringify!($ret) };
}

declare! {
    pub fn mooncake_store_strerror(code: c_int) -> *const c_char;
    pub fn mooncake_store_errmsg(store: mooncake_store_t) -> *const c_char;
    pub fn mooncake_store_parse_size(text: *const c_char, out: *mut u64) -> c_int;

    // lifecycle
    pub fn mooncake_store_create() -> mooncake_store_t;
    pub fn mooncake_store_destroy(store: mooncake_store_t);
    pub fn mooncake_store_set_tenant(store: mooncake_store_t, tenant_id: *const c_char) -> c_int;
    pub fn mooncake_store_connect(store: mooncake_store_t, socket_path: *const c_char,
                                  local_buffer_size: u64) -> c_int;
    pub fn mooncake_store_setup(store: mooncake_store_t, local_hostname: *const c_char,
                                metadata_server: *const c_char, global_segment_size: u64,
                                local_buffer_size: u64, protocol: *const c_char,
                                device_name: *const c_char,
                                master_server_addr: *const c_char) -> c_int;
    pub fn mooncake_store_close(store: mooncake_store_t) -> c_int;
    pub fn mooncake_store_health_check(store: mooncake_store_t) -> c_int;
    pub fn mooncake_store_get_hostname(store: mooncake_store_t, buf_out: *mut c_char,
                                       buf_len: usize) -> c_int;

    // shared memory
    pub fn mooncake_store_alloc(store: mooncake_store_t, size: usize) -> *mut c_void;
    pub fn mooncake_store_free(store: mooncake_store_t, ptr: *mut c_void);
    pub fn mooncake_store_register_buffer(store: mooncake_store_t, buffer: *mut c_void,
                                          size: usize) -> c_int;
    pub fn mooncake_store_unregister_buffer(store: mooncake_store_t, buffer: *mut c_void) -> c_int;

    // put
    pub fn mooncake_store_put(store: mooncake_store_t, key: *const c_char, value: *const c_void,
                              size: usize, config: *const mooncake_replicate_config_t) -> c_int;
    pub fn mooncake_store_put_from(store: mooncake_store_t, key: *const c_char,
                                   buffer: *mut c_void, size: usize,
                                   config: *const mooncake_replicate_config_t) -> c_int;
    pub fn mooncake_store_batch_put_from(store: mooncake_store_t, keys: *mut *const c_char,
                                         buffers: *mut *mut c_void, sizes: *const usize,
                                         count: usize,
                                         config: *const mooncake_replicate_config_t,
                                         results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_upsert_from(store: mooncake_store_t, key: *const c_char,
                                      buffer: *mut c_void, size: usize,
                                      config: *const mooncake_replicate_config_t) -> c_int;

    // get
    pub fn mooncake_store_get_into(store: mooncake_store_t, key: *const c_char,
                                   buffer: *mut c_void, size: usize) -> i64;
    pub fn mooncake_store_batch_get_into(store: mooncake_store_t, keys: *mut *const c_char,
                                         buffers: *mut *mut c_void, sizes: *const usize,
                                         count: usize, results_out: *mut i64) -> c_int;

    // query
    pub fn mooncake_store_is_exist(store: mooncake_store_t, key: *const c_char) -> c_int;
    pub fn mooncake_store_batch_is_exist(store: mooncake_store_t, keys: *mut *const c_char,
                                         count: usize, results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_get_size(store: mooncake_store_t, key: *const c_char) -> i64;

    // remove
    pub fn mooncake_store_remove(store: mooncake_store_t, key: *const c_char,
                                 force: c_int) -> c_int;
    pub fn mooncake_store_batch_remove(store: mooncake_store_t, keys: *mut *const c_char,
                                       count: usize, force: c_int, results_out: *mut c_int)
                                       -> c_int;
    pub fn mooncake_store_remove_by_regex(store: mooncake_store_t, pattern: *const c_char,
                                          force: c_int) -> i64;
    pub fn mooncake_store_remove_all(store: mooncake_store_t, force: c_int) -> i64;

    // replicas and the SSD tier
    pub fn mooncake_store_get_replica_desc(store: mooncake_store_t, key: *const c_char,
                                           descs_out: *mut mooncake_replica_desc_t,
                                           capacity: usize, count_out: *mut usize) -> c_int;
    pub fn mooncake_store_batch_get_replica_desc(store: mooncake_store_t,
                                                 keys: *mut *const c_char, count: usize,
                                                 descs_out: *mut mooncake_replica_desc_t,
                                                 capacity_per_key: usize,
                                                 counts_out: *mut usize,
                                                 results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_set_ssd_offload(store: mooncake_store_t, mode: c_int) -> c_int;

    // ranged reads
    pub fn mooncake_store_get_ranges(store: mooncake_store_t, key: *const c_char,
                                     buffer: *mut c_void, buffer_size: usize,
                                     ranges: *const mooncake_range_t, range_count: usize,
                                     results_out: *mut i64) -> i64;
    pub fn mooncake_store_batch_get_ranges(store: mooncake_store_t,
                                           gets: *const mooncake_ranged_get_t, count: usize,
                                           results_out: *mut i64) -> c_int;
    // put configuration, version 4
    pub fn mooncake_store_put_config_init(config: *mut mooncake_put_config_t) -> c_int;
    pub fn mooncake_store_put_ex(store: mooncake_store_t, key: *const c_char,
                                 value: *const c_void, size: usize,
                                 config: *const mooncake_put_config_t) -> c_int;
    pub fn mooncake_store_put_from_ex(store: mooncake_store_t, key: *const c_char,
                                      buffer: *mut c_void, size: usize,
                                      config: *const mooncake_put_config_t) -> c_int;
    pub fn mooncake_store_upsert_from_ex(store: mooncake_store_t, key: *const c_char,
                                         buffer: *mut c_void, size: usize,
                                         config: *const mooncake_put_config_t) -> c_int;
    pub fn mooncake_store_batch_put_from_ex(store: mooncake_store_t, keys: *mut *const c_char,
                                            buffers: *mut *mut c_void, sizes: *const usize,
                                            count: usize, config: *const mooncake_put_config_t,
                                            results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_batch_upsert_from(store: mooncake_store_t, keys: *mut *const c_char,
                                            buffers: *mut *mut c_void, sizes: *const usize,
                                            count: usize, config: *const mooncake_put_config_t,
                                            results_out: *mut c_int) -> c_int;
    // segments and replica clearing
    pub fn mooncake_store_batch_replica_clear(store: mooncake_store_t, keys: *mut *const c_char,
                                              count: usize, segment_name: *const c_char,
                                              results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_mount_segment(store: mooncake_store_t, buffer: *mut c_void, size: u64,
                                        segment_id_out: *mut u64) -> c_int;
    pub fn mooncake_store_allocate_and_mount_segment(store: mooncake_store_t, size: u64,
                                                     segment_id_out: *mut u64,
                                                     allocated_size_out: *mut u64) -> c_int;
    pub fn mooncake_store_unmount_segment(store: mooncake_store_t, segment_id: u64,
                                          moved_out: *mut u64, dropped_out: *mut u64) -> c_int;
    pub fn mooncake_store_unmount_local_disk_segment(store: mooncake_store_t) -> c_int;
    // device memory
    pub fn mooncake_store_memory_kind(store: mooncake_store_t, buffer: *const c_void) -> c_int;
    pub fn mooncake_store_copy_memory(store: mooncake_store_t, dst: *mut c_void,
                                      src: *const c_void, size: usize) -> c_int;
    // tensors
    pub fn mooncake_store_tensor_dtype_size(dtype: i32) -> usize;
    pub fn mooncake_store_tensor_header_init(header: *mut mooncake_tensor_header_t, dtype: i32,
                                             ndim: i32, shape: *const i64) -> c_int;
    pub fn mooncake_store_tensor_header_encode(header: *const mooncake_tensor_header_t,
                                               out: *mut c_void, out_size: usize) -> c_int;
    pub fn mooncake_store_tensor_header_decode(buf: *const c_void, buf_size: usize,
                                               object_size: u64,
                                               out: *mut mooncake_tensor_header_t) -> c_int;
    pub fn mooncake_store_tensor_manifest_encode(manifest: *const mooncake_tensor_manifest_t,
                                                 out: *mut c_void, out_size: usize) -> c_int;
    pub fn mooncake_store_tensor_manifest_decode(buf: *const c_void, buf_size: usize,
                                                 out: *mut mooncake_tensor_manifest_t) -> c_int;
    pub fn mooncake_store_tensor_shard_range(dim_size: i64, rank: i32, count: i32,
                                             start: *mut i64, extent: *mut i64) -> c_int;
    pub fn mooncake_store_tensor_key(kind: c_int, base: *const c_char,
                                     axes: *const mooncake_tensor_axis_t, axis_count: usize,
                                     out: *mut c_char, out_size: usize) -> i64;
    // put sessions
    pub fn mooncake_store_put_session_start(store: mooncake_store_t, keys: *mut *const c_char,
                                            sizes: *const usize, count: usize,
                                            config: *const mooncake_put_config_t,
                                            results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_put_session_write(store: mooncake_store_t,
                                            writes: *const mooncake_session_write_t,
                                            count: usize, results_out: *mut i64) -> c_int;
    pub fn mooncake_store_put_session_end(store: mooncake_store_t, keys: *mut *const c_char,
                                          count: usize, results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_put_session_revoke(store: mooncake_store_t,
                                             keys: *mut *const c_char, count: usize,
                                             results_out: *mut c_int) -> c_int;
    pub fn mooncake_store_disk_read_count(store: mooncake_store_t) -> i64;
    // files lent by descriptor, copy and move tasks
    pub fn mooncake_store_mount_file_segment(store: mooncake_store_t, fd: c_int, offset: u64,
                                             size: u64, segment_id_out: *mut u64) -> c_int;
    pub fn mooncake_store_create_copy_task(store: mooncake_store_t, key: *const c_char,
                                           targets: *mut *const c_char, count: usize,
                                           id_out: *mut mooncake_task_id_t) -> c_int;
    pub fn mooncake_store_create_move_task(store: mooncake_store_t, key: *const c_char,
                                           source: *const c_char, target: *const c_char,
                                           id_out: *mut mooncake_task_id_t) -> c_int;
    pub fn mooncake_store_query_task(store: mooncake_store_t, id: mooncake_task_id_t,
                                     out: *mut mooncake_task_info_t) -> c_int;
}

#[cfg(test)]
pub(crate) mod header {
    //! A small parser for include/mooncake_store.h, shared by the unit tests.

    /// The header's text, read at compile time so an edited header rebuilds the tests.
    pub const TEXT: &str = include_str!("../../../include/mooncake_store.h");

    /// The header without comments and preprocessor lines (continuations included).
    pub fn code() -> String {
        let mut no_comments = String::new();
        let mut rest = TEXT;
        loop {
            let block = rest.find("/*");
            let line = rest.find("//");
            match (block, line) {
                (Some(b), l) if l.map_or(true, |l| b < l) => {
                    no_comments.push_str(&rest[..b]);
                    let end = rest[b..].find("*/").expect("unterminated comment") + b + 2;
                    no_comments.push(' ');
                    rest = &rest[end..];
                }
                (_, Some(l)) => {
                    no_comments.push_str(&rest[..l]);
                    rest = &rest[l..];
                    rest = &rest[rest.find('\n').unwrap_or(rest.len())..];
                }
                _ => {
                    no_comments.push_str(rest);
                    break;
                }
            }
        }
        let mut out = String::new();
        let mut continued = false;
        for line in no_comments.lines() {
            let directive = continued || line.trim_start().starts_with('#');
            continued = directive && line.trim_end().ends_with('\\');
            if !directive {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// C type spelling normalized: single spaces, no space before '*'.
    pub fn normalize(c_type: &str) -> String {
        let spaced = c_type.split_whitespace().collect::<Vec<_>>().join(" ");
        spaced.replace(" *", "*")
    }

    /// Every function declared by the header: (name, return type, parameter types).
    pub fn functions() -> Vec<(String, String, Vec<String>)> {
        let code = code();
        let mut out = Vec::new();
        for stmt in code.split([';', '{', '}']) {
            let stmt = stmt.trim();
            let open = match stmt.find('(') {
                Some(open) => open,
                None => continue,
            };
            let head = stmt[..open].trim_end();
            let name_start = head
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &head[name_start..];
            if !name.starts_with("mooncake_store_") {
                continue;
            }
            let ret = normalize(&head[..name_start]);
            let close = stmt.rfind(')').expect("unbalanced parentheses");
            let params: Vec<String> = stmt[open + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|p| *p != "void" && !p.is_empty())
                .map(|p| {
                    // Drop the parameter's name: the trailing identifier.
                    let cut = p
                        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .expect("parameter without a type");
                    normalize(&p[..=cut])
                })
                .collect();
            out.push((name.to_string(), ret, params));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{declared, header};
    use std::collections::BTreeSet;

    /// The C spelling of a Rust type used in the declarations above.
    fn c_type(rust: &str) -> String {
        let rust = rust.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(inner) = rust.strip_prefix("*mut ") {
            return format!("{}*", c_type(inner));
        }
        if let Some(inner) = rust.strip_prefix("*const ") {
            let inner_c = c_type(inner);
            return if inner_c.ends_with('*') {
                format!("{inner_c}const*")
            } else {
                format!("const {inner_c}*")
            };
        }
        match rust.as_str() {
            "c_char" => "char",
            "c_int" => "int",
            "c_void" => "void",
            "void" => "void",
            "usize" => "size_t",
            "u64" => "uint64_t",
            "i64" => "int64_t",
            "mooncake_store_t" => "mooncake_store_t",
            "mooncake_replicate_config_t" => "mooncake_replicate_config_t",
            "mooncake_put_config_t" => "mooncake_put_config_t",
            "mooncake_replica_desc_t" => "mooncake_replica_desc_t",
            "mooncake_range_t" => "mooncake_range_t",
            "mooncake_ranged_get_t" => "mooncake_ranged_get_t",
            "i32" => "int32_t",
            "mooncake_tensor_axis_t" => "mooncake_tensor_axis_t",
            "mooncake_tensor_header_t" => "mooncake_tensor_header_t",
            "mooncake_tensor_manifest_t" => "mooncake_tensor_manifest_t",
            "mooncake_put_fragment_t" => "mooncake_put_fragment_t",
            "mooncake_session_write_t" => "mooncake_session_write_t",
            "mooncake_task_id_t" => "mooncake_task_id_t",
            "mooncake_task_info_t" => "mooncake_task_info_t",
            other => panic!("no C spelling for the Rust type {other}"),
        }
        .to_string()
    }

    #[test]
    fn header_parser_finds_the_functions() {
        let functions = header::functions();
        assert!(functions.len() >= 24, "parsed only {functions:?}");
        let strerror = functions
            .iter()
            .find(|f| f.0 == "mooncake_store_strerror")
            .unwrap();
        assert_eq!(strerror.1, "const char*");
        assert_eq!(strerror.2, vec!["int".to_string()]);
    }

    #[test]
    fn every_header_function_is_declared_and_nothing_else() {
        let header: BTreeSet<String> = header::functions().into_iter().map(|f| f.0).collect();
        let rust: BTreeSet<String> = declared().into_iter().map(|f| f.0.to_string()).collect();
        let missing: Vec<_> = header.difference(&rust).collect();
        let extra: Vec<_> = rust.difference(&header).collect();
        assert!(
            missing.is_empty(),
            "header functions without a Rust declaration: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "Rust declarations not in the header: {extra:?}"
        );
        assert_eq!(
            declared().len(),
            header.len(),
            "a function is declared twice"
        );
    }

    #[test]
    fn every_declaration_matches_the_header_signature() {
        let header = header::functions();
        for (name, ret, params, _) in declared() {
            let (_, c_ret, c_params) = header.iter().find(|f| f.0 == name).unwrap();
            assert_eq!(&c_type(ret), c_ret, "return type of {name}");
            let rust_params: Vec<String> = params.iter().map(|p| c_type(p)).collect();
            assert_eq!(&rust_params, c_params, "parameter types of {name}");
        }
    }

    #[test]
    fn every_declared_symbol_resolves() {
        for (name, _, _, address) in declared() {
            assert!(!address.is_null(), "{name} did not resolve");
        }
    }

    #[test]
    fn constants_match_the_header() {
        let code = header::TEXT;
        let define = |name: &str| -> String {
            let line = code
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not in the header"));
            line[format!("#define {name} ").len()..].trim().to_string()
        };
        assert_eq!(
            define("MOONCAKE_STORE_ABI_VERSION"),
            super::MOONCAKE_STORE_ABI_VERSION.to_string()
        );
        assert_eq!(
            define("MOONCAKE_STORE_MAX_KEY_LEN"),
            super::MOONCAKE_STORE_MAX_KEY_LEN.to_string()
        );
        assert_eq!(
            define("MOONCAKE_STORE_LOCATION_SIZE"),
            super::MOONCAKE_STORE_LOCATION_SIZE.to_string()
        );
        assert_eq!(define("MOONCAKE_REPLICA_MEMORY"), "0");
        assert_eq!(define("MOONCAKE_REPLICA_DISK"), "1");
        assert_eq!(define("MOONCAKE_SSD_OFFLOAD_DEFAULT").split_whitespace().next(), Some("0"));
        assert_eq!(define("MOONCAKE_SSD_OFFLOAD_ON").split_whitespace().next(), Some("1"));
        assert_eq!(define("MOONCAKE_SSD_OFFLOAD_OFF").split_whitespace().next(), Some("2"));
        assert_eq!(define("MOONCAKE_STORE_MAX_VALUE_SIZE"), "(4ULL << 30)");
        assert_eq!(super::MOONCAKE_STORE_MAX_VALUE_SIZE, 4u64 << 30);
    }

    // `std::mem::offset_of!` needs Rust 1.77: the field's address minus the struct's, in
    // an uninitialized value (addr_of! takes the address without reading or referencing).
    macro_rules! offset_of {
        ($ty:ty, $field:ident) => {{
            let value = std::mem::MaybeUninit::<$ty>::uninit();
            let base = value.as_ptr();
            // SAFETY: `base` points to a live (if uninitialized) allocation of the
            // struct; addr_of! only computes the field's address within it.
            let field = unsafe { std::ptr::addr_of!((*base).$field) };
            field as usize - base as usize
        }};
    }

    /// The fields of `typedef struct <name> { ... }` in the header, normalized.
    fn struct_fields(name: &str) -> Vec<String> {
        let code = header::code();
        let start = code.find(&format!("typedef struct {name} {{")).unwrap();
        let body = &code[start..code[start..].find('}').unwrap() + start];
        body.split(['{', ';'])
            .skip(1)
            .map(|f| f.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|f| !f.is_empty())
            .collect()
    }

    #[test]
    fn replica_desc_layout_matches_the_header() {
        assert_eq!(
            struct_fields("mooncake_replica_desc"),
            [
                "int kind",
                "int status",
                "uint64_t size",
                "char location[MOONCAKE_STORE_LOCATION_SIZE]",
            ]
        );
        use std::mem::size_of;
        type D = super::mooncake_replica_desc_t;
        assert_eq!(offset_of!(D, kind), 0);
        assert_eq!(offset_of!(D, status), 4);
        assert_eq!(offset_of!(D, size), 8);
        assert_eq!(offset_of!(D, location), 16);
        assert_eq!(size_of::<D>(), 16 + super::MOONCAKE_STORE_LOCATION_SIZE);
    }

    #[test]
    fn replicate_config_layout_matches_the_header() {
        let fields = struct_fields("mooncake_replicate_config");
        assert_eq!(
            fields,
            [
                "size_t replica_num",
                "int with_soft_pin",
                "int with_hard_pin",
                "const char **preferred_segments",
                "size_t preferred_segments_count",
            ]
        );
        use std::mem::size_of;
        type C = super::mooncake_replicate_config_t;
        assert_eq!(offset_of!(C, replica_num), 0);
        assert_eq!(offset_of!(C, with_soft_pin), size_of::<usize>());
        assert_eq!(offset_of!(C, with_hard_pin), size_of::<usize>() + 4);
        assert_eq!(offset_of!(C, preferred_segments), size_of::<usize>() + 8);
        assert_eq!(size_of::<C>(), 3 * size_of::<usize>() + 8);
    }
    #[test]
    fn range_structs_match_the_header() {
        assert_eq!(
            struct_fields("mooncake_range"),
            ["uint64_t src_offset", "uint64_t length", "uint64_t dst_offset"]
        );
        assert_eq!(
            struct_fields("mooncake_ranged_get"),
            [
                "const char *key",
                "void *buffer",
                "size_t buffer_size",
                "const mooncake_range_t *ranges",
                "size_t range_count",
                "int64_t *results_out",
            ]
        );
        use std::mem::size_of;
        type R = super::mooncake_range_t;
        assert_eq!(offset_of!(R, length), 8);
        assert_eq!(offset_of!(R, dst_offset), 16);
        assert_eq!(size_of::<R>(), 24);
        type G = super::mooncake_ranged_get_t;
        let w = size_of::<usize>();
        assert_eq!(offset_of!(G, buffer), w);
        assert_eq!(offset_of!(G, buffer_size), 2 * w);
        assert_eq!(offset_of!(G, ranges), 3 * w);
        assert_eq!(offset_of!(G, range_count), 4 * w);
        assert_eq!(offset_of!(G, results_out), 5 * w);
        assert_eq!(size_of::<G>(), 6 * w);
    }

    #[test]
    fn session_structs_match_the_header() {
        assert_eq!(
            struct_fields("mooncake_put_fragment"),
            ["const void *src", "uint64_t length", "uint64_t dst_offset"]
        );
        assert_eq!(
            struct_fields("mooncake_session_write"),
            [
                "const char *key",
                "const mooncake_put_fragment_t *fragments",
                "size_t fragment_count",
            ]
        );
        use std::mem::size_of;
        type F = super::mooncake_put_fragment_t;
        assert_eq!(offset_of!(F, length), size_of::<usize>());
        assert_eq!(offset_of!(F, dst_offset), size_of::<usize>() + 8);
        type W = super::mooncake_session_write_t;
        let w = size_of::<usize>();
        assert_eq!(offset_of!(W, fragments), w);
        assert_eq!(offset_of!(W, fragment_count), 2 * w);
        assert_eq!(size_of::<W>(), 3 * w);
    }

    #[test]
    fn task_layouts_match_the_header() {
        assert_eq!(struct_fields("mooncake_task_id"), ["uint64_t high", "uint64_t low"]);
        assert_eq!(
            struct_fields("mooncake_task_info"),
            [
                "mooncake_task_id_t id",
                "int type",
                "int status",
                "int64_t created_at_ms_epoch",
                "int64_t last_updated_at_ms_epoch",
                "mooncake_task_id_t assigned_client",
                "char message[MOONCAKE_TASK_MESSAGE_SIZE]",
            ]
        );
        assert!(super::header::TEXT.contains(&format!(
            "#define MOONCAKE_TASK_MESSAGE_SIZE {}",
            super::MOONCAKE_TASK_MESSAGE_SIZE
        )));
        use std::mem::size_of;
        type I = super::mooncake_task_info_t;
        assert_eq!(offset_of!(I, type_), 16);
        assert_eq!(offset_of!(I, created_at_ms_epoch), 24);
        assert_eq!(offset_of!(I, assigned_client), 40);
        assert_eq!(offset_of!(I, message), 56);
        assert_eq!(size_of::<I>(), 56 + super::MOONCAKE_TASK_MESSAGE_SIZE);
    }

    #[test]
    fn put_config_layout_matches_the_header() {
        let fields = struct_fields("mooncake_put_config");
        assert_eq!(
            fields,
            [
                "size_t struct_size",
                "size_t replica_num",
                "size_t nof_replica_num",
                "size_t dfs_replica_num",
                "uint64_t soft_pin_ttl_ms",
                "int32_t soft_pin_action",
                "int32_t has_soft_pin_ttl",
                "int32_t with_hard_pin",
                "int32_t prefer_alloc_in_same_node",
                "const char **preferred_segments",
                "size_t preferred_segments_count",
                "const char *preferred_segment",
                "const char **preferred_nof_segments",
                "size_t preferred_nof_segments_count",
                "const char *host_id",
                "const char **group_ids",
                "size_t group_ids_count",
                "int32_t data_type",
            ]
        );
        // The library's own idea of the defaults and the size.
        let mut c = std::mem::MaybeUninit::<super::mooncake_put_config_t>::zeroed();
        // SAFETY: a writable struct of the header's layout.
        assert_eq!(unsafe { super::mooncake_store_put_config_init(c.as_mut_ptr()) }, 0);
        // SAFETY: init filled every field.
        let c = unsafe { c.assume_init() };
        assert_eq!(c.struct_size, std::mem::size_of::<super::mooncake_put_config_t>());
        assert_eq!((c.replica_num, c.soft_pin_action), (1, super::MOONCAKE_SOFT_PIN_PRESERVE));
        assert_eq!(offset_of!(super::mooncake_put_config_t, soft_pin_action), 40);
    }

    #[test]
    fn tensor_structs_match_the_header() {
        assert_eq!(
            struct_fields("mooncake_tensor_axis"),
            ["int32_t kind", "int32_t rank", "int32_t size", "int32_t split_dim",
             "int32_t expert_id", "int32_t stage_id"]
        );
        assert_eq!(
            struct_fields("mooncake_tensor_header"),
            [
                "int32_t dtype",
                "int32_t ndim",
                "int32_t layout",
                "int64_t global_shape[MOONCAKE_TENSOR_MAX_DIMS]",
                "int64_t local_shape[MOONCAKE_TENSOR_MAX_DIMS]",
                "uint32_t axis_count",
                "mooncake_tensor_axis_t axes[MOONCAKE_TENSOR_MAX_AXES]",
                "uint64_t data_offset",
                "uint64_t data_bytes",
            ]
        );
        assert_eq!(
            struct_fields("mooncake_tensor_manifest"),
            ["int32_t dtype", "int32_t ndim", "int32_t split_dim", "int32_t shard_count",
             "int64_t global_shape[MOONCAKE_TENSOR_MAX_DIMS]"]
        );
        use std::mem::size_of;
        type H = super::mooncake_tensor_header_t;
        assert_eq!(size_of::<super::mooncake_tensor_axis_t>(), 24);
        assert_eq!(offset_of!(H, global_shape), 16);
        assert_eq!(offset_of!(H, axis_count), 144);
        assert_eq!(offset_of!(H, axes), 148);
        assert_eq!(offset_of!(H, data_offset), 248);
        assert_eq!(size_of::<H>(), 264);
        assert_eq!(size_of::<super::mooncake_tensor_manifest_t>(), 80);
    }
}
