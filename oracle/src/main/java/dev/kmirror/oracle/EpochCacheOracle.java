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
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.Delayed;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.server.util.Scheduler;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

/**
 * Apache Kafka's {@code LeaderEpochFileCache} and {@code LeaderEpochCheckpointFile}, driven over a
 * line protocol so that one JVM answers thousands of operation sequences.
 *
 * <p>Usage: {@code EpochCacheOracle <work dir>}. The cache's own checkpoint file lives in the work
 * dir. Every request is one line on stdin, every answer one line on stdout:
 *
 * <pre>
 * RESET                      -> ok                      (empty cache, empty checkpoint file)
 * ASSIGN epoch offset        -> ok ENTRIES | err Class  (mutations answer the entries after them)
 * TRUNCATE_END offset        -> ok ENTRIES              (truncateFromEndAsyncFlush)
 * TRUNCATE_START offset      -> ok ENTRIES              (truncateFromStartAsyncFlush)
 * CLEAR                      -> ok ENTRIES              (clearAndFlush)
 * END_OFFSET_FOR epoch leo   -> EPOCH OFFSET            (endOffsetFor)
 * EPOCH_FOR_OFFSET offset    -> EPOCH | none
 * PREVIOUS_EPOCH             -> EPOCH | none            (previousEpoch())
 * PREVIOUS_EPOCH_OF epoch    -> EPOCH | none            (previousEpoch(epoch))
 * PREVIOUS_ENTRY epoch       -> ENTRY | none
 * NEXT_EPOCH epoch           -> EPOCH | none
 * ENTRY epoch                -> ENTRY | none            (epochEntry)
 * LATEST / EARLIEST          -> ENTRY | none            (latestEntry / earliestEntry)
 * FILE                       -> the cache's checkpoint file, each line ended by "|"
 * CHECKPOINT_READ path       -> ok ENTRIES | err Class  (LeaderEpochCheckpointFile.read)
 * CHECKPOINT_LOAD path       -> ok ENTRIES | err Class  (a cache built from that file)
 * CHECKPOINT_WRITE path ENTRIES -> ok                   (LeaderEpochCheckpointFile.write)
 * OFFSET_CHECKPOINT_READ path -> ok topic-partition=offset ... | err Class (OffsetCheckpointFile.read,
 *                               entries sorted by topic and partition)
 * </pre>
 *
 * where an ENTRY is {@code epoch@startOffset} and ENTRIES is a space-separated list of them.
 * Asynchronous checkpoint flushes run at once (see {@link ImmediateScheduler}), so after every
 * request the file holds exactly the cache's entries.
 */
public final class EpochCacheOracle {
    private static final TopicPartition PARTITION = new TopicPartition("oracle", 0);

    private final File cacheFile;
    private final Scheduler scheduler = new ImmediateScheduler();
    private LeaderEpochFileCache cache;

    private EpochCacheOracle(File dir) throws IOException {
        this.cacheFile = new File(dir, "leader-epoch-checkpoint");
        reset();
    }

