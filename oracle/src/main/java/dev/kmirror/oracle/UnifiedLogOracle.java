package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.common.RequestLocal;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.log.VerificationGuard;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * A real Apache Kafka {@code UnifiedLog}, created in a partition directory without a broker and
 * driven over a line protocol (one request line in, one answer line out):
 *
 * <pre>
 * LEADER epoch hex     -> ok BASE LAST | err Class   appendAsLeader of our batch bytes (a data
 *                         batch as a client's, a marker as the coordinator's, transaction version 0)
 * FOLLOWER epoch hex   -> ok | err Class             appendAsFollower
 * ASSIGN epoch offset  -> ok | err Class             assignEpochStartOffset (what Partition.makeLeader
 *                         does for a new leader epoch, at LEO)
 * TRUNCATE offset      -> ok | err Class             truncateTo
 * TRUNCATE_FULLY offset -> ok | err Class            truncateFullyAndStartAt
 * HW offset            -> ok | err Class             updateHighWatermark
 * STATE                -> ok LEO HW LSO LOG_START e@o e@o ...   (the leader-epoch cache last)
 * REOPEN               -> ok e@o ...                 closes the log and opens its directory again, as a
 *                         broker restart does: the leader-epoch cache as Kafka then loads it
 * CLOSE                -> ok                         closes the log (its files stay)
 * </pre>
 *
 * Usage: {@code UnifiedLogOracle <partition dir> <segment bytes> <index interval bytes>}; the
 * directory is named {@code <topic>-<partition>} as Kafka requires. With the environment
 * variable {@code KMIRROR_ORACLE_DEBUG} set, every refused request's stack trace goes to stderr.
 */
public final class UnifiedLogOracle {
    private final KafkaScheduler scheduler = new KafkaScheduler(1);
    private final File dir;
    private final LogConfig config;
    private UnifiedLog log;

    private UnifiedLogOracle(File dir, int segmentBytes, int indexIntervalBytes) throws Exception {
        Map<String, Object> props = new HashMap<>();
        // Small segments and a dense index, so that short tests roll segments and index batches.
        props.put(LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG, segmentBytes);
        props.put("index.interval.bytes", indexIntervalBytes);
        scheduler.startup();
        this.dir = dir;
        this.config = new LogConfig(props);
        log = open();
    }

    /** Opens (or creates) the log in {@code dir}, recovering what a previous instance left. */
    private UnifiedLog open() throws Exception {
        return UnifiedLog.create(dir, config, 0L, 0L, scheduler, new BrokerTopicStats(),
            Time.SYSTEM, 15 * 60 * 1000, new ProducerStateManagerConfig(Integer.MAX_VALUE, false),
            10 * 60 * 1000, new LogDirFailureChannel(1), true, Optional.empty());
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        if (args.length != 3) {
            System.err.println("usage: UnifiedLogOracle <partition dir> <segment bytes> <index interval bytes>");
            System.exit(2);
        }
        UnifiedLogOracle oracle =
            new UnifiedLogOracle(new File(args[0]), Integer.parseInt(args[1]), Integer.parseInt(args[2]));
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
        oracle.scheduler.shutdown();
    }

    private String handle(String[] w) throws Exception {
        switch (w[0]) {
            case "LEADER": {
                MemoryRecords records = records(w[2]);
                RecordBatch batch = records.batches().iterator().next();
                AppendOrigin origin = batch.isControlBatch() ? AppendOrigin.COORDINATOR : AppendOrigin.CLIENT;
                var info = log.appendAsLeader(records, Integer.parseInt(w[1]), origin,
                    RequestLocal.noCaching(), VerificationGuard.SENTINEL, (short) 0);
                return "ok " + info.firstOffset() + " " + info.lastOffset();
            }
            case "FOLLOWER":
                log.appendAsFollower(records(w[2]), Integer.parseInt(w[1]));
                return "ok";
            case "ASSIGN":
                log.assignEpochStartOffset(Integer.parseInt(w[1]), Long.parseLong(w[2]));
                return "ok";
            case "TRUNCATE":
                log.truncateTo(Long.parseLong(w[1]));
                return "ok";
            case "TRUNCATE_FULLY":
                log.truncateFullyAndStartAt(Long.parseLong(w[1]), Optional.empty());
                return "ok";
            case "HW":
                log.updateHighWatermark(Long.parseLong(w[1]));
                return "ok";
            case "STATE": {
                StringBuilder s = new StringBuilder("ok ").append(log.logEndOffset()).append(' ')
                    .append(log.highWatermark()).append(' ').append(log.lastStableOffset()).append(' ')
                    .append(log.logStartOffset());
                for (EpochEntry e : log.leaderEpochCache().epochEntries()) {
                    s.append(' ').append(e.epoch()).append('@').append(e.startOffset());
                }
                return s.toString();
            }
            case "REOPEN": {
                log.close();
                log = open();
                StringBuilder s = new StringBuilder("ok");
                for (EpochEntry e : log.leaderEpochCache().epochEntries()) {
                    s.append(' ').append(e.epoch()).append('@').append(e.startOffset());
                }
                return s.toString();
            }
            case "CLOSE":
                log.close();
                return "ok";
            default:
                return "err unknown request " + w[0];
        }
    }

    private static MemoryRecords records(String hex) {
        return MemoryRecords.readableRecords(ByteBuffer.wrap(HexFormat.of().parseHex(hex)));
    }
}
