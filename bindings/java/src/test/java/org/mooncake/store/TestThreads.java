package org.mooncake.store;

import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/** Threads of the suites' concurrency tests. */
final class TestThreads {
    private TestThreads() {}

    /**
     * Starts writer and readers, waits for all of them, then fails with the first Throwable
     * a thread stored in failure (each thread catches its own and stores it there).
     */
    static void runAll(Thread writer, List<Thread> readers, AtomicReference<Throwable> failure)
            throws InterruptedException {
        writer.start();
        readers.forEach(Thread::start);
        writer.join();
        for (Thread r : readers) {
            r.join();
        }
        if (failure.get() != null) {
            throw new AssertionError("a thread failed", failure.get());
        }
    }
}