    public static void main(String[] args) throws IOException {
        // Kafka logs a warning for every conflicting assign; the answers are all the oracle needs.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        if (args.length != 1) {
            System.err.println("usage: EpochCacheOracle <work dir>");
            System.exit(2);
        }
        EpochCacheOracle oracle = new EpochCacheOracle(new File(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = oracle.handle(line.trim().split(" "));
            } catch (Exception | OutOfMemoryError e) {
                // A refused input (or a checkpoint whose count line makes Kafka allocate too much).
                answer = "err " + e.getClass().getSimpleName();
            }
            out.println(answer.replace('\n', ' ').replace('\r', ' '));
            out.flush();
        }
    }

    private void reset() throws IOException {
        Files.deleteIfExists(cacheFile.toPath());
        cache = new LeaderEpochFileCache(PARTITION, new LeaderEpochCheckpointFile(cacheFile, new LogDirFailureChannel(1)), scheduler);
        // A new checkpoint file is empty; have Kafka write its form of the empty cache.
        cache.clearAndFlush();
    }

    private String handle(String[] w) throws IOException {
        switch (w[0]) {
            case "RESET":
                reset();
                return "ok";
            case "ASSIGN":
                cache.assign(Integer.parseInt(w[1]), Long.parseLong(w[2]));
                return "ok" + entries(cache.epochEntries());
            case "TRUNCATE_END":
                cache.truncateFromEndAsyncFlush(Long.parseLong(w[1]));
                return "ok" + entries(cache.epochEntries());
            case "TRUNCATE_START":
                cache.truncateFromStartAsyncFlush(Long.parseLong(w[1]));
                return "ok" + entries(cache.epochEntries());
            case "CLEAR":
                cache.clearAndFlush();
                return "ok" + entries(cache.epochEntries());
            case "END_OFFSET_FOR": {
                Map.Entry<Integer, Long> r = cache.endOffsetFor(Integer.parseInt(w[1]), Long.parseLong(w[2]));
                return r.getKey() + " " + r.getValue();
            }
            case "EPOCH_FOR_OFFSET":
                return epoch(cache.epochForOffset(Long.parseLong(w[1])));
            case "PREVIOUS_EPOCH":
                return epoch(cache.previousEpoch());
            case "PREVIOUS_EPOCH_OF":
                return epoch(cache.previousEpoch(Integer.parseInt(w[1])));
            case "PREVIOUS_ENTRY":
                return entry(cache.previousEntry(Integer.parseInt(w[1])));
            case "NEXT_EPOCH":
                return epoch(cache.nextEpoch(Integer.parseInt(w[1])));
            case "ENTRY":
                return entry(cache.epochEntry(Integer.parseInt(w[1])));
            case "LATEST":
                return entry(cache.latestEntry());
            case "EARLIEST":
                return entry(cache.earliestEntry());
            case "FILE":
                return new String(Files.readAllBytes(cacheFile.toPath()), StandardCharsets.UTF_8)
                    .replace("\n", "|");
            case "CHECKPOINT_READ":
                return "ok" + entries(checkpointFile(w[1]).read());
            case "CHECKPOINT_LOAD": {
                // The constructor replays the file's entries through assign, as a broker does on startup.
                LeaderEpochFileCache loaded =
                    new LeaderEpochFileCache(PARTITION, checkpointFile(w[1]), scheduler);
                return "ok" + entries(loaded.epochEntries());
            }
            case "CHECKPOINT_WRITE": {
                List<EpochEntry> toWrite = new ArrayList<>();
                for (int i = 2; i < w.length; i++) {
                    String[] pair = w[i].split("@");
                    toWrite.add(new EpochEntry(Integer.parseInt(pair[0]), Long.parseLong(pair[1])));
                }
                checkpointFile(w[1]).write(toWrite);
                return "ok";
            }
            case "OFFSET_CHECKPOINT_READ": {
                Map<TopicPartition, Long> offsets =
                    new OffsetCheckpointFile(new File(w[1]), new LogDirFailureChannel(1)).read();
                StringBuilder s = new StringBuilder("ok");
                offsets.entrySet().stream()
                    .sorted(Comparator.comparing((Map.Entry<TopicPartition, Long> e) -> e.getKey().topic())
                        .thenComparingInt(e -> e.getKey().partition()))
                    .forEach(e -> s.append(' ').append(e.getKey()).append('=').append(e.getValue()));
                return s.toString();
            }
            default:
                return "err unknown request " + w[0];
        }
    }

    /**
     * Kafka's checkpoint file at {@code path}, with a failure channel of its own: a channel's queue
     * holds one entry per failed directory, and the oracle reads files in many directories.
     */
    private static LeaderEpochCheckpointFile checkpointFile(String path) throws IOException {
        return new LeaderEpochCheckpointFile(new File(path), new LogDirFailureChannel(1));
    }

    /** " e@o e@o ..." (with a leading space), or "" for no entries. */
    private static String entries(Collection<EpochEntry> entries) {
        StringBuilder s = new StringBuilder();
        for (EpochEntry e : entries) {
            s.append(' ').append(e.epoch()).append('@').append(e.startOffset());
        }
        return s.toString();
    }

    private static String entry(Optional<EpochEntry> e) {
        return e.map(x -> x.epoch() + "@" + x.startOffset()).orElse("none");
    }

    private static String epoch(OptionalInt e) {
        return e.isPresent() ? Integer.toString(e.getAsInt()) : "none";
    }

    /**
     * Runs every scheduled task at once on the caller's thread, so that the cache's "async"
     * checkpoint flushes have happened when a request is answered.
     */
    private static final class ImmediateScheduler implements Scheduler {
        @Override
        public void startup() {}

        @Override
        public void shutdown() {}

        @Override
        public ScheduledFuture<?> schedule(String name, Runnable task, long delayMs, long periodMs) {
            task.run();
            return new DoneFuture();
        }

        @Override
        public void resizeThreadPool(int threads) {}
    }

    /** A future of a task that has already run. */
    private static final class DoneFuture implements ScheduledFuture<Object> {
        @Override
        public long getDelay(TimeUnit unit) {
            return 0;
        }

        @Override
        public int compareTo(Delayed other) {
            return Long.compare(0, other.getDelay(TimeUnit.MILLISECONDS));
        }

        @Override
        public boolean cancel(boolean mayInterrupt) {
            return false;
        }

        @Override
        public boolean isCancelled() {
            return false;
        }

        @Override
        public boolean isDone() {
            return true;
        }

        @Override
        public Object get() {
            return null;
        }

        @Override
        public Object get(long timeout, TimeUnit unit) {
            return null;
        }
    }
}
