//! Tensors in Mooncake's layout: [`Tensor`] (an element type, a shape and the elements'
//! bytes) stored as one object -- Mooncake's 304-byte tensor header, then the elements --
//! so that a tensor put here is read by Mooncake's Python client (`get_tensor`) and every
//! other binding, and the other way round. The header is the C ABI's to write and read
//! (`mooncake_store_tensor_header_*`, docs/mooncake-api.md "Tensors"); nothing here knows
//! an offset.

use std::ffi::CStr;
use std::os::raw::c_void;

use crate::{ffi, Error, Result, Store};

/// The element types of Mooncake's tensor objects, with its codes ([`Dtype::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 0
    Float32,
    /// 1
    Float64,
    /// 2
    Int8,
    /// 3
    Uint8,
    /// 4
    Int16,
    /// 5
    Uint16,
    /// 6
    Int32,
    /// 7
    Uint32,
    /// 8
    Int64,
    /// 9
    Uint64,
    /// 10: one byte, 0 or 1
    Bool,
    /// 11
    Float16,
    /// 12
    Bfloat16,
    /// 13
    Float8E4m3,
    /// 14
    Float8E5m2,
}

const DTYPES: [Dtype; 15] = [
    Dtype::Float32,
    Dtype::Float64,
    Dtype::Int8,
    Dtype::Uint8,
    Dtype::Int16,
    Dtype::Uint16,
    Dtype::Int32,
    Dtype::Uint32,
    Dtype::Int64,
    Dtype::Uint64,
    Dtype::Bool,
    Dtype::Float16,
    Dtype::Bfloat16,
    Dtype::Float8E4m3,
    Dtype::Float8E5m2,
];

impl Dtype {
    /// Mooncake's code (`MOONCAKE_DTYPE_*`).
    pub fn code(self) -> i32 {
        DTYPES.iter().position(|&d| d == self).unwrap_or(0) as i32
    }

    /// The type of a code, `None` for one that names none.
    pub fn from_code(code: i32) -> Option<Dtype> {
        usize::try_from(code)
            .ok()
            .and_then(|i| DTYPES.get(i).copied())
    }

    /// The bytes of one element.
    pub fn size(self) -> usize {
        // SAFETY: a pure function of its argument.
        unsafe { ffi::mooncake_store_tensor_dtype_size(self.code()) }
    }
}

/// A tensor: its element type, its shape (at most 8 dimensions) and its elements' bytes,
/// row-major and little-endian (`data.len()` is the product of the shape times the
/// element's size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// The element type.
    pub dtype: Dtype,
    /// The shape; empty for a scalar.
    pub shape: Vec<i64>,
    /// The elements' bytes.
    pub data: Vec<u8>,
}

/// A refusal of one of the library's handle-less tensor calls, with its reason.
fn refused(rc: i32) -> Error {
    let e = Error::from_code(rc).unwrap_or(Error::InternalError);
    // SAFETY: errmsg(NULL) is the calling thread's message of its last handle-less call:
    // NUL-terminated, valid until its next one, and copied at once.
    let why = unsafe { CStr::from_ptr(ffi::mooncake_store_errmsg(std::ptr::null_mut())) };
    e.with_message(&why.to_string_lossy())
}

fn check_tensor_call(rc: i32) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(refused(rc))
    }
}

impl Tensor {
    /// The tensor object's bytes: Mooncake's header, then the elements.
    ///
    /// Errors: [`Error::InvalidParams`] (with why) for more than 8 dimensions, a negative
    /// one, or data that is not the shape's elements.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let ndim = i32::try_from(self.shape.len()).map_err(|_| Error::InvalidParams)?;
        let mut header = ffi::mooncake_tensor_header_t::default();
        // SAFETY: a writable header and ndim dimensions at shape.
        check_tensor_call(unsafe {
            ffi::mooncake_store_tensor_header_init(
                &mut header,
                self.dtype.code(),
                ndim,
                self.shape.as_ptr(),
            )
        })?;
        if header.data_bytes != self.data.len() as u64 {
            return Err(Error::InvalidParams.with_message(&format!(
                "the tensor's data is {} bytes; its shape {:?} of {:?} is {} bytes",
                self.data.len(),
                self.shape,
                self.dtype,
                header.data_bytes
            )));
        }
        let mut bytes = vec![0u8; ffi::MOONCAKE_TENSOR_HEADER_SIZE + self.data.len()];
        // SAFETY: a valid header and MOONCAKE_TENSOR_HEADER_SIZE writable bytes.
        check_tensor_call(unsafe {
            ffi::mooncake_store_tensor_header_encode(
                &header,
                bytes.as_mut_ptr().cast::<c_void>(),
                ffi::MOONCAKE_TENSOR_HEADER_SIZE,
            )
        })?;
        bytes[ffi::MOONCAKE_TENSOR_HEADER_SIZE..].copy_from_slice(&self.data);
        Ok(bytes)
    }

    /// The tensor a tensor object's bytes hold (a shard's elements, for a shard: its local
    /// shape).
    ///
    /// Errors: [`Error::InvalidParams`] (with why: which field) when the bytes are not a
    /// tensor object.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tensor> {
        let mut header = ffi::mooncake_tensor_header_t::default();
        // SAFETY: bytes.len() readable bytes, and a writable header.
        check_tensor_call(unsafe {
            ffi::mooncake_store_tensor_header_decode(
                bytes.as_ptr().cast::<c_void>(),
                bytes.len(),
                bytes.len() as u64,
                &mut header,
            )
        })?;
        let dtype = Dtype::from_code(header.dtype).ok_or(Error::InvalidParams)?;
        let start = usize::try_from(header.data_offset).map_err(|_| Error::InvalidParams)?;
        let ndim = usize::try_from(header.ndim).map_err(|_| Error::InvalidParams)?;
        Ok(Tensor {
            dtype,
            shape: header.local_shape[..ndim].to_vec(),
            data: bytes[start..].to_vec(),
        })
    }
}

