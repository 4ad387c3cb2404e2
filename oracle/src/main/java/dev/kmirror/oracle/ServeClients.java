package dev.kmirror.oracle;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java clients against a cluster or a serving kmirror node, for kmirror's serve
 * tests. Prints one JSON line per result on stdout.
 *
 * <p>Usage: {@code ServeClients BOOTSTRAP STEP...} where a step is
 *
 * <ul>
 *   <li>{@code read:TOPIC:ISOLATION} — a consumer with no group assigns every partition of
 *       TOPIC and reads from the earliest offset to the end offset its isolation level
 *       ({@code read_committed} or {@code read_uncommitted}) sees; per partition a line with the
 *       record count, the first and last offsets, and a SHA-256 of every record's offset, key
 *       and value;
 *   <li>{@code group:GROUP:TOPIC:N} — a consumer of group GROUP (classic protocol) subscribes to
 *       TOPIC, reads N records from the group's committed position (earliest without one), or
 *       fewer when its partitions are assigned and nothing arrives for 4 s (or after 15 s), commits with {@code commitSync} and leaves; one line with the
 *       records read per partition ({@code offsets}: the offsets, for duplicate counting) and
 *       what it committed;
 *   <li>{@code produce:TOPIC:N:IDEMPOTENT} — a producer ({@code acks=all}, idempotence
 *       {@code true} or {@code false}) sends N records round-robin to TOPIC's partitions, one
 *       at a time; one line with the records acknowledged, their offsets per partition, and
 *       the errors by exception class and message;
 *   <li>{@code txn:TOPIC:N:GROUP} — a transactional producer ({@code transactional.id}
 *       {@code kmirror-oracle-txn}) sends N records round-robin to TOPIC's partitions in a
 *       transaction that also commits GROUP's offset N for partition 0
 *       ({@code sendOffsetsToTransaction}) and commits, then N more in a transaction it aborts;
 *       one line with the records sent in each, the errors by exception class, and GROUP's
 *       committed offsets afterwards (Admin {@code listConsumerGroupOffsets});
 *   <li>{@code config:FILE} — the client properties in FILE (security settings, say) go into
 *       every client the later steps create; no line;
 *   <li>{@code create:TOPIC:N} — Admin {@code createTopics} of TOPIC with N partitions and the
 *       default replication factor, {@code grow:TOPIC:N} — Admin {@code createPartitions} of
 *       TOPIC to N partitions, and {@code delete:TOPIC} — Admin {@code deleteTopics} of TOPIC;
 *       one line each with the error's exception class and message ({@code null} when it
 *       succeeded).
 * </ul>
 */
public final class ServeClients {
    private ServeClients() {}

    /** What a {@code config} step loaded, for every client created after it. */
    private static final Properties EXTRA = new Properties();

