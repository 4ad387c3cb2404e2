package dev.kmirror.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Creates topics on a multi-broker cluster and produces to every partition of them with Kafka's
 * own Java producer, for kmirror's live-cluster test; prints one JSON line per step on stdout.
 *
 * <p>Usage: {@code LiveCluster BOOTSTRAP STEP...} where a step is
 *
 * <ul>
 *   <li>{@code create:TOPIC:P:RF} — create TOPIC with P partitions and replication factor RF (if
 *       it does not exist) and wait until every partition has a leader;
 *   <li>{@code plain:TOPIC:B:N} — to every partition, B batches of N records (idempotent
 *       producer, {@code acks=all});
 *   <li>{@code commit:TOPIC:ID:N} / {@code abort:TOPIC:ID:N} — one transaction (transactional
 *       id ID) writing N records to every partition, then committed / aborted;
 *   <li>{@code grow:TOPIC:P} — add partitions to TOPIC until it has P (Admin
 *       {@code createPartitions}) and wait until every partition has a leader;
 *   <li>{@code delete:TOPIC} — delete TOPIC and wait until the cluster no longer describes it;
 *   <li>{@code fill:TOPIC:N:SIZE} — to every partition, N records with no key and a SIZE-byte
 *       value (idempotent producer, {@code acks=all}, Kafka's default batching: a bulk data set
 *       for the {@code live_cluster} benchmark).
 * </ul>
 *
 * <p>Each line: {@code {"step":"plain","topic":"orders","partitions":6,"records":60}}.
 */
public final class LiveCluster {
    private LiveCluster() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: LiveCluster BOOTSTRAP STEP...");
            System.exit(2);
        }
        String bootstrap = args[0];
        for (int i = 1; i < args.length; i++) {
            String[] parts = args[i].split(":");
            switch (parts[0]) {
                case "create" -> create(bootstrap, parts[1], Integer.parseInt(parts[2]),
                        Short.parseShort(parts[3]));
                case "plain" -> plain(bootstrap, parts[1], Integer.parseInt(parts[2]),
                        Integer.parseInt(parts[3]));
                case "fill" -> fill(bootstrap, parts[1], Integer.parseInt(parts[2]),
                        Integer.parseInt(parts[3]));
                case "commit", "abort" -> transaction(bootstrap, parts[1], parts[0], parts[2],
                        Integer.parseInt(parts[3]));
                case "grow" -> grow(bootstrap, parts[1], Integer.parseInt(parts[2]));
                case "delete" -> delete(bootstrap, parts[1]);
                default -> {
                    System.err.println("unknown step " + args[i]);
                    System.exit(2);
                }
            }
        }
    }

    private static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    private static int partitions(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                    .partitions().size();
        }
    }

    private static void create(String bootstrap, String topic, int partitions, short rf)
            throws Exception {
        try (Admin admin = admin(bootstrap)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, Optional.of(partitions),
                        Optional.of(rf)))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            TopicDescription description = null;
            for (int attempt = 0; attempt < 300; attempt++) {
                try {
                    description = admin.describeTopics(List.of(topic)).allTopicNames().get()
                            .get(topic);
                } catch (ExecutionException e) {
                    // The new topic's metadata is still on its way to the broker asked.
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                        throw e;
                    }
                    Thread.sleep(100);
                    continue;
                }
                boolean led = description.partitions().size() == partitions
                        && description.partitions().stream().allMatch(p -> p.leader() != null
                                && p.leader().id() >= 0 && p.isr().size() == rf);
                if (led) {
                    break;
                }
                Thread.sleep(100);
            }
            if (description == null) {
                throw new IllegalStateException("topic " + topic + " has no metadata after 30 s");
            }
            System.out.println("{\"step\":\"create\",\"topic\":\"" + topic + "\",\"topic_id\":\""
                    + description.topicId() + "\",\"partitions\":" + partitions + "}");
            System.out.flush();
        }
    }

    private static void grow(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createPartitions(java.util.Map.of(topic,
                    org.apache.kafka.clients.admin.NewPartitions.increaseTo(partitions)))
                    .all().get();
            for (int attempt = 0; attempt < 300; attempt++) {
                TopicDescription description = admin.describeTopics(List.of(topic))
                        .allTopicNames().get().get(topic);
                if (description.partitions().size() == partitions && description.partitions()
                        .stream().allMatch(p -> p.leader() != null && p.leader().id() >= 0)) {
                    break;
                }
                Thread.sleep(100);
            }
            System.out.println("{\"step\":\"grow\",\"topic\":\"" + topic
                    + "\",\"partitions\":" + partitions + "}");
            System.out.flush();
        }
    }

    private static void delete(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.deleteTopics(List.of(topic)).all().get();
            for (int attempt = 0; attempt < 300; attempt++) {
                if (!admin.listTopics().names().get().contains(topic)) {
                    break;
                }
                Thread.sleep(100);
            }
            System.out.println("{\"step\":\"delete\",\"topic\":\"" + topic + "\"}");
            System.out.flush();
        }
    }

    private static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        // One batch per partition per flush: a long linger keeps a round's records together.
        props.put(ProducerConfig.LINGER_MS_CONFIG, "1000");
        return props;
    }

    private static void plain(String bootstrap, String topic, int batches, int records)
            throws Exception {
        int partitions = partitions(bootstrap, topic);
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int b = 0; b < batches; b++) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    for (int r = 0; r < records; r++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, p, "k" + r,
                                "plain-" + topic + "-" + p + "-" + b + "-" + r)));
                    }
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) {
                    f.get();
                }
            }
        }
        line("plain", topic, partitions, partitions * batches * records);
    }

    private static void fill(String bootstrap, String topic, int records, int size)
            throws Exception {
        int partitions = partitions(bootstrap, topic);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int r = 0; r < records; r++) {
                for (int p = 0; p < partitions; p++) {
                    byte[] value = new byte[size];
                    for (int i = 0; i < size; i++) {
                        value[i] = (byte) ('a' + (r + p + i) % 26);
                    }
                    producer.send(new ProducerRecord<>(topic, p, null, value), (m, e) -> {
                        if (e != null) {
                            failed.compareAndSet(null, e);
                        }
                    });
                }
                if (failed.get() != null) {
                    break;
                }
            }
            producer.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
        line("fill", topic, partitions, partitions * records);
    }

    private static void transaction(String bootstrap, String topic, String how, String id,
            int records) throws Exception {
        int partitions = partitions(bootstrap, topic);
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                for (int r = 0; r < records; r++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, p, "k" + r,
                            how + "-" + topic + "-" + p + "-" + r)));
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
            if (how.equals("commit")) {
                producer.commitTransaction();
            } else {
                producer.abortTransaction();
            }
            producer.close(Duration.ofSeconds(30));
        }
        line(how, topic, partitions, partitions * records);
    }

    private static void line(String step, String topic, int partitions, int records) {
        System.out.println("{\"step\":\"" + step + "\",\"topic\":\"" + topic + "\",\"partitions\":"
                + partitions + ",\"records\":" + records + "}");
        System.out.flush();
    }
}
