package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.BatchMetadata;
import org.apache.kafka.storage.internals.log.CompletedTxn;
import org.apache.kafka.storage.internals.log.LogOffsetMetadata;
import org.apache.kafka.storage.internals.log.ProducerAppendInfo;
import org.apache.kafka.storage.internals.log.ProducerStateEntry;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;

/**
 * Apache Kafka's {@code ProducerStateManager} fed record batches the way {@code UnifiedLog}
 * feeds it on append, over a line protocol (one request line in, one answer line out):
 *
 * <pre>
 * RESET                 -> ok                  (empty producer state, HW 0)
 * LEADER hex            -> ok | dup BASE LAST | err Class
 *     a leader append of the batch (our bytes, hex): a data batch as a client's
 *     (AppendOrigin.CLIENT, duplicates of a retained batch answered as UnifiedLog does),
 *     a transaction marker as the coordinator's (AppendOrigin.COORDINATOR, transaction version 0)
 * FOLLOWER hex          -> ok | err Class     (AppendOrigin.REPLICATION)
 * HW offset             -> ok                  (onHighWatermarkUpdated)
 * LSO                   -> the last stable offset: min(firstUnstableOffset, HW), as UnifiedLog
 * STATE                 -> every producer, by id: pid:epoch:txnFirstOffset|-:[firstSeq-lastSeq@firstOffset-lastOffset,...]
 * </pre>
 *
 * A batch without a producer id is skipped, as {@code UnifiedLog} skips it. No broker, no
 * segments: only the producer-state bookkeeping of an append is Kafka's here.
 */
public final class LogOracle {
    private static final TopicPartition PARTITION = new TopicPartition("oracle", 0);

    private final File dir;
    private final Method findDuplicateBatch;
    private ProducerStateManager state;
    private long highWatermark;

    private LogOracle(File dir) throws Exception {
        this.dir = dir;
        // Package-private in Kafka; UnifiedLog calls it for client appends.
        this.findDuplicateBatch = ProducerStateEntry.class.getDeclaredMethod("findDuplicateBatch", RecordBatch.class);
        this.findDuplicateBatch.setAccessible(true);
        reset();
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        if (args.length != 1) {
            System.err.println("usage: LogOracle <work dir>");
            System.exit(2);
        }
        LogOracle oracle = new LogOracle(new File(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = oracle.handle(line.trim().split(" "));
            } catch (Exception e) {
                answer = "err " + e.getClass().getSimpleName();
            }
            out.println(answer.replace('\n', ' ').replace('\r', ' '));
            out.flush();
        }
    }

    private void reset() throws Exception {
        ProducerStateManagerConfig config = new ProducerStateManagerConfig(Integer.MAX_VALUE, false);
        state = new ProducerStateManager(PARTITION, dir, 15 * 60 * 1000, config, Time.SYSTEM);
        highWatermark = 0;
    }

    private String handle(String[] w) throws Exception {
        switch (w[0]) {
            case "RESET":
                reset();
                return "ok";
            case "LEADER":
                return append(batch(w[1]), true);
            case "FOLLOWER":
                return append(batch(w[1]), false);
            case "HW":
                highWatermark = Long.parseLong(w[1]);
                state.onHighWatermarkUpdated(highWatermark);
                return "ok";
            case "LSO": {
                Optional<LogOffsetMetadata> unstable = state.firstUnstableOffset();
                long lso = unstable.map(u -> Math.min(u.messageOffset, highWatermark)).orElse(highWatermark);
                return Long.toString(lso);
            }
            case "STATE":
                return describe();
            default:
                return "err unknown request " + w[0];
        }
    }

    private static RecordBatch batch(String hex) {
        ByteBuffer bytes = ByteBuffer.wrap(HexFormat.of().parseHex(hex));
        return MemoryRecords.readableRecords(bytes).batches().iterator().next();
    }

    /** What UnifiedLog's append does with producer state for one batch. */
    private String append(RecordBatch batch, boolean leader) throws Exception {
        if (!batch.hasProducerId()) {
            return "ok";
        }
        long pid = batch.producerId();
        AppendOrigin origin = !leader ? AppendOrigin.REPLICATION
            : batch.isControlBatch() ? AppendOrigin.COORDINATOR : AppendOrigin.CLIENT;
        if (origin == AppendOrigin.CLIENT) {
            Optional<ProducerStateEntry> last = state.lastEntry(pid);
            if (last.isPresent()) {
                @SuppressWarnings("unchecked")
                Optional<BatchMetadata> duplicate = (Optional<BatchMetadata>) findDuplicateBatch.invoke(last.get(), batch);
                if (duplicate.isPresent()) {
                    BatchMetadata d = duplicate.get();
                    return "dup " + (d.lastOffset() - d.offsetDelta()) + " " + d.lastOffset();
                }
            }
        }
        ProducerAppendInfo info = state.prepareUpdate(pid, origin);
        Optional<CompletedTxn> completed = batch.isControlBatch() && origin != AppendOrigin.REPLICATION
            ? info.append(batch, Optional.empty(), (short) 0)
            : info.append(batch, Optional.empty());
        state.update(info);
        completed.ifPresent(state::completeTxn);
        state.updateMapEndOffset(batch.lastOffset() + 1);
        return "ok";
    }

    private String describe() {
        StringBuilder s = new StringBuilder("ok");
        Map<Long, ProducerStateEntry> producers = new TreeMap<>(state.activeProducers());
        for (Map.Entry<Long, ProducerStateEntry> p : producers.entrySet()) {
            ProducerStateEntry e = p.getValue();
            List<String> batches = new ArrayList<>();
            for (BatchMetadata b : e.batchMetadata()) {
                long firstOffset = b.lastOffset() - b.offsetDelta();
                batches.add(b.firstSeq() + "-" + b.lastSeq() + "@" + firstOffset + "-" + b.lastOffset());
            }
            String txn = e.currentTxnFirstOffset().isPresent() ? Long.toString(e.currentTxnFirstOffset().getAsLong()) : "-";
            s.append(' ').append(p.getKey()).append(':').append(e.producerEpoch()).append(':').append(txn)
                .append(":[").append(String.join(",", batches)).append(']');
        }
        return s.toString();
    }
}
