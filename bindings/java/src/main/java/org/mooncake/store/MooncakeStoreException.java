package org.mooncake.store;

/**
 * A failed {@link MooncakeStore} call.
 *
 * <p>Unchecked: store calls sit on data paths, in lambdas and in try-with-resources, where a
 * checked exception would only be wrapped again. {@link #code()} is the result code of the C
 * ABI ({@code include/mooncake_store.h}; the constants below mirror its table).
 * {@link #detail()} says why, with the fix where there is one: the library's message for the
 * call ({@code mooncake_store_errmsg}: "mooncaked is not running at /run/mooncake/...: start
 * it ...", "key longer than 4096 bytes (5000)", or the daemon's own reason), or the binding's
 * when it refused the call itself (a closed store, a heap buffer, a key containing NUL).
 * {@link #getMessage()} is {@code mooncake_store_strerror(code)}, followed by ": " and the
 * detail when there is one. {@link #operation()} names the Java method that failed; it and
 * the detail appear in {@link #toString()}, so they show in stack traces.
 */
public class MooncakeStoreException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public static final int OK = 0;
    public static final int INTERNAL_ERROR = -1;
    public static final int BUFFER_OVERFLOW = -10;
    public static final int SEGMENT_NOT_FOUND = -101;
    public static final int SEGMENT_ALREADY_EXISTS = -102;
    public static final int CLIENT_NOT_FOUND = -103;
    public static final int NO_AVAILABLE_HANDLE = -200;
    public static final int INVALID_KEY = -400;
    public static final int INVALID_PARAMS = -600;
    public static final int ILLEGAL_CLIENT = -601;
    public static final int REPLICA_IS_NOT_READY = -703;
    public static final int OBJECT_NOT_FOUND = -704;
    public static final int OBJECT_ALREADY_EXISTS = -705;
    public static final int OBJECT_HAS_LEASE = -706;
    public static final int LEASE_EXPIRED = -707;
    public static final int TRANSFER_FAIL = -800;
    public static final int CHECKSUM_MISMATCH = -801;
    public static final int RPC_FAIL = -900;
    public static final int RPC_TIMEOUT = -901;
    public static final int UNAVAILABLE_IN_CURRENT_STATUS = -1010;
    public static final int UNAVAILABLE_IN_CURRENT_MODE = -1011;
    public static final int NOT_SUPPORTED = -1012;
    public static final int FILE_NOT_FOUND = -1100;
    public static final int FILE_OPEN_FAIL = -1101;
    public static final int FILE_READ_FAIL = -1102;
    public static final int FILE_WRITE_FAIL = -1103;
    public static final int FILE_INVALID_BUFFER = -1104;
    public static final int FILE_LOCK_FAIL = -1105;
    public static final int FILE_INVALID_HANDLE = -1106;
    public static final int BUCKET_NOT_FOUND = -1200;
    public static final int BUCKET_ALREADY_EXISTS = -1201;
    public static final int KEYS_EXCEED_BUCKET_LIMIT = -1202;
    public static final int KEYS_ULTRA_LIMIT = -1203;
    public static final int RESOURCE_LIMIT_EXCEEDED = -1300;
    public static final int TOO_MANY_CONNECTIONS = -1305;
    public static final int UNAUTHENTICATED = -1400;
    public static final int PERMISSION_DENIED = -1401;
    public static final int QUOTA_EXCEEDED = -1402;
    public static final int SERIALIZE_UNSUPPORTED = -1500;
    public static final int SERIALIZE_FAIL = -1501;
    public static final int DESERIALIZE_FAIL = -1502;
    public static final int PERSISTENT_FAIL = -1503;
    public static final int NOT_LEADER = -1600;

    private final int code;
    private final String operation;
    private final String detail;

    /**
     * An exception for {@code code} raised by {@code operation}; detail may be null, and is
     * dropped when it says no more than the code (the library's "object not found (-704)").
     */
    public MooncakeStoreException(int code, String operation, String detail) {
        this(code, operation, detail, bare(code, detail));
    }

    private MooncakeStoreException(int code, String operation, String detail, boolean bare) {
        super(bare ? MooncakeStore.strerror(code) : MooncakeStore.strerror(code) + ": " + detail);
        this.code = code;
        this.operation = operation;
        this.detail = bare ? null : detail;
    }

    private static boolean bare(int code, String detail) {
        return detail == null || detail.equals(MooncakeStore.strerror(code) + " (" + code + ")");
    }

    /** An exception for {@code code} raised by {@code operation}. */
    public MooncakeStoreException(int code, String operation) {
        this(code, operation, null);
    }

    /** The C ABI result code (negative). */
    public int code() {
        return code;
    }

    /** The method that failed, e.g. {@code "put"}. */
    public String operation() {
        return operation;
    }

    /**
     * Why the call failed: the library's message ({@code mooncake_store_errmsg}) or the
     * binding's own reason; null when nothing says more than the code.
     */
    public String detail() {
        return detail;
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder(getClass().getName()).append(": ");
        if (operation != null) {
            s.append(operation).append(": ");
        }
        s.append(MooncakeStore.strerror(code)).append(" (").append(code).append(')');
        if (detail != null) {
            s.append(": ").append(detail);
        }
        return s.toString();
    }
}
