package org.mooncake.store;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A tensor as Mooncake stores it: an element type ({@link #FLOAT32} ... {@link #FLOAT8_E5M2},
 * Mooncake's codes), a shape (at most 8 dimensions; none for a scalar) and the elements'
 * bytes, row-major and little-endian. {@link MooncakeStore#putTensor} stores it as Mooncake's
 * tensor object -- a 304-byte header, then the elements -- which Mooncake's Python client
 * reads with {@code get_tensor}, and {@link MooncakeStore#getTensor} reads any client's. The
 * header's bytes are the C ABI's to write and read ({@code mooncake_store_tensor_header_*};
 * docs/mooncake-api.md, "Tensors").
 *
 * <p>A value: the shape is copied in and out; the data array is the tensor's own, shared
 * with the caller (no copy of what may be large), and must not change while a put runs.
 */
public final class Tensor {
    static {
        NativeLoader.load();
    }

    public static final int FLOAT32 = 0;
    public static final int FLOAT64 = 1;
    public static final int INT8 = 2;
    public static final int UINT8 = 3;
    public static final int INT16 = 4;
    public static final int UINT16 = 5;
    public static final int INT32 = 6;
    public static final int UINT32 = 7;
    public static final int INT64 = 8;
    public static final int UINT64 = 9;
    /** One byte per element, 0 or 1. */
    public static final int BOOL = 10;
    public static final int FLOAT16 = 11;
    public static final int BFLOAT16 = 12;
    public static final int FLOAT8_E4M3 = 13;
    public static final int FLOAT8_E5M2 = 14;

    /** The bytes of the header before a tensor object's elements. */
    public static final int HEADER_SIZE = 304;

    private final int dtype;
    private final long[] shape;
    private final byte[] data;

    /**
     * @param dtype one of the element type codes above
     * @param shape the dimensions (copied)
     * @param data the elements' bytes (kept, not copied)
     */
    public Tensor(int dtype, long[] shape, byte[] data) {
        if (shape == null || data == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "Tensor",
                    shape == null ? "shape is null" : "data is null");
        }
        this.dtype = dtype;
        this.shape = shape.clone();
        this.data = data;
    }

    public int dtype() {
        return dtype;
    }

    /** A copy of the shape. */
    public long[] shape() {
        return shape.clone();
    }

    /** The elements' bytes: the tensor's own array. */
    public byte[] data() {
        return data;
    }

    /** The bytes of one element of dtype; 0 for a code that names no type. */
    public static int elementSize(int dtype) {
        return (int) nDtypeSize(dtype);
    }

    /**
     * The tensor object's bytes: Mooncake's header, then the elements.
     *
     * @throws MooncakeStoreException {@code INVALID_PARAMS}, saying why, for an unknown element
     *     type, more than 8 dimensions or a negative one, or data that is not the shape's
     *     elements
     */
    public byte[] toBytes() {
        byte[] header = new byte[HEADER_SIZE];
        long[] dataBytes = new long[1];
        int rc = nEncode(dtype, shape, dataBytes, header);
        if (rc != 0) {
            throw new MooncakeStoreException(rc, "Tensor.toBytes", lastError());
        }
        if (dataBytes[0] != data.length) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS,
                    "Tensor.toBytes",
                    "the tensor's data is " + data.length + " bytes; its shape "
                            + Arrays.toString(shape) + " is " + dataBytes[0] + " bytes");
        }
        if (HEADER_SIZE + (long) data.length > Integer.MAX_VALUE - 8) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS,
                    "Tensor.toBytes",
                    "a tensor object larger than a Java array");
        }
        byte[] object = Arrays.copyOf(header, HEADER_SIZE + data.length);
        System.arraycopy(data, 0, object, HEADER_SIZE, data.length);
        return object;
    }

    /**
     * The tensor a tensor object's bytes hold (a shard's elements, for a shard).
     *
     * @throws MooncakeStoreException {@code INVALID_PARAMS}, saying which field, when the bytes
     *     are not a tensor object
     */
    public static Tensor fromBytes(byte[] object) {
        if (object == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR,
                    "Tensor.fromBytes", "object is null");
        }
        int[] meta = new int[2]; // dtype, ndim
        long[] shape = new long[8];
        long[] data = new long[2]; // data_offset, data_bytes
        int rc = nDecode(object, meta, shape, data);
        if (rc != 0) {
            throw new MooncakeStoreException(rc, "Tensor.fromBytes", lastError());
        }
        int from = (int) data[0];
        return new Tensor(meta[0], Arrays.copyOf(shape, meta[1]),
                Arrays.copyOfRange(object, from, from + (int) data[1]));
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Tensor)) {
            return false;
        }
        Tensor t = (Tensor) o;
        return dtype == t.dtype && Arrays.equals(shape, t.shape) && Arrays.equals(data, t.data);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * dtype + Arrays.hashCode(shape)) + Arrays.hashCode(data);
    }

    @Override
    public String toString() {
        return "Tensor(dtype=" + dtype + ", shape=" + Arrays.toString(shape) + ", " + data.length
                + " bytes)";
    }

    private static String lastError() {
        return new String(nLastError(), StandardCharsets.UTF_8);
    }

    // ---- native (bindings/java/src/main/native/tensor_jni.c) -----------------------------------

    private static native long nDtypeSize(int dtype);
    private static native int nEncode(int dtype, long[] shape, long[] dataBytes, byte[] out);
    private static native int nDecode(byte[] object, int[] meta, long[] shape, long[] data);
    private static native byte[] nLastError();
}