    /** A client's properties: the {@code config} step's, then {@code bootstrap}. */
    private static Properties base(String bootstrap) {
        Properties props = new Properties();
        props.putAll(EXTRA);
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ServeClients BOOTSTRAP STEP...");
            System.exit(2);
        }
        String bootstrap = args[0];
        for (int i = 1; i < args.length; i++) {
            String[] parts = args[i].split(":");
            switch (parts[0]) {
                case "config" -> {
                    try (java.io.Reader in = java.nio.file.Files.newBufferedReader(
                            java.nio.file.Path.of(parts[1]))) {
                        EXTRA.load(in);
                    }
                }
                case "read" -> read(bootstrap, parts[1], parts[2]);
                case "group" -> group(bootstrap, parts[1], parts[2], Integer.parseInt(parts[3]));
                case "produce" -> produce(bootstrap, parts[1], Integer.parseInt(parts[2]),
                        Boolean.parseBoolean(parts[3]));
                case "txn" -> txn(bootstrap, parts[1], Integer.parseInt(parts[2]), parts[3]);
                case "create" -> admin(bootstrap, "create", parts[1], admin -> admin
                        .createTopics(List.of(new NewTopic(parts[1],
                                Optional.of(Integer.parseInt(parts[2])), Optional.empty())))
                        .all());
                case "grow" -> admin(bootstrap, "grow", parts[1], admin -> admin
                        .createPartitions(Map.of(parts[1],
                                NewPartitions.increaseTo(Integer.parseInt(parts[2]))))
                        .all());
                case "delete" -> admin(bootstrap, "delete", parts[1],
                        admin -> admin.deleteTopics(List.of(parts[1])).all());
                default -> {
                    System.err.println("unknown step " + args[i]);
                    System.exit(2);
                }
            }
        }
    }

    private static Properties consumerProps(String bootstrap, String isolation) {
        Properties props = base(bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class.getName());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return props;
    }

    private static void read(String bootstrap, String topic, String isolation) throws Exception {
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(consumerProps(bootstrap, isolation))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            Map<Integer, MessageDigest> digests = new TreeMap<>();
            Map<Integer, long[]> stats = new TreeMap<>();
            for (TopicPartition tp : tps) {
                digests.put(tp.partition(), MessageDigest.getInstance("SHA-256"));
                stats.put(tp.partition(), new long[] {0, -1, -1});
            }
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    MessageDigest d = digests.get(r.partition());
                    d.update((r.offset() + "|" + r.key() + "|" + r.value() + "\n")
                            .getBytes(StandardCharsets.UTF_8));
                    long[] s = stats.get(r.partition());
                    s[0]++;
                    if (s[1] < 0) {
                        s[1] = r.offset();
                    }
                    s[2] = r.offset();
                }
            }
            for (Map.Entry<Integer, long[]> e : stats.entrySet()) {
                long[] s = e.getValue();
                System.out.println("{\"step\":\"read\",\"topic\":\"" + topic + "\",\"partition\":"
                        + e.getKey() + ",\"records\":" + s[0] + ",\"first\":" + s[1]
                        + ",\"last\":" + s[2] + ",\"end\":"
                        + end.get(new TopicPartition(topic, e.getKey())) + ",\"digest\":\""
                        + hex(digests.get(e.getKey()).digest()) + "\"}");
            }
            System.out.flush();
        }
    }

    private static void group(String bootstrap, String group, String topic, int n)
            throws Exception {
        Properties props = consumerProps(bootstrap, "read_committed");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1");
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            int read = 0;
            long deadline = System.currentTimeMillis() + 15_000;
            long idleSince = -1;
            while (read < n && System.currentTimeMillis() < deadline) {
                var polled = consumer.poll(Duration.ofMillis(200));
                long now = System.currentTimeMillis();
                if (!polled.isEmpty()) {
                    idleSince = now;
                } else if (idleSince < 0 && !consumer.assignment().isEmpty()) {
                    idleSince = now;
                } else if (idleSince >= 0 && now - idleSince > 4_000) {
                    break;
                }
                for (ConsumerRecord<String, String> r : polled) {
                    offsets.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
                    next.put(new TopicPartition(topic, r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                    read++;
                }
            }
            consumer.commitSync(next);
            Map<Integer, Long> committed = new TreeMap<>();
            toPartitions(next).forEach((p, o) -> committed.put(p, o.offset()));
            String out = "{\"step\":\"group\",\"group\":\"" + group + "\",\"read\":" + read
                    + ",\"offsets\":" + object(offsets) + ",\"committed\":" + object(committed)
                    + "}";
            System.out.println(out);
            System.out.flush();
        }
    }

    private static Map<Integer, OffsetAndMetadata> toPartitions(
            Map<TopicPartition, OffsetAndMetadata> m) {
        Map<Integer, OffsetAndMetadata> out = new TreeMap<>();
        m.forEach((tp, o) -> out.put(tp.partition(), o));
        return out;
    }

    private static Properties producerProps(String bootstrap) {
        Properties props = base(bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        return props;
    }

    private static void produce(String bootstrap, String topic, int n, boolean idempotent)
            throws Exception {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "5000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
        Map<String, Integer> errors = new TreeMap<>();
        Map<Integer, List<Long>> acked = new TreeMap<>();
        int ok = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            int partitions = producer.partitionsFor(topic).size();
            for (int i = 0; i < n; i++) {
                Future<RecordMetadata> f = producer.send(new ProducerRecord<>(topic,
                        i % partitions, "new-" + i, "written-to-the-destination-" + i));
                try {
                    RecordMetadata md = f.get();
                    acked.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
                    ok++;
                } catch (java.util.concurrent.ExecutionException e) {
                    String key = e.getCause().getClass().getSimpleName();
                    errors.merge(key, 1, Integer::sum);
                }
            }
        }
        String out = "{\"step\":\"produce\",\"topic\":\"" + topic + "\",\"acked\":" + ok
                + ",\"offsets\":" + object(acked) + ",\"errors\":" + object(errors) + "}";
        System.out.println(out);
        System.out.flush();
    }

    private static void txn(String bootstrap, String topic, int n, String group)
            throws Exception {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "kmirror-oracle-txn");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "10000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        Map<String, Integer> errors = new TreeMap<>();
        int[] sent = {0, 0};
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            int partitions = producer.partitionsFor(topic).size();
            producer.initTransactions();
            for (int t = 0; t < 2; t++) {
                boolean commit = t == 0;
                String kind = commit ? "committed-" : "aborted-";
                try {
                    producer.beginTransaction();
                    for (int i = 0; i < n; i++) {
                        producer.send(new ProducerRecord<>(topic, i % partitions, kind + i,
                                kind + "value-" + i)).get();
                        sent[t]++;
                    }
                    if (commit) {
                        producer.sendOffsetsToTransaction(
                                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(n)),
                                new ConsumerGroupMetadata(group));
                        producer.commitTransaction();
                    } else {
                        producer.abortTransaction();
                    }
                } catch (Exception e) {
                    Throwable cause = e instanceof java.util.concurrent.ExecutionException
                            ? e.getCause() : e;
                    errors.merge(cause.getClass().getSimpleName(), 1, Integer::sum);
                }
            }
        }
        Map<Integer, Long> offsets = new TreeMap<>();
        Properties adminProps = base(bootstrap);
        adminProps.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(adminProps)) {
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .forEach((tp, o) -> offsets.put(tp.partition(), o.offset()));
        }
        String out = "{\"step\":\"txn\",\"topic\":\"" + topic + "\",\"committed\":" + sent[0]
                + ",\"aborted\":" + sent[1] + ",\"errors\":" + object(errors)
                + ",\"group_offsets\":" + object(offsets) + "}";
        System.out.println(out);
        System.out.flush();
    }

    /** One Admin call on {@code topic}: a line with its error's class and message, if any. */
    private static void admin(String bootstrap, String step, String topic,
            Function<Admin, KafkaFuture<Void>> call) throws Exception {
        Properties props = base(bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        String error = null;
        String message = null;
        try (Admin admin = Admin.create(props)) {
            try {
                call.apply(admin).get();
            } catch (java.util.concurrent.ExecutionException e) {
                error = e.getCause().getClass().getSimpleName();
                message = e.getCause().getMessage();
            }
        }
        System.out.println("{\"step\":\"" + step + "\",\"topic\":\"" + topic
                + "\",\"error\":" + json(error) + ",\"message\":" + json(message) + "}");
        System.out.flush();
    }

    /**
     * {@code m} as a JSON object: its keys as strings, its values as they print (numbers, and
     * lists of numbers, print as JSON).
     */
    private static String object(Map<?, ?> m) {
        StringBuilder out = new StringBuilder("{");
        m.forEach((k, v) -> out.append(out.length() > 1 ? "," : "").append('"').append(k)
                .append("\":").append(v));
        return out.append('}').toString();
    }

    /** {@code s} as a JSON string, or {@code null}. */
    private static String json(String s) {
        if (s == null) {
            return "null";
        }
        return '"' + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + '"';
    }

    private static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder();
        for (byte b : bytes) {
            s.append(String.format("%02x", b));
        }
        return s.toString();
    }
}
