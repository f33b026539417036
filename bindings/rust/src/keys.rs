//! Keys in C form: one key (`c_key`), the keys of a batch (`KeyBatch`), and putting a
//! batch's C results back in the caller's order (`merge`).

use std::ffi::CString;
use std::os::raw::{c_char, c_void};

use crate::{Error, Result};

/// A key as a NUL-terminated C string; an interior NUL is an error, never a truncated key.
pub(crate) fn c_key(key: &[u8]) -> Result<CString> {
    CString::new(key).map_err(|e| nul_refused("key", e.nul_position()))
}

pub(crate) fn c_str(s: &str) -> Result<CString> {
    CString::new(s).map_err(|e| nul_refused("a string argument", e.nul_position()))
}

/// The error of text the C ABI cannot carry: it holds a NUL byte at position.
fn nul_refused(what: &str, position: usize) -> Error {
    Error::InvalidParams.with_message(&format!(
        "{what} holds a NUL byte (at byte {position}): the C ABI takes C strings"
    ))
}

/// The keys of a batch: those that can be passed to C, and where each one came from.
pub(crate) struct KeyBatch {
    strings: Vec<CString>,
    pub(crate) pointers: Vec<*const c_char>,
    /// For each key passed to C, its index in the caller's list.
    pub(crate) index: Vec<usize>,
}

impl KeyBatch {
    /// Splits keys into valid ones and per-key errors (`InvalidParams` for a NUL byte).
    pub(crate) fn new<K: AsRef<[u8]>>(keys: &[K]) -> (KeyBatch, Vec<Option<Error>>) {
        let mut batch = KeyBatch {
            strings: Vec::with_capacity(keys.len()),
            pointers: Vec::with_capacity(keys.len()),
            index: Vec::with_capacity(keys.len()),
        };
        let mut errors = vec![None; keys.len()];
        for (i, key) in keys.iter().enumerate() {
            match c_key(key.as_ref()) {
                Ok(s) => {
                    batch.strings.push(s);
                    batch.index.push(i);
                }
                Err(e) => errors[i] = Some(e),
            }
        }
        batch.pointers = batch.strings.iter().map(|s| s.as_ptr()).collect();
        (batch, errors)
    }

    /// The C arrays of a batch write's values, one per key passed to C: the address and
    /// length of `values[index[k]]` (`*mut` only for the C type: the library reads them).
    pub(crate) fn value_buffers<V: AsRef<[u8]>>(
        &self,
        values: &[V],
    ) -> (Vec<*mut c_void>, Vec<usize>) {
        self.index
            .iter()
            .map(|&i| {
                let v = values[i].as_ref();
                (v.as_ptr() as *mut c_void, v.len())
            })
            .unzip()
    }
}

/// One result per caller key: the pre-checked error, or the C result of its entry.
pub(crate) fn merge<R: Copy, T>(
    errors: Vec<Option<Error>>,
    index: &[usize],
    results: Vec<R>,
    convert: impl Fn(R) -> Result<T>,
) -> Vec<Result<T>> {
    let mut c_results = index.iter().zip(results).peekable();
    errors
        .into_iter()
        .enumerate()
        .map(|(i, error)| match error {
            Some(e) => Err(e),
            None => {
                let (&j, rc) = c_results.next().expect("one C result per valid key");
                debug_assert_eq!(i, j);
                convert(rc)
            }
        })
        .collect()
}