impl Store {
    /// Stores `tensor` under `key` as Mooncake's tensor object (what Mooncake's
    /// `put_tensor` stores). Puts never overwrite: an existing key keeps its value.
    ///
    /// Errors: those of [`Tensor::to_bytes`] and of [`put`](Store::put).
    pub fn put_tensor<K: AsRef<[u8]>>(&self, key: K, tensor: &Tensor) -> Result<()> {
        self.put(key, &tensor.to_bytes()?)
    }

    /// Like [`put_tensor`](Store::put_tensor), but replaces an existing value.
    pub fn upsert_tensor<K: AsRef<[u8]>>(&self, key: K, tensor: &Tensor) -> Result<()> {
        self.upsert(key, &tensor.to_bytes()?)
    }

    /// The tensor under `key` (stored by any client: Mooncake's `put_tensor` too), or
    /// `Ok(None)` when there is no such object.
    ///
    /// Errors: those of [`get`](Store::get), and [`Error::InvalidParams`] (with why) when the
    /// object is not a tensor.
    pub fn get_tensor<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Tensor>> {
        match self.get(key)? {
            Some(bytes) => Tensor::from_bytes(&bytes).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Dtype, Tensor};
    use crate::Error;

    #[test]
    fn dtype_codes_and_sizes_are_mooncakes() {
        let sizes = [4, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1, 2, 2, 1, 1];
        for (code, size) in sizes.iter().enumerate() {
            let dtype = Dtype::from_code(code as i32).unwrap();
            assert_eq!((dtype.code(), dtype.size()), (code as i32, *size));
        }
        assert_eq!(Dtype::from_code(15), None);
        assert_eq!(Dtype::from_code(-1), None);
    }

    #[test]
    fn bytes_are_the_documented_layout() {
        let t = Tensor {
            dtype: Dtype::Int16,
            shape: vec![2, 3],
            data: (0u8..12).collect(),
        };
        let b = t.to_bytes().unwrap();
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let i64_at = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        assert_eq!(u32_at(0), 0x4d4f_4f4e); // magic
        assert_eq!(u32_at(4), 1 | (304 << 16)); // version, header_size
        assert_eq!((u32_at(8), u32_at(12), u32_at(16)), (4, 2, 0)); // dtype, ndim, FULL
        assert_eq!((i64_at(24), i64_at(32)), (304, 12)); // data_offset, data_bytes
        assert_eq!((i64_at(40), i64_at(48), i64_at(56)), (2, 3, -1)); // global_shape
        assert_eq!((i64_at(104), i64_at(112), i64_at(120)), (2, 3, -1)); // local_shape
        assert_eq!(u32_at(168), 0); // no axes
        assert_eq!(&b[304..], &t.data[..]);
        assert_eq!(Tensor::from_bytes(&b).unwrap(), t);
    }

    #[test]
    fn refusals_say_why() {
        let short = Tensor {
            dtype: Dtype::Float32,
            shape: vec![4],
            data: vec![0; 15],
        };
        let e = short.to_bytes().unwrap_err();
        assert_eq!(e, Error::InvalidParams);
        assert!(e.message().unwrap().contains("15 bytes"), "{e}");
        let deep = Tensor {
            dtype: Dtype::Float32,
            shape: vec![1; 9],
            data: vec![0; 4],
        };
        assert!(deep
            .to_bytes()
            .unwrap_err()
            .message()
            .unwrap()
            .contains("ndim 9"));
        let e = Tensor::from_bytes(&[0u8; 400]).unwrap_err();
        assert!(e.message().unwrap().contains("magic"), "{e}");
        assert_eq!(
            Tensor::from_bytes(&[0u8; 10]).unwrap_err(),
            Error::InvalidParams
        );
    }
}
