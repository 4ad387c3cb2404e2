package dev.kmirror.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produces kmirror's live-broker scenario to one partition with Kafka's own Java producer, and
 * prints what it produced as JSON lines (one per step) on stdout.
 *
 * <p>Usage: {@code LiveProducer BOOTSTRAP TOPIC STEP...} where a step is
 *
 * <ul>
 *   <li>{@code create} — create TOPIC (1 partition, replication factor 1) if it does not exist;
 *   <li>{@code plain:B:N} — B batches of N records, non-idempotent producer ({@code acks=all});
 *   <li>{@code idem:B:N} — B batches of N records, idempotent producer;
 *   <li>{@code commit:ID:N} / {@code abort:ID:N} — a transaction of N records (one batch) with
 *       transactional id ID, then committed / aborted;
 *   <li>{@code open:ID:N} — a transaction of N records that is flushed and left open: the
 *       process ends with {@code Runtime.halt} right after its line, so nothing aborts it (a
 *       normal close would). It must be the last step.
 * </ul>
 *
 * <p>Each line: {@code {"step":"plain","first_offset":0,"last_offset":4,"batches":2}}.
 */
public final class LiveProducer {
    private LiveProducer() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: LiveProducer BOOTSTRAP TOPIC STEP...");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        for (int i = 2; i < args.length; i++) {
            String[] parts = args[i].split(":");
            switch (parts[0]) {
                case "create" -> create(bootstrap, topic);
                case "plain" -> batches(bootstrap, topic, "plain", false,
                        Integer.parseInt(parts[1]), Integer.parseInt(parts[2]));
                case "idem" -> batches(bootstrap, topic, "idem", true,
                        Integer.parseInt(parts[1]), Integer.parseInt(parts[2]));
                case "commit", "abort", "open" -> transaction(bootstrap, topic, parts[0], parts[1],
                        Integer.parseInt(parts[2]));
                default -> {
                    System.err.println("unknown step " + args[i]);
                    System.exit(2);
                }
            }
        }
    }

    private static void create(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, Optional.of(1), Optional.of((short) 1))))
                        .all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            String id = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                    .topicId().toString();
            System.out.println("{\"step\":\"create\",\"topic\":\"" + topic + "\",\"topic_id\":\"" + id
                    + "\"}");
            System.out.flush();
        }
    }

    private static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        return props;
    }

    private static void batches(String bootstrap, String topic, String step, boolean idempotent,
            int batches, int records) throws Exception {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        // One batch per flush: a long linger keeps the records of a round together, flush sends them.
        props.put(ProducerConfig.LINGER_MS_CONFIG, "1000");
        long first = -1;
        long last = -1;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int b = 0; b < batches; b++) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int r = 0; r < records; r++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + r,
                            step + "-" + b + "-" + r)));
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) {
                    long offset = f.get().offset();
                    if (first < 0) {
                        first = offset;
                    }
                    last = offset;
                }
            }
        }
        line(step, first, last, batches, null);
    }

    private static void transaction(String bootstrap, String topic, String how, String id,
            int records) throws Exception {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "1000");
        // The open transaction must outlive the test: the broker aborts it after this timeout.
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "900000");
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        producer.initTransactions();
        producer.beginTransaction();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int r = 0; r < records; r++) {
            sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + r, how + "-" + r)));
        }
        producer.flush();
        long first = sent.get(0).get().offset();
        long last = sent.get(sent.size() - 1).get().offset();
        switch (how) {
            case "commit" -> producer.commitTransaction();
            case "abort" -> producer.abortTransaction();
            default -> {
                line(how, first, last, 1, id);
                // No close: closing a producer aborts its ongoing transaction.
                Runtime.getRuntime().halt(0);
            }
        }
        producer.close(Duration.ofSeconds(30));
        line(how, first, last, 1, id);
    }

    private static void line(String step, long first, long last, int batches, String id) {
        StringBuilder out = new StringBuilder();
        out.append("{\"step\":\"").append(step).append("\",\"first_offset\":").append(first)
                .append(",\"last_offset\":").append(last).append(",\"batches\":").append(batches);
        if (id != null) {
            out.append(",\"transactional_id\":\"").append(id).append('"');
        }
        out.append('}');
        System.out.println(out);
        System.out.flush();
    }
}
