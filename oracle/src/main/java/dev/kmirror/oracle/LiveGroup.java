package dev.kmirror.oracle;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The source-side metadata of kmirror's live sync scenario, written with Kafka's own clients:
 * topic config overrides and ACLs through {@code Admin}, committed offsets through a
 * {@code KafkaConsumer} in a group. Prints one JSON line per step on stdout.
 *
 * <p>Usage: {@code LiveGroup BOOTSTRAP TOPIC STEP...} where a step is
 *
 * <ul>
 *   <li>{@code config:KEY=VALUE} — {@code incrementalAlterConfigs} SET on TOPIC; a value the
 *       broker refuses is reported ({@code "accepted":false} and the exception's class), not
 *       thrown;
 *   <li>{@code acl:PRINCIPAL,RESOURCE_TYPE,NAME,OPERATION,PERMISSION} — {@code createAcls} of a
 *       LITERAL binding from any host, e.g. {@code acl:User:app,TOPIC,orders,READ,ALLOW};
 *   <li>{@code consume:GROUP:N:PROTOCOL} — a consumer of group GROUP ({@code group.protocol}
 *       {@code classic} or {@code consumer}) subscribes to TOPIC, reads N records from the
 *       group's committed position (earliest without one), commits the offset after the N-th
 *       with {@code commitSync} and leaves the group; {@code consume:GROUP:N:PROTOCOL:stay}
 *       keeps the member in the group: after the last step the program prints
 *       {@code {"step":"holding","members":M}} and keeps its members for 30 s;
 *   <li>{@code commit:GROUP:OFFSET} — {@code alterConsumerGroupOffsets} of partition 0 to
 *       OFFSET for an empty group, with no check against the log.
 * </ul>
 *
 * <p>Lines: {@code {"step":"consume","group":"billing","first_offset":0,"last_offset":6,
 * "committed":7}}, {@code {"step":"commit","group":"forged","committed":1000}},
 * {@code {"step":"config","key":"retention.ms","accepted":true}}, {@code {"step":"acl","principal":"User:app"}}.
 */
public final class LiveGroup {
    private LiveGroup() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: LiveGroup BOOTSTRAP TOPIC STEP...");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        List<KafkaConsumer<String, String>> staying = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String step = args[i];
            int colon = step.indexOf(':');
            String kind = colon < 0 ? step : step.substring(0, colon);
            String rest = colon < 0 ? "" : step.substring(colon + 1);
            switch (kind) {
                case "config" -> config(bootstrap, topic, rest);
                case "acl" -> acl(bootstrap, rest);
                case "consume" -> consume(bootstrap, topic, rest.split(":"), staying);
                case "commit" -> commit(bootstrap, topic, rest.split(":"));
                default -> {
                    System.err.println("unknown step " + step);
                    System.exit(2);
                }
            }
        }
        if (!staying.isEmpty()) {
            System.out.println("{\"step\":\"holding\",\"members\":" + staying.size() + "}");
            System.out.flush();
            // The members stay in their groups (heartbeating in the background) until the
            // caller has looked, then leave.
            Thread.sleep(30_000);
            for (KafkaConsumer<String, String> c : staying) {
                c.close();
            }
        }
    }

    private static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    private static void config(String bootstrap, String topic, String keyValue) throws Exception {
        int eq = keyValue.indexOf('=');
        String key = keyValue.substring(0, eq);
        String value = keyValue.substring(eq + 1);
        String error = null;
        try (Admin admin = admin(bootstrap)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry(key, value), AlterConfigOp.OpType.SET)))).all().get();
        } catch (ExecutionException e) {
            error = e.getCause().getClass().getSimpleName();
        }
        System.out.println("{\"step\":\"config\",\"key\":\"" + key + "\",\"accepted\":"
                + (error == null) + (error == null ? "" : ",\"error\":\"" + error + "\"") + "}");
        System.out.flush();
    }

    private static void acl(String bootstrap, String spec) throws Exception {
        String[] f = spec.split(",");
        AclBinding binding = new AclBinding(
                new ResourcePattern(ResourceType.fromString(f[1]), f[2], PatternType.LITERAL),
                new AccessControlEntry(f[0], "*", AclOperation.fromString(f[3]),
                        AclPermissionType.fromString(f[4])));
        try (Admin admin = admin(bootstrap)) {
            admin.createAcls(List.of(binding)).all().get();
        }
        System.out.println("{\"step\":\"acl\",\"principal\":\"" + f[0] + "\"}");
        System.out.flush();
    }

    private static void consume(String bootstrap, String topic, String[] parts,
            List<KafkaConsumer<String, String>> staying) throws Exception {
        String group = parts[0];
        int wanted = Integer.parseInt(parts[1]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, parts[2]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        long first = -1;
        long last = -1;
        int read = 0;
        boolean stay = parts.length > 3 && parts[3].equals("stay");
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        try {
            consumer.subscribe(List.of(topic));
            Instant deadline = Instant.now().plusSeconds(60);
            while (read < wanted) {
                if (Instant.now().isAfter(deadline)) {
                    throw new IllegalStateException("group " + group + " read " + read + " of "
                            + wanted + " records within 60 s");
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (read == wanted) {
                        break;
                    }
                    if (first < 0) {
                        first = r.offset();
                    }
                    last = r.offset();
                    read++;
                }
            }
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(last + 1)));
        } finally {
            if (stay) {
                staying.add(consumer);
            } else {
                consumer.close();
            }
        }
        System.out.println("{\"step\":\"consume\",\"group\":\"" + group + "\",\"first_offset\":"
                + first + ",\"last_offset\":" + last + ",\"committed\":" + (last + 1) + "}");
        System.out.flush();
    }

    private static void commit(String bootstrap, String topic, String[] parts) throws Exception {
        String group = parts[0];
        long offset = Long.parseLong(parts[1]);
        try (Admin admin = admin(bootstrap)) {
            admin.alterConsumerGroupOffsets(group,
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(offset))).all().get();
        }
        System.out.println("{\"step\":\"commit\",\"group\":\"" + group + "\",\"committed\":"
                + offset + "}");
        System.out.flush();
    }
}
