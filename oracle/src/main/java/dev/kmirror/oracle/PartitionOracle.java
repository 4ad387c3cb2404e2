package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

import kafka.cluster.DelayedOperations;
import kafka.cluster.Partition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.requests.FetchRequest;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.MetadataCache;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.RequestLocal;
import org.apache.kafka.server.partition.AlterPartitionListener;
import org.apache.kafka.server.partition.AlterPartitionManager;
import org.apache.kafka.server.replica.Replica;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.storage.log.FetchParams;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpoints;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.log.VerificationGuard;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * Apache Kafka's {@code kafka.cluster.Partition} as the leader of a partition on broker 0: its
 * followers' fetches go through {@code Partition.fetchRecords} (which credits the follower and
 * runs ISR expansion and {@code maybeIncrementLeaderHW}), appends through
 * {@code appendRecordsToLeader}. Driven over a line protocol:
 *
 * <pre>
 * RESET replicas isr               -> ok STATE  (a new empty log; makeLeader at epoch 1 with replicas
 *                                               0..replicas-1 and the comma-separated ISR, 0 first)
 * APPEND records timeMs            -> ok STATE | err Class   (one batch of that many records, acks=1)
 * FETCH replica offset logStart timeMs -> ok STATE | err Class
 *                                               (a follower fetch at that offset, no last fetched
 *                                               epoch, updateFetchState=true)
 * ELECT epoch                      -> ok STATE  (makeLeader again at that leader epoch, same
 *                                               replicas and ISR: broker 0 re-elected, as a
 *                                               controller's new leader epoch for it)
 * EPOCHS                           -> ok e@o ... (the log's leader-epoch cache)
 * END_OFFSET_FOR epoch             -> ok EPOCH OFFSET | err NAME  (lastOffsetForLeaderEpoch: what the
 *                                               leader answers a fetcher's last fetched epoch with)
 * </pre>
 *
 * where STATE is {@code LEO HW isr=a,b maximal=a,b,c leo=r1:x,r2:y} (the committed and the maximal
 * ISR, the LEO the leader holds for each follower). The controller never answers the AlterPartition
 * of an ISR expansion, so an expansion stays pending (in the maximal ISR only) and blocks further
 * ones, as in Kafka while the request is in flight. Every broker is alive, unfenced and at broker
 * epoch 1; replica.lag.time.max.ms is 30000; min.insync.replicas is 1.
 */
public final class PartitionOracle {
    private static final TopicPartition TP = new TopicPartition("oracle", 0);
    private static final Uuid TOPIC_ID = new Uuid(7L, 7L);
    static final long REPLICA_LAG_TIME_MAX_MS = 30_000L;

    private final File root;
    private final KafkaScheduler scheduler = new KafkaScheduler(1);
    private final ManualTime time = new ManualTime();
    private Partition partition;
    private UnifiedLog log;
    private int replicas;
    private int[] isr;
    private int generation;

    private PartitionOracle(File root) {
        this.root = root;
        scheduler.startup();
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        if (args.length != 1) {
            System.err.println("usage: PartitionOracle <work dir>");
            System.exit(2);
        }
        PartitionOracle oracle = new PartitionOracle(new File(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = oracle.handle(line.trim().split(" "));
            } catch (Exception e) {
                answer = "err " + e.getClass().getSimpleName();
                if (System.getenv("KMIRROR_ORACLE_DEBUG") != null) {
                    e.printStackTrace();
                }
            }
            out.println(answer.replace('\n', ' ').replace('\r', ' '));
            out.flush();
        }
        oracle.close();
        oracle.scheduler.shutdown();
    }

    private String handle(String[] w) throws Exception {
        switch (w[0]) {
            case "RESET":
                reset(Integer.parseInt(w[1]), w[2]);
                return "ok " + state();
            case "APPEND": {
                time.now = Long.parseLong(w[2]);
                SimpleRecord[] records = new SimpleRecord[Integer.parseInt(w[1])];
                for (int i = 0; i < records.length; i++) {
                    records[i] = new SimpleRecord(("r" + i).getBytes(StandardCharsets.UTF_8));
                }
                partition.appendRecordsToLeader(MemoryRecords.withRecords(Compression.NONE, records),
                    AppendOrigin.CLIENT, 1, RequestLocal.noCaching(), VerificationGuard.SENTINEL, (short) 0);
                return "ok " + state();
            }
            case "FETCH": {
                int replica = Integer.parseInt(w[1]);
                long offset = Long.parseLong(w[2]);
                long logStart = Long.parseLong(w[3]);
                long timeMs = Long.parseLong(w[4]);
                time.now = timeMs;
                FetchParams params = new FetchParams(replica, -1L, 0L, 1, 1 << 20, FetchIsolation.LOG_END,
                    Optional.empty());
                FetchRequest.PartitionData data = new FetchRequest.PartitionData(TOPIC_ID, offset, logStart,
                    1 << 20, Optional.of(1), Optional.empty());
                partition.fetchRecords(params, data, timeMs, 1 << 20, true, true);
                return "ok " + state();
            }
            case "ELECT":
                makeLeader(Integer.parseInt(w[1]), false);
                return "ok " + state();
            case "END_OFFSET_FOR": {
                var answer = partition.lastOffsetForLeaderEpoch(Optional.empty(), Integer.parseInt(w[1]), true);
                if (answer.errorCode() != 0) {
                    return "err " + org.apache.kafka.common.protocol.Errors.forCode(answer.errorCode()).name();
                }
                return "ok " + answer.leaderEpoch() + " " + answer.endOffset();
            }
            case "EPOCHS": {
                StringBuilder s = new StringBuilder("ok");
                for (EpochEntry e : log.leaderEpochCache().epochEntries()) {
                    s.append(' ').append(e.epoch()).append('@').append(e.startOffset());
                }
                return s.toString();
            }
            default:
                return "err unknown request " + w[0];
        }
    }

    private void close() throws Exception {
        if (log != null) {
            log.close();
        }
    }

    private void reset(int replicas, String isrList) throws Exception {
        close();
        this.replicas = replicas;
        time.now = 0;
        File dir = new File(root, "g" + (generation++) + "/oracle-0");
        Files.createDirectories(dir.toPath());
        Map<String, Object> props = new HashMap<>();
        log = UnifiedLog.create(dir, new LogConfig(props), 0L, 0L, scheduler, new BrokerTopicStats(), time,
            15 * 60 * 1000, new ProducerStateManagerConfig(Integer.MAX_VALUE, false), 10 * 60 * 1000,
            new LogDirFailureChannel(1), true, Optional.of(TOPIC_ID));
        partition = new Partition(TP, REPLICA_LAG_TIME_MAX_MS, 0, () -> 1L, time, noop(AlterPartitionListener.class),
            new NoDelayedOperations(), metadataCache(), null, alterPartitionManager(), scala.Option.apply(TOPIC_ID));
        partition.setLog(log, false);
        String[] isrParts = isrList.split(",");
        isr = new int[isrParts.length];
        for (int i = 0; i < isr.length; i++) {
            isr[i] = Integer.parseInt(isrParts[i]);
        }
        makeLeader(1, true);
    }

    /** Broker 0 made leader at {@code epoch} (partition epoch alike) over the replicas and ISR. */
    private void makeLeader(int epoch, boolean isNew) {
        int[] all = new int[replicas];
        Uuid[] dirs = new Uuid[replicas];
        for (int i = 0; i < replicas; i++) {
            all[i] = i;
            dirs[i] = Uuid.ZERO_UUID;
        }
        PartitionRegistration registration = new PartitionRegistration.Builder()
            .setReplicas(all).setDirectories(dirs).setIsr(isr).setLeader(0)
            .setLeaderRecoveryState(LeaderRecoveryState.RECOVERED).setLeaderEpoch(epoch).setPartitionEpoch(epoch)
            .build();
        OffsetCheckpoints checkpoints = (dirName, tp) -> Optional.empty();
        partition.makeLeader(registration, isNew, checkpoints, scala.Option.apply(TOPIC_ID), scala.Option.apply(null));
    }

    private String state() {
        StringBuilder s = new StringBuilder();
        s.append(log.logEndOffset()).append(' ').append(log.highWatermark());
        s.append(" isr=").append(join(partition.partitionState().isr()));
        s.append(" maximal=").append(join(partition.partitionState().maximalIsr()));
        s.append(" leo=");
        List<String> leos = new ArrayList<>();
        for (int r = 1; r < replicas; r++) {
            scala.Option<Replica> replica = partition.getReplica(r);
            leos.add(r + ":" + (replica.isDefined() ? replica.get().stateSnapshot().logEndOffset() : "none"));
        }
        s.append(String.join(",", leos));
        return s.toString();
    }

    private static String join(java.util.Set<Integer> ids) {
        List<String> parts = new ArrayList<>();
        for (int id : new TreeSet<>(ids)) {
            parts.add(Integer.toString(id));
        }
        return String.join(",", parts);
    }

    /** A proxy of `type` doing nothing and answering with empty values. */
    @SuppressWarnings("unchecked")
    private static <T> T noop(Class<T> type) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
            (proxy, method, args) -> defaultValue(proxy, method, args));
    }

    private static Object defaultValue(Object proxy, java.lang.reflect.Method method, Object[] args) {
        Class<?> type = method.getReturnType();
        if (method.getName().equals("hashCode")) return System.identityHashCode(proxy);
        if (method.getName().equals("equals")) return proxy == args[0];
        if (method.getName().equals("toString")) return "noop";
        if (type == Optional.class) return Optional.empty();
        if (type == boolean.class) return false;
        if (type == int.class) return 0;
        if (type == long.class) return 0L;
        return null;
    }

    /** Every broker alive at broker epoch 1, none fenced or shutting down. */
    private static MetadataCache metadataCache() {
        return (MetadataCache) Proxy.newProxyInstance(MetadataCache.class.getClassLoader(),
            new Class<?>[] {MetadataCache.class}, (proxy, method, args) -> {
                if (method.getName().equals("getAliveBrokerEpoch")) return Optional.of(1L);
                if (method.getName().equals("hasAliveBroker")) return true;
                return defaultValue(proxy, method, args);
            });
    }

    /** A controller that never answers: an ISR change stays in flight. */
    private static AlterPartitionManager alterPartitionManager() {
        return (AlterPartitionManager) Proxy.newProxyInstance(AlterPartitionManager.class.getClassLoader(),
            new Class<?>[] {AlterPartitionManager.class}, (proxy, method, args) -> {
                if (method.getName().equals("submit")) return new CompletableFuture<>();
                return defaultValue(proxy, method, args);
            });
    }

    /** No delayed produce, fetch or delete requests wait on the partition. */
    private static final class NoDelayedOperations extends DelayedOperations {
        NoDelayedOperations() {
            super(scala.Option.apply(TOPIC_ID), TP, null, null, null, null);
        }

        @Override
        public void checkAndCompleteAll() {}

        @Override
        public int numDelayedDelete() {
            return 0;
        }
    }

    /** A clock the requests set. */
    private static final class ManualTime implements Time {
        long now;

        @Override
        public long milliseconds() {
            return now;
        }

        @Override
        public long nanoseconds() {
            return now * 1_000_000L;
        }

        @Override
        public void sleep(long ms) {
            now += ms;
        }

        @Override
        public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {}
    }
}
