package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.server.util.Scheduler;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

/**
 * Times Apache Kafka's {@code LeaderEpochFileCache} for the criterion benchmark
 * {@code benches/benches/epoch_cache.rs}, which runs the same operations on kmirror's
 * {@code EpochCache} in the same run.
 *
 * <p>Usage: {@code EpochCacheBench <work dir>}; one request per line on stdin, one answer per line
 * on stdout:
 *
 * <pre>
 * setup N MODE    -> ok     a cache of N entries, epoch i starting at offset i * SPACING, then JIT warm-up
 * run OP ITERS    -> NANOS  ITERS operations OP, the sum of their System.nanoTime() durations
 * </pre>
 *
 * <p>MODE {@code file}: the cache as Kafka uses it, on a {@code LeaderEpochCheckpointFile} in the
 * work dir: {@code assign} writes and fsyncs the checkpoint before returning when the cache
 * changed; truncations schedule the flush on Kafka's scheduler (a background thread in a broker),
 * so here the flush runs after the timed call, untimed. MODE {@code memory}: a checkpoint whose
 * writes do nothing, which leaves Kafka's in-memory work (its {@code TreeMap} under a lock).
 *
 * <p>OP is one of {@code clock} (nothing: the cost of reading the clock around an operation),
 * {@code assign} (a new latest epoch, removed again untimed), {@code truncate_end} (the latest
 * entry removed, re-added untimed), {@code truncate_start} (the log start moved up by one offset:
 * the first entry replaced) and {@code end_offset_for} (the middle epoch).
 */
public final class EpochCacheBench {
    /** Offsets between the start offsets of consecutive epochs. */
    static final long SPACING = 1_000_000_000_000L;
    private static final TopicPartition PARTITION = new TopicPartition("bench", 0);

    private final File dir;
    private final DeferredScheduler scheduler = new DeferredScheduler();
    private LeaderEpochFileCache cache;
    private int size;
    private long logStart;
    private long sink;

    private EpochCacheBench(File dir) {
        this.dir = dir;
    }

    public static void main(String[] args) throws IOException {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        if (args.length != 1) {
            System.err.println("usage: EpochCacheBench <work dir>");
            System.exit(2);
        }
        EpochCacheBench bench = new EpochCacheBench(new File(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            String answer;
            switch (w[0]) {
                case "setup":
                    bench.setup(Integer.parseInt(w[1]), w[2].equals("file"));
                    answer = "ok";
                    break;
                case "run":
                    answer = Long.toString(bench.run(w[1], Long.parseLong(w[2])));
                    break;
                default:
                    answer = "err unknown request " + w[0];
            }
            out.println(answer);
            out.flush();
        }
        if (bench.sink == 42) {
            System.err.println("(sink)");
        }
    }

    private void setup(int n, boolean file) throws IOException {
        File checkpoint = new File(dir, "leader-epoch-checkpoint");
        Files.deleteIfExists(checkpoint.toPath());
        LeaderEpochCheckpointFile checkpointFile = file
            ? new LeaderEpochCheckpointFile(checkpoint, new LogDirFailureChannel(1))
            : new DiscardingCheckpoint(checkpoint);
        cache = new LeaderEpochFileCache(PARTITION, checkpointFile, scheduler);
        List<EpochEntry> entries = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            entries.add(new EpochEntry(i, i * SPACING));
        }
        cache.assign(entries);
        size = n;
        logStart = 0;
        long warmup = file ? 200 : 20_000;
        for (String op : new String[] {"clock", "assign", "truncate_end", "truncate_start", "end_offset_for"}) {
            run(op, warmup);
        }
    }

    private long run(String op, long iters) {
        long total = 0;
        long latestStart = (size - 1) * SPACING;
        for (long i = 0; i < iters; i++) {
            long t0;
            switch (op) {
                case "clock":
                    t0 = System.nanoTime();
                    total += System.nanoTime() - t0;
                    break;
                case "assign":
                    t0 = System.nanoTime();
                    cache.assign(size, size * SPACING);
                    total += System.nanoTime() - t0;
                    cache.truncateFromEndAsyncFlush(size * SPACING);
                    scheduler.runPending();
                    break;
                case "truncate_end":
                    t0 = System.nanoTime();
                    cache.truncateFromEndAsyncFlush(latestStart);
                    total += System.nanoTime() - t0;
                    scheduler.runPending();
                    cache.assign(size - 1, latestStart);
                    break;
                case "truncate_start":
                    logStart += 1;
                    if (logStart >= SPACING) {
                        throw new IllegalStateException("truncate_start ran past the first entry");
                    }
                    t0 = System.nanoTime();
                    cache.truncateFromStartAsyncFlush(logStart);
                    total += System.nanoTime() - t0;
                    scheduler.runPending();
                    break;
                case "end_offset_for": {
                    t0 = System.nanoTime();
                    Map.Entry<Integer, Long> r = cache.endOffsetFor(size / 2, size * SPACING);
                    total += System.nanoTime() - t0;
                    sink += r.getValue();
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        }
        return total;
    }

    /** A checkpoint file that is never written: Kafka's cache without its I/O. */
    private static final class DiscardingCheckpoint extends LeaderEpochCheckpointFile {
        DiscardingCheckpoint(File file) throws IOException {
            super(file, new LogDirFailureChannel(1));
        }

        @Override
        public void write(Collection<EpochEntry> entries) {}

        @Override
        public void writeIfDirExists(Collection<EpochEntry> entries) {}
    }

    /** Kafka's scheduler stand-in: scheduled flushes run when the benchmark says, untimed. */
    private static final class DeferredScheduler implements Scheduler {
        private final List<Runnable> pending = new ArrayList<>();

        void runPending() {
            for (Runnable task : pending) {
                task.run();
            }
            pending.clear();
        }

        @Override
        public void startup() {}

        @Override
        public void shutdown() {}

        @Override
        public ScheduledFuture<?> schedule(String name, Runnable task, long delayMs, long periodMs) {
            pending.add(task);
            return null;
        }

        @Override
        public void resizeThreadPool(int threads) {}
    }
}
