package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.tools.ConsumerPerformance;
import org.apache.kafka.tools.ProducerPerformance;

/**
 * Runs Apache Kafka 4.4.0's {@code kafka-consumer-perf-test} (the class behind
 * {@code kafka-consumer-perf-test.sh}, {@link ConsumerPerformance}) again and again in one JVM,
 * for kmirror's {@code live_cluster} benchmark: the JVM stays warm between runs, as the Rust
 * side does, so a run's time is the tool's work and not the JVM's start.
 *
 * <p>Each line on stdin is one run: the tool's arguments separated by spaces (e.g.
 * {@code --bootstrap-server B --include t.* --num-records N --group G --hide-header}). The
 * answer is one line on stdout: the run's wall-clock time in nanoseconds (around
 * {@code ConsumerPerformance.main}: consumer creation, group join, fetching, close), a tab, then
 * the tool's own last output line (its CSV: start.time, end.time, data.consumed.in.MB, MB.sec,
 * data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec,
 * fetch.nMsg.sec). Anything else the tool printed (its timeout warning) goes to stderr. A tool
 * error ends the JVM (the tool calls {@code Exit.exit(1)}).
 *
 * <p>A line starting with {@code producer} runs {@code kafka-producer-perf-test}
 * ({@link ProducerPerformance}) with the rest of the line instead; its last output line is its
 * summary ({@code N records sent, R records/sec (M MB/sec), ...}).
 */
public final class ConsumerPerfBench {
    private ConsumerPerfBench() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            boolean producer = line.startsWith("producer ");
            String[] toolArgs = (producer ? line.substring("producer ".length()) : line)
                    .trim().split(" +");
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            long start = System.nanoTime();
            try {
                if (producer) {
                    ProducerPerformance.main(toolArgs);
                } else {
                    ConsumerPerformance.main(toolArgs);
                }
            } finally {
                System.setOut(out);
            }
            long nanos = System.nanoTime() - start;
            String[] lines = captured.toString(StandardCharsets.UTF_8).split("\n");
            String last = "";
            for (String l : lines) {
                if (l.isBlank()) {
                    continue;
                }
                if (!last.isEmpty()) {
                    System.err.println(last);
                }
                last = l.trim();
            }
            out.println(nanos + "\t" + last);
            out.flush();
        }
    }
}
